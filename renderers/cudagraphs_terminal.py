"""`tcx cudagraphs` for people: per compiled graph, captured or skipped, and why, with the user line."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from tcx.core.views.cudagraphs import CudagraphsView, GraphCudagraphs
from tcx.renderers.codegen_terminal import render_preview_notes
from tcx.renderers.pipeline_common import header
from tcx.renderers.safe import clean

STATUS = {
    "captured": ("captured by a CUDA-graph tree", "good"),
    "wrapped": ("handed to CUDA graphs, not recorded in this run", "warn"),
    "partly": (
        "partly handed to CUDA graphs (some partitions stay outside), not recorded in this run",
        "warn",
    ),
    "skipped": ("requested (reduce-overhead) and skipped", "bad"),
    "on the CPU": (
        "requested (reduce-overhead), but the graph runs on the CPU: CUDA graphs capture CUDA work only",
        "warn",
    ),
    "not requested": ('CUDA graphs not requested for this graph (no mode="reduce-overhead")', "muted"),
}
PREVIEW_STATUS = {
    "wrapped": ("handed to CUDA graphs: recorded on a later call on the GPU", "good"),
    "partly": ("partly handed to CUDA graphs: some partitions stay outside", "warn"),
}


def render_cudagraphs(view: CudagraphsView, console: Console) -> None:
    captured = sum(1 for g in view.graphs if g.status == "captured")
    header("cudagraphs", view.model, console, f"{captured} of {len(view.graphs)} graph(s) captured")
    nothing = (view.preview_notes or {}).get("nothing_on_cuda") if view.is_preview else None
    if nothing:
        console.print(Text(clean(nothing), style="bad"))
    elif view.is_preview:
        console.print(
            Text(
                f"PREVIEW for {view.device.split(':', 1)[1]}: compile-time CUDA-graph decisions are "
                "torch's own, taken on fake CUDA tensors; run-time ones (recording, checks when a graph "
                "runs) need a GPU and are marked so.",
                style="warn",
            )
        )
    if view.is_preview and view.preview_notes:
        render_preview_notes(view.preview_notes, console)
        console.print()
    if view.unavailable:
        console.print(Text(f"not available: {clean(view.unavailable)}", style="bad"))
        return
    for g in view.graphs:
        label, style = (PREVIEW_STATUS if view.is_preview else {}).get(g.status) or STATUS.get(
            g.status, (g.status, "muted")
        )
        title = Text(f"compile {clean(g.compile_id)} · {clean(g.graph)}  ", style="title")
        title.append(label, style=style)
        if g.captured:
            title.append(f" ({g.captured} recording(s))", style="muted")
        if g.partitions is not None and g.status not in ("not requested", "on the CPU"):
            title.append(
                f"   {g.cudagraphable_partitions} of {g.partitions} partition(s) cudagraphable", style="muted"
            )
        console.print(title)
        if g.status == "skipped" and not g.reasons:
            console.print(Text("    torch recorded no reason for this graph", style="muted"))
        if g.status == "on the CPU":
            _render_on_cpu(g, console)
            continue
        for r in g.reasons:
            line = Text(f"    {r.category}: ", style="gbtype")
            line.append(clean(r.text.splitlines()[0] if r.text else ""))
            line.append(f"  [{r.decided}{', needs a GPU' if r.needs_gpu else ''}]", style="muted")
            console.print(line)
            if r.user_line:
                u = r.user_line
                console.print(
                    Text(
                        f"      {clean(u.get('file'))}:{u.get('line')}  {clean(u.get('code', ''))}",
                        style="muted",
                    )
                )


def _render_on_cpu(g: GraphCudagraphs, console: Console) -> None:
    """One line, not one per op: every op of the graph gave torch the same reason."""
    texts = sorted({r.text.split(" (", 1)[0] for r in g.reasons})
    console.print(
        Text(
            f"    torch: {clean(', '.join(texts))} ({len(g.reasons)} ops kept out of CUDA graphs). On a GPU "
            "machine: --device cuda; without one, --target cuda:sm_90 previews the compile-time decisions.",
            style="muted",
        )
    )
