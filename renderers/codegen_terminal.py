"""`tcx codegen` for people: kernels with provenance, the wrapper call() annotated, buffer lifetimes."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from tcx.core.ingest.lazy_items import stream
from tcx.core.views.codegen import CodegenView, Kernel, Wrapper, lifetimes, wrapper_differences
from tcx.renderers.code_block import Seen, Wrapped, print_code, print_lines, reference
from tcx.renderers.pipeline_common import header, user_line_text
from tcx.renderers.safe import clean

PREVIEW = (
    "PREVIEW for {arch}: the Triton kernels and wrapper Inductor generates for that GPU, produced on this "
    "machine without a GPU. The program ran on fake CUDA tensors, so Dynamo, AOTAutograd (decompositions, "
    "partitioner) and Inductor took the GPU's decisions; the exceptions are listed below."
)
STEP_COLUMN = 72  # the wrapper's lines are aligned up to this width; longer ones push their note right
STEP_STYLE = {
    "alloc": "warn",
    "launch": "good",
    "extern": "gbtype",
    "fallback": "gbtype",
    "reuse": "count",
    "alias": "muted",
    "del": "muted",
    "return": "title",
}


def render_codegen(view: CodegenView, console: Console, *, lifetimes: bool = True) -> None:
    # The totals come last: each module is parsed as it is printed (the output streams).
    extra = f"{len(view.sections)} generated module(s)"
    header("codegen", view.model, console, extra, function=view.selection.function)
    if view.is_preview:
        arch = view.device.split(":", 1)[1]
        nothing = (view.preview_notes or {}).get("nothing_on_cuda")
        console.print(Text(clean(nothing or PREVIEW.format(arch=arch)), style="bad" if nothing else "warn"))
        secs = [o.seconds for o in view.outputs if o.seconds is not None]
        if secs:
            console.print(Text(f"preview codegen: {sum(secs):.2f} s for {len(secs)} graph(s)", style="muted"))
        if view.preview_notes:
            render_preview_notes(view.preview_notes, console)
        console.print()
    if view.unavailable:
        console.print(Text(f"not available: {clean(view.unavailable)}", style="bad"))
        return
    for err in view.preview_errors:
        console.print(Text(f"preview failed for {clean(err)}", style="bad"))
    seen = Seen()  # a kernel repeated across recompiles is printed once
    kernel_count = extern_count = 0
    for section in stream(view.sections):
        wrapper, kernels = section.wrapper, section.kernels
        kernel_count, extern_count = kernel_count + len(kernels), extern_count + len(section.extern_calls)
        title = Text(
            f"compile {clean(wrapper.compile_id)} · {wrapper.graph} · {clean(wrapper.device)}", style="title"
        )
        title.append(
            f"   {len(kernels)} kernel(s), "
            f"{sum(1 for s in wrapper.launches if s.kind != 'launch')} extern call(s)",
            style="muted",
        )
        console.print(title)
        if view.is_preview:
            render_graph_differences(view, wrapper, console)
        for k in kernels:
            render_kernel(k, console, seen)
        if view.selection.kernel:  # one kernel asked for: its code, not the whole wrapper
            continue
        render_wrapper(wrapper, console)
        if lifetimes:
            render_lifetimes(wrapper, console)
        console.print()
    console.print(Text(f"in all: {kernel_count} kernel(s), {extern_count} extern call(s)", style="muted"))


def render_preview_notes(notes: dict[str, Any], console: Console) -> None:
    """What the preview assumed, the decisions it took without a GPU, and what it cannot know."""
    for line in [*notes.get("assumptions", []), *notes.get("notes", [])]:
        console.print(Text(f"  assumed: {clean(line)}", style="muted"))
    if notes.get("stopped"):
        console.print(Text(f"  {clean(notes['stopped'])}", style="bad"))
    if notes.get("cpu_modules") and notes.get("cuda_modules"):
        console.print(
            Text(
                f"  {notes['cpu_modules']} graph(s) of CPU tensors only: they run on the CPU, no GPU code "
                "is generated for them (not shown)",
                style="warn",
            )
        )
    decisions = notes.get("decisions") or []
    if decisions:
        console.print(
            Text(
                f"  what may differ on a GPU ({len(decisions)}): decisions taken by assumption, "
                "graphs that depend on them",
                style="warn",
            )
        )
    explained: set[str] = set()  # each kind's reason is printed once
    for d in decisions:
        where = clean(" ".join(x for x in (d.get("compile_id"), d.get("graph")) if x))
        line = Text(f"    {where}  {clean(d.get('decision'))}: {clean(d.get('what'))}", style="count")
        line.append(f" -> assumed {clean(d.get('assumed'))}", style="muted")
        if d.get("decision") not in explained:
            explained.add(str(d.get("decision")))
            line.append(f" ({clean(d.get('why'))})", style="muted")
        console.print(line)
    console.print(Text("  a preview cannot know:", style="muted"))
    for line in notes.get("cannot_know", []):
        console.print(Text(f"    - {clean(line)}", style="muted"))


def render_graph_differences(view: CodegenView, wrapper: Wrapper, console: Console) -> None:
    """Under a preview's module: why it may differ from a GPU run's (named on this graph)."""
    if wrapper.device == "cpu":
        what = "  runs on the CPU: a graph of CPU tensors, C++ code, not a preview of GPU code"
        console.print(Wrapped(Text(what, style="bad"), prose=True, hang=4))
    for d in wrapper_differences(view, wrapper):
        line = Text(f"  may differ on a GPU, {clean(d['decision'])}: ", style="warn")
        line.append(clean(str(d["what"])), style="muted")
        console.print(Wrapped(line, prose=True, hang=4))


def render_kernel(k: Kernel, console: Console, seen: Seen | None = None) -> None:
    head = Text("  kernel ", style="muted")
    head.append(clean(k.name), style="count")
    head.append(f"  {k.kind} · {clean(k.category)}", style="muted")
    if k.fused_ops:
        head.append(f" · fuses {clean(', '.join(k.fused_ops))}", style="muted")
    console.print(Wrapped(head, prose=True, hang=4))
    o = k.origins
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="muted", justify="right", no_wrap=True)
    grid.add_column()
    nodes = o.get("post_grad_nodes") or o.get("source_nodes")
    if nodes:
        grid.add_row("nodes", Wrapped(clean(", ".join(nodes)), prose=True))
    if o.get("aten_ops"):
        grid.add_row("ATen", Wrapped(clean(", ".join(o["aten_ops"])), prose=True))
    for line in o.get("user_lines") or []:
        grid.add_row("your line", Wrapped(clean(user_line_text(line)), style="loc"))
    console.print(Padding(grid, (0, 0, 0, 4)))
    lexer = "cpp" if k.kind == "cpp" else "python"
    label = f"kernel {k.name} of compile {k.compile_id} · {k.graph}"
    shown = seen.first(k.source, label) if seen is not None else None
    if shown:
        reference(console, shown)
    else:
        print_code(console, k.source, lexer, title=label)
    if k.ptx:
        console.print(Text(f"    PTX ({len(k.ptx.splitlines())} lines)", style="muted"))
        shown = seen.first(k.ptx, f"the PTX of {label}") if seen is not None else None
        if shown:
            reference(console, shown)
        else:
            print_code(console, k.ptx, "text", title=f"PTX of {label}")


def render_wrapper(w: Wrapper, console: Console) -> None:
    console.print(Text("  wrapper call(), annotated", style="title"))
    rows = [(Text(clean(", ".join(w.inputs)) + " = args", style="muted"), "inputs")]
    for s in w.steps:
        note = s.note
        if s.kind == "launch":
            note = "generated kernel" + (f" · {', '.join(s.source_nodes)}" if s.source_nodes else "")
            note += f" · {', '.join(s.aten)}" if s.aten else ""
        elif s.kind in ("extern", "fallback"):  # its own node and line first: the sources are its inputs too
            note = "extern call (vendor library / ATen)" + (f" · {s.note}" if s.note else "")
            note += f" · source nodes {', '.join(s.source_nodes)}" if s.source_nodes else ""
            note += f" · {', '.join(s.aten)}" if s.aten else ""
        elif s.kind == "return":
            note = "returns " + ", ".join(s.buffers)
        step = Text(clean(s.text), style=STEP_STYLE.get(s.kind, ""))
        rows.append((step, f"{s.kind}: {note}" if note else s.kind))
    width = min(max(len(left.plain) for left, _ in rows), STEP_COLUMN)
    lines = []
    for left, note in rows:
        line = left.copy()
        line.append(" " * max(width - len(left.plain), 0) + "  ")
        line.append(clean(note), style="muted")
        lines.append(line)
    print_lines(console, lines, indent=4, title=f"the call() steps of compile {w.compile_id} · {w.graph}")
    allocs = w.allocations
    total = sum(b.bytes or 0 for b in allocs)
    reuse = sum(1 for b in w.buffers if b.origin == "reuse")
    console.print(
        Padding(
            Text(
                f"{len(allocs)} allocation(s), {total} bytes; {reuse} reuse(s); "
                f"returns {', '.join(w.returns) or 'nothing'}",
                style="muted",
            ),
            (0, 0, 0, 4),
        )
    )


def render_lifetimes(w: Wrapper, console: Console, cell: int = 4) -> None:
    rows = lifetimes(w)
    if not rows or not w.launches:
        return
    console.print(Text("  buffer lifetimes (time → launches in call order)", style="title"))
    width = max(len(r.label) for r in rows) + 2
    lines = [f"{i:>3}  {s.name}" for i, s in enumerate(w.launches)]
    title = f"launches of compile {w.compile_id} · {w.graph}"
    print_lines(console, [Text(clean(line), style="muted") for line in lines], indent=4, title=title)
    scale = " " * width + "".join(f"{i:<{cell}}" for i in range(len(w.launches)))
    rows_out = [Text(scale, style="muted")]
    for r in rows:
        bar = _bar(r.first, r.last, len(w.launches), cell)
        text = Text(f"{clean(r.label):<{width}}", style="count" if r.storage == r.name else "")
        text.append(bar, style="good" if r.end == "returned" else "")
        text.append(f"  {r.end}", style="muted")
        rows_out.append(text)
    print_lines(console, rows_out, indent=4, title=f"buffer lifetimes of compile {w.compile_id} · {w.graph}")


def _bar(first: int, last: int, launches: int, cell: int) -> str:
    """A buffer's life under the launch scale: `#` where it is made and last used, `=` between,
    `cell` characters per launch (drawn at once: cell by cell took seconds on a big backward)."""
    if first >= launches or last < first or first < 0:
        return ""
    if last >= launches:  # used past the last launch shown: the bar runs off the scale
        return " " * (cell * first) + "#" + "=" * (cell * (launches - first) - 1)
    return " " * (cell * first) + "#" + "=" * (cell * (last - first)) + "#"
