"""`tcx fusion` for people: per graph the scheduler nodes, fused groups and kernels, rejected pairs.

Laid out in lines, not tables, so that it fits 80 columns: a node is one line (its kind and ATen
ops) and one line per user line that made it; a group is one line; rejected pairs are listed per
reason. A line wider than the console wraps with ↪ (renderers/code_block.Wrapped), never cut.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.text import Text

from tcx.core.views.fusion import FusionView, GraphFusion, Group
from tcx.renderers.code_block import Wrapped
from tcx.renderers.header import short_path
from tcx.renderers.pipeline_common import header
from tcx.renderers.safe import clean

INDENT = 4  # a node's or group's line
DETAIL = 8  # its details (your lines) under it


def render_fusion(view: FusionView, console: Console) -> None:
    header("fusion", view.model, console, function=view.selection.function)
    nothing = (view.codegen.preview_notes or {}).get("nothing_on_cuda")
    if nothing:
        console.print(Text(clean(nothing), style="bad"))
    elif view.device.startswith("cuda:"):
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
    if view.graphs:
        console.print(
            Text("Each op is named as torch names it; --format json also gives its FX node.", style="muted")
        )
        console.print()
    for g in view.graphs:
        _render_graph(g, console)


def _render_graph(g: GraphFusion, console: Console) -> None:
    console.print(
        Wrapped(Text(f"compile {clean(g.compile_id)} · {clean(g.graph)} · {clean(g.device)}", style="title"))
    )
    console.print(Wrapped(Text(f"  {clean(g.verdict)}", style="good"), prose=True, hang=2))
    files = {u.get("file") for n in g.nodes for u in n.get("user_lines") or []}
    one_file = next(iter(files)) if len(files) == 1 else None
    title = Text("  before fusion", style="title")
    if one_file is not None:
        title.append(f" (your lines: {clean(short_path(one_file))})", style="muted")
    console.print(Wrapped(title, prose=True, hang=4))
    for n in g.nodes:
        _render_node(n, one_file is not None, console)
    console.print(Text("  after fusion", style="title"))
    for grp in g.groups:
        console.print(Wrapped(_group_line(grp), prose=True, hang=DETAIL))
    for use in g.kernel_uses:
        line = Text(f"{' ' * INDENT}{clean(use.kernel)} {clean(use.text)}", style="muted")
        console.print(Wrapped(line, prose=True, hang=DETAIL))
    if g.fused_pairs:
        fused = Text("  fused: ", style="good")
        fused.append(clean(", ".join(f"{a}+{b}" for a, b in g.fused_pairs)))
        console.print(Wrapped(fused, prose=True, hang=4))
    _render_rejected(g.rejected, console)
    console.print()


def _render_node(n: dict[str, Any], one_file: bool, console: Console) -> None:
    """`op3  pointwise: aten.add.Tensor, aten.mul.Tensor ×4 …`, then each line of the user's that made it."""
    line = Text(" " * INDENT)
    line.append(clean(n.get("name", "?")), style="count")
    kind = str(n.get("kind", "?")) + (f" {n['kernel']}" if n.get("kernel") else "")
    line.append(f"  {clean(kind)}")
    ops = _ops(n.get("origins") or [])
    if ops:
        line.append(f": {clean(ops)}", style="muted")
    console.print(Wrapped(line, prose=True, hang=DETAIL))
    lines = {(u.get("file"), u.get("line")): u for u in n.get("user_lines") or []}  # one per line
    for u in lines.values():
        where = f"line {u.get('line')}" if one_file else f"{short_path(u.get('file'))}:{u.get('line')}"
        row = Text(" " * DETAIL + "← ", style="muted")
        row.append(clean(where), style="loc")
        if u.get("code"):
            row.append(f"  {clean(u['code'])}")
        console.print(Wrapped(row, hang=DETAIL + 2))


def _ops(origins: list[dict[str, Any]]) -> str:
    """The node's ATen ops in order of first use, `×n` when it has several (`.default` dropped)."""
    counts = Counter(str(o.get("op", "?")).removesuffix(".default") for o in origins)
    return ", ".join(op if k == 1 else f"{op} ×{k}" for op, k in counts.items())


def _group_line(grp: Group) -> Text:
    line = Text(" " * INDENT)
    line.append(clean(grp.name), style="count")
    if grp.members != [grp.name]:
        line.append(f" = {clean(' + '.join(grp.members))}")
    line.append(" → ")
    line.append(clean(grp.kernel or "?"), style="good" if grp.kind != "extern" else "gbtype")
    if grp.kind == "extern":
        what = "extern call (not fused: a library kernel)"
    elif grp.kind == "fused":
        what = f"{grp.category}: fused {len(grp.members)} nodes"
    else:
        what = grp.category
    if what:
        line.append(f"  ({clean(what)})", style="muted")
    return line


def _render_rejected(rejected: list[dict[str, Any]], console: Console) -> None:
    """Pairs Inductor considered and did not fuse, one line per reason (torch's WhyNoFuse text)."""
    by_reason: dict[str, list[str]] = {}
    for r in rejected:
        pair = f"{r['node1']}+{r['node2']}" + (f" ×{r['count']}" if r["count"] > 1 else "")
        by_reason.setdefault(str(r.get("reason")), []).append(pair)
    for reason, pairs in by_reason.items():
        line = Text("  not fused", style="warn")
        line.append(f" ({len(pairs)} pair{'s' if len(pairs) != 1 else ''}): ", style="muted")
        line.append(clean(reason))
        line.append(f": {clean(', '.join(pairs))}", style="count")
        console.print(Wrapped(line, prose=True, hang=4))
