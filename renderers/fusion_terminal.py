"""`tcx fusion` for people: per graph the scheduler nodes, fused groups and kernels, rejected pairs."""

from __future__ import annotations

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from tcx.core.fusion_view import FusionView
from tcx.renderers.pipeline_common import header, user_line_text
from tcx.renderers.safe import clean


def render_fusion(view: FusionView, console: Console) -> None:
    header("fusion", view.model, console, function=view.selection.function)
    if view.device.startswith("cuda:"):
        console.print(
            Text(
                f"PREVIEW for {view.device.split(':', 1)[1]}: Inductor's decisions for a fake CUDA "
                "device on this machine (the whole pipeline traced CUDA tensors; see `tcx codegen "
                "--target` for what the preview assumed).",
                style="warn",
            )
        )
    if view.unavailable:
        console.print(Text(f"not available: {clean(view.unavailable)}", style="bad"))
        return
    for g in view.graphs:
        console.print(
            Text(f"compile {clean(g.compile_id)} · {clean(g.graph)} · {clean(g.device)}", style="title")
        )
        console.print(Padding(Text(clean(g.verdict), style="good"), (0, 0, 0, 2)))
        nodes = Table(box=None, padding=(0, 1), header_style="muted", show_edge=False)
        for col in ("node", "kind", "ATen origins", "your line"):
            nodes.add_column(col)
        for n in g.nodes:
            ops = ", ".join(f"{o['node']}={o['op']}" for o in n.get("origins") or [])
            kind = n.get("kind", "?") + (f" {n['kernel']}" if n.get("kernel") else "")
            lines = "\n".join(user_line_text(u) for u in n.get("user_lines") or [])
            nodes.add_row(
                Text(clean(n.get("name", "?")), style="count"),
                Text(clean(kind)),
                Text(clean(ops)),
                Text(clean(lines), style="loc"),
            )
        console.print(Text("  before fusion", style="title"))
        console.print(Padding(nodes, (0, 0, 0, 4)))
        console.print(Text("  after fusion", style="title"))
        groups = Table(box=None, padding=(0, 1), header_style="muted", show_edge=False)
        for col in ("group", "members", "became", "what"):
            groups.add_column(col)
        for grp in g.groups:
            became = grp.kernel or "?"
            what = grp.category
            if grp.kind == "extern":
                what = "extern call (not fused: a library kernel)"
            elif grp.kind == "fused":
                what = f"{grp.category}: fused {len(grp.members)} nodes"
            groups.add_row(
                Text(clean(grp.name), style="count"),
                Text(clean(", ".join(grp.members))),
                Text(clean(became), style="good" if grp.kind != "extern" else "gbtype"),
                Text(clean(what)),
            )
        console.print(Padding(groups, (0, 0, 0, 4)))
        for use in g.kernel_uses:
            console.print(Text(f"    {clean(use.kernel)} {clean(use.text)}", style="muted"))
        if g.fused_pairs:
            console.print(
                Text("  fused: " + clean(", ".join(f"{a}+{b}" for a, b in g.fused_pairs)), style="good")
            )
        for r in g.rejected:
            t = Text("  not fused: ", style="warn")
            t.append(clean(f"{r['node1']} + {r['node2']}"), style="count")
            t.append(clean(f": {r['reason']}"))
            if r["count"] > 1:
                t.append(f"  (×{r['count']})", style="muted")
            console.print(t)
        console.print()
