"""`tcx fusion` for people: per graph the scheduler nodes, fused groups and kernels, rejected pairs.

Laid out in lines, not tables, so that it fits 80 columns: a node is one line (its kind and ATen
ops) and one line per user line that made it; a group is one line; rejected pairs are listed per
reason. A line wider than the console wraps with ↪ (renderers/code_block.Wrapped), never cut.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
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
    _render_rejected(g, one_file is not None, console)
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


SIDES_SHOWN = 6  # pairs of lines shown per reason a pair was not fused
PAIRS_NAMED = 3  # node pairs named per pair of lines


def _render_rejected(g: GraphFusion, one_file: bool, console: Console) -> None:
    """Pairs Inductor considered and did not fuse, per reason (torch's WhyNoFuse text), grouped by
    the user's lines of the two sides: which of your lines would have shared a kernel."""
    lines_of = _user_lines(g, one_file)
    by_reason: dict[str, list[dict[str, Any]]] = {}
    for r in g.rejected:
        by_reason.setdefault(str(r.get("reason")), []).append(r)
    for reason, rejected in by_reason.items():
        line = Text("  not fused", style="warn")
        line.append(f" ({len(rejected)} pair{'s' if len(rejected) != 1 else ''}): ", style="muted")
        line.append(clean(reason))
        console.print(Wrapped(line, prose=True, hang=4))
        sides: dict[tuple[str, str], list[str]] = {}
        for r in rejected:
            key = (lines_of(r["node1"]), lines_of(r["node2"]))
            sides.setdefault(key, []).append(f"{r['node1']}+{r['node2']}")
        ranked = sorted(sides.items(), key=lambda kv: -len(kv[1]))
        for (a, b), pairs in ranked[:SIDES_SHOWN]:
            row = Text(" " * INDENT)
            row.append(clean(a), style="loc")
            row.append(" + ", style="muted")
            row.append(clean(b), style="loc")
            named = ", ".join(pairs[:PAIRS_NAMED])
            more = f" and {len(pairs) - PAIRS_NAMED} more" if len(pairs) > PAIRS_NAMED else ""
            row.append(
                f"  {len(pairs)} pair{'s' if len(pairs) != 1 else ''}: {clean(named)}{more}", style="muted"
            )
            console.print(Wrapped(row, prose=True, hang=DETAIL))
        if len(ranked) > SIDES_SHOWN:
            rest = sum(len(p) for _, p in ranked[SIDES_SHOWN:])
            console.print(
                Text(
                    f"{' ' * INDENT}and {len(ranked) - SIDES_SHOWN} more pairs of lines ({rest} node pairs; "
                    "--format json lists every pair)",
                    style="muted",
                )
            )


def _user_lines(g: GraphFusion, one_file: bool) -> Callable[[str], str]:
    """A node's (or fused group's) lines of the user's, as `line 46` (`file.py:46` across files)."""
    by_node: dict[str, list[str]] = {}
    for n in g.nodes:
        seen = {(u.get("file"), u.get("line")) for u in n.get("user_lines") or []}
        by_node[str(n.get("name"))] = [
            f"{line}" if one_file else f"{short_path(file)}:{line}" for file, line in sorted(seen, key=str)
        ]

    def lines(name: str) -> str:
        parts = [p for p in name.split("_") if p in by_node] or [name]
        found = list(dict.fromkeys(x for p in parts for x in by_node.get(p, [])))
        if not found:
            return f"{name} (no line of yours)"
        return ("line " if one_file and len(found) == 1 else "lines " if one_file else "") + ", ".join(found)

    return lines
