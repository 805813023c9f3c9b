"""`tcx graphs` for people: per compile the verdict, the saved values, recomputed ops, the graphs."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from tcx.core.torchtext.commas import split_top_level
from tcx.core.torchtext.dtypes import human_bytes
from tcx.core.torchtext.fx_graph import op_base
from tcx.core.views.graphs import GraphsView, Saved
from tcx.renderers.code_block import Seen, Wrapped, print_code, print_lines, reference
from tcx.renderers.pipeline_common import header, user_line_text
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
    header("graphs", view.model, console, function=view.selection.function)
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
    seen = Seen()  # identical graphs (recompiles of the same code) are printed once
    for comp in view.compiles:
        title = Text(f"compile {clean(comp.compile_id)}", style="title")
        mc = view.model.compiles.get(comp.compile_id)
        if mc and mc.co_name:
            title.append(f"  {clean(mc.display_name)}", style="loc")
        console.print(title)
        console.print(Padding(Wrapped(Text(clean(comp.verdict()), style="good"), prose=True), (0, 0, 0, 2)))
        if comp.saved:
            heading = f"what compile {comp.compile_id} saves for backward"
            print_lines(console, _saved_rows(comp.saved), indent=2, title=heading)
        if comp.recomputed:
            t = Text("  recomputed in backward: ", style="warn")
            t.append(clean(", ".join(f"{r['name']} ({op_base(r['op'])})" for r in comp.recomputed)))
            console.print(Wrapped(t, prose=True, hang=4))
        for line in comp.partitioner_log:
            if line.startswith(("Ops banned", "Count of Ops", "# remat")):
                console.print(Text("  partitioner: " + clean(line), style="muted"))
        for kind, text in comp.graphs.items():
            base = "post_grad" if kind.startswith("post_grad") else kind
            if kind not in wanted and base not in wanted:
                continue
            console.print(Text(f"  {TITLES.get(kind, kind)}", style="title"))
            label = f"the {kind} graph of compile {comp.compile_id}"
            shown = seen.first(text.rstrip(), label)
            if shown:
                reference(console, shown)
            else:
                print_code(console, folded_signature(text.rstrip()), "python", title=label)
        console.print()


SIGNATURE_FOLD_ABOVE = 120  # characters: a longer `def forward(...)` line gets one parameter a line
_SIGNATURE = re.compile(
    r"^(?P<indent>[ \t]*)def (?P<name>\w+)\((?P<params>.*)\)(?P<tail>(?: -> [^:]+)?:)$", re.M
)


def folded_signature(text: str) -> str:
    """A graph's `def forward(self, L_idx_: "i64[4, 16][16, 1]cpu", ...)` line, thousands of
    characters on a real model, with one parameter a line (the graph's text is otherwise as torch
    printed it; --format json keeps it whole)."""

    def fold(m: re.Match[str]) -> str:
        if len(m.group(0)) <= SIGNATURE_FOLD_ABOVE:
            return m.group(0)
        indent = m.group("indent")
        params = [p for p in split_top_level(m.group("params")) if p]
        inner = ",\n".join(f"{indent}    {p}" for p in params)
        return f"{indent}def {m.group('name')}(\n{inner},\n{indent}){m.group('tail')}"

    return _SIGNATURE.sub(fold, text, count=1)


SAVED_COLUMNS = ("saved for backward", "shape", "dtype", "bytes", "extra", "produced by")


def _saved_rows(saved: Sequence[Saved]) -> list[Text]:
    """The saved-for-backward table as aligned rows (a compile may save thousands of values); the
    user's line that produced a value goes under its row, so the row stays narrow."""
    cells = []
    for s in saved:
        if s.aliases_input:
            view_of = "" if s.aliases_input == s.name else f" of {s.aliases_input}"
            extra = f"0 (input view{view_of})"
        else:
            extra = human_bytes(s.bytes)
        cells.append(
            (
                clean(s.name),
                clean("[" + ", ".join(s.shape) + "]" if s.shape is not None else "-"),
                clean(s.dtype or "?"),
                human_bytes(s.bytes),
                clean(extra),
                clean(op_base(s.produced_by) or ("input" if s.aliases_input else "?")),
            )
        )
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(SAVED_COLUMNS)]
    right = {3, 4}

    def cell(text: str, i: int) -> str:
        return text.rjust(widths[i]) if i in right else text.ljust(widths[i])

    rows = [Text(" ".join(cell(h, i) for i, h in enumerate(SAVED_COLUMNS)).rstrip(), style="muted")]
    for s, c in zip(saved, cells, strict=True):
        row = Text(cell(c[0], 0), style="count")
        row.append(" " + " ".join(cell(c[i], i) for i in (1, 2, 3)))
        row.append(" " + cell(c[4], 4), style="muted" if s.aliases_input else "")
        row.append(" " + c[5])
        rows.append(row)
        if s.user_line:
            rows.append(Text("    ← " + clean(user_line_text(s.user_line)), style="loc"))
    return rows
