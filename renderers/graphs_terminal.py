"""`tcx graphs` for people: per compile the verdict, the saved values, recomputed ops, the graphs."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from tcx.core.graphs_view import GraphsView, human_bytes, op_base
from tcx.renderers.pipeline_common import code, header, user_line_text
from tcx.renderers.safe import clean

DEFAULT_SHOW = ("dynamo", "forward", "backward", "inference")
TITLES = {
    "dynamo": "Dynamo's graph (torch level, with shapes)",
    "joint": "AOTAutograd joint graph (forward + backward, ATen level)",
    "forward": "partitioned forward graph (ATen)",
    "backward": "partitioned backward graph (ATen)",
    "inference": "inference graph (ATen)",
    "post_grad_forward": "Inductor post-grad forward graph",
    "post_grad_backward": "Inductor post-grad backward graph",
    "post_grad_inference": "Inductor post-grad inference graph",
}


def render_graphs(view: GraphsView, console: Console, show: Sequence[str] = ()) -> None:
    header("graphs", view.model, console)
    wanted = set(show or DEFAULT_SHOW)
    if "all" in wanted:
        wanted = set(TITLES) | {"post_grad"}
    if "none" in wanted:
        wanted = set()
    if not view.compiles:
        console.print(
            Text(
                "No graphs were recorded (nothing compiled, or the run used no AOTAutograd backend).",
                style="warn",
            )
        )
        return
    for comp in view.compiles:
        title = Text(f"compile {clean(comp.compile_id)}", style="title")
        mc = view.model.compiles.get(comp.compile_id)
        if mc and mc.co_name:
            title.append(f"  {clean(mc.display_name)}", style="loc")
        console.print(title)
        console.print(Padding(Text(clean(comp.verdict()), style="good"), (0, 0, 0, 2)))
        if comp.saved:
            table = Table(box=None, padding=(0, 1), show_edge=False, header_style="muted")
            for col in ("saved for backward", "shape", "dtype", "bytes", "extra", "produced by", "your line"):
                table.add_column(col, justify="right" if col in ("bytes", "extra") else "left")
            for s in comp.saved:
                extra = (
                    "0 (view of input " + s.aliases_input + ")" if s.aliases_input else human_bytes(s.bytes)
                )
                table.add_row(
                    Text(clean(s.name), style="count"),
                    Text(clean("[" + ", ".join(s.shape) + "]" if s.shape is not None else "-")),
                    Text(clean(s.dtype or "?")),
                    Text(human_bytes(s.bytes)),
                    Text(clean(extra), style="muted" if s.aliases_input else ""),
                    Text(clean(op_base(s.produced_by) or ("input" if s.aliases_input else "?"))),
                    Text(clean(user_line_text(s.user_line)), style="loc"),
                )
            console.print(Padding(table, (0, 0, 0, 2)))
        if comp.recomputed:
            t = Text("  recomputed in backward: ", style="warn")
            t.append(clean(", ".join(f"{r['name']} ({op_base(r['op'])})" for r in comp.recomputed)))
            console.print(t)
        for line in comp.partitioner_log:
            if line.startswith(("Ops banned", "Count of Ops", "# remat")):
                console.print(Text("  partitioner: " + clean(line), style="muted"))
        for kind, text in comp.graphs.items():
            base = "post_grad" if kind.startswith("post_grad") else kind
            if kind not in wanted and base not in wanted:
                continue
            console.print(Text(f"  {TITLES.get(kind, kind)}", style="title"))
            console.print(Padding(code(text.rstrip(), "python"), (0, 0, 0, 4)))
        console.print()
