"""`tcx bytecode` for people: original | transformed side by side, the decompiled code, and the chain."""

from __future__ import annotations

import itertools
from typing import Any

from rich.console import Console
from rich.text import Text

from tcx.core.views.bytecode import BytecodeView, Frame
from tcx.renderers.code_block import Wrapped, print_code, print_lines
from tcx.renderers.header import location, view_header
from tcx.renderers.safe import clean

COLUMN_MIN = 24  # the left listing's column is at least this wide (then half the width)
GUTTER = 3  # between the two listings


def render_bytecode(view: BytecodeView, console: Console) -> None:
    view_header("bytecode", view.model, console, function=view.selection.function)
    if not view.frames:
        console.print(Text(f"no bytecode: {clean(view.unavailable or 'nothing matched')}", style="warn"))
        return
    n = len(view.frames)
    console.print(Text(f"{n} compiled frame{'s' if n != 1 else ''}", style="title"))
    for frame in view.frames:
        console.print()
        _render_frame(frame, console)


def _rows(rows: list[dict[str, Any]]) -> list[Text]:
    """The instructions, one a line, the argument whole."""
    out = []
    for r in rows:
        line = f"{r['line']:>4} " if r.get("line") is not None else "     "
        mark = ">>" if r.get("target") else "  "
        t = Text(line, style="loc")
        t.append(f"{mark}{r['offset']:>4} {clean(r['opname'])} ", style="bold" if r.get("target") else "")
        t.append(clean(r.get("argrepr") or ""), style="muted")
        out.append(t)
    return out


def side_by_side(left: list[Text], right: list[Text], width: int) -> list[Text]:
    """Two listings as rows of one: the left one padded to a column of about half the width (a
    longer row pushes its right-hand neighbour along), printed as rows of data (never cut: whole in
    a pipe, wrapped with ↪ on a terminal, and a row read across stays one row)."""
    column = min(max((r.cell_len for r in left), default=0), max(COLUMN_MIN, (width - GUTTER) // 2))
    rows = []
    for a, b in itertools.zip_longest(left, right, fillvalue=Text()):
        row = a.copy()
        if b.plain:
            row.append(" " * max(column - a.cell_len, 0) + " " * GUTTER)
            row.append_text(b)
        rows.append(row)
    return rows


def _render_frame(frame: Frame, console: Console) -> None:
    f = frame.pair
    head = Text(f"compile {clean(f.compile_id)}", style="title")
    head.append(f" · {clean(f.function)} ", style="bold")
    head.append(location(f.file, f.firstlineno), style="loc")
    console.print(Wrapped(head, prose=True))
    titles = [
        Text(f"original ({len(f.original)} instructions)", style="title"),
        Text(f"transformed by Dynamo ({len(f.transformed)} instructions)", style="title"),
    ]
    original, transformed = _rows(f.original), _rows(f.transformed)
    rows = side_by_side([titles[0], *original], [titles[1], *transformed], console.width)
    print_lines(console, rows, title=f"the bytecode of compile {clean(f.compile_id)}")
    if f.original_source:
        console.print(Text("  resume function, decompiled:", style="bold"))
        print_code(console, f.original_source, "python", indent=0, title="resume function, decompiled")
    if f.transformed_source:
        how = "depyf" if f.decompiled_with == "depyf" else "annotated dis (depyf could not decompile it)"
        console.print(Text(f"  transformed code as Python ({how}):", style="bold"))
        lexer = "python" if f.decompiled_with == "depyf" else "text"
        print_code(console, f.transformed_source, lexer, indent=0, title="transformed code")
    elif f.transformed:
        console.print(
            Text("  (decompiled source needs a live run: this log has dis text only)", style="muted")
        )
    if frame.calls:
        console.print(Text("  calls, in order:", style="bold"))
        for c in frame.calls:
            t = Text("    → ")
            if c.get("kind") == "graph":
                t.append(f"compiled graph {clean(c['name'])}", style="good")
                t.append(f" (compile {clean(c['compile_ids'][0])})", style="muted")
            else:
                t.append(f"resume function {clean(c['name'])}", style="warn")
                if c.get("resume_function"):
                    t.append(f" = {clean(c['resume_function'])}", style="muted")
                ids = c.get("compile_ids") or []
                t.append(
                    f", compiled as {', '.join(clean(i) for i in ids)}"
                    if ids
                    else ", not compiled in this run",
                    style="muted",
                )
            console.print(t)
