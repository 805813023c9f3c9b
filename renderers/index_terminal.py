"""The index a per-compile view prints first on a big run: one row per compile id (core/views/index.py)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from tcx.core.model import RunModel
from tcx.core.views.index import IndexRow
from tcx.renderers.code_block import print_lines
from tcx.renderers.header import view_header
from tcx.renderers.safe import clean

COLUMNS = ("compile", "function", "graphs", "breaks", "kernels", "compile s")


def render_index_head(
    view: str, model: RunModel, compiles: int, estimate: int, console: Console, *, function: str | None
) -> None:
    """The view's header and why an index is shown: printed before the rows are counted."""
    view_header(view, model, console, function=function)
    console.print(
        Text(
            f"{compiles} compiles; `tcx {view}` would print about {estimate:,} lines, so here is an "
            "index first. Run a row's command to see that compile, or add --all for everything.",
            style="muted",
        )
    )
    console.print(
        Text(
            "Selectors (every view): --compile ID (repeatable; a range: --compile 3/0-3/4), "
            "--kernel NAME, --rank N, TARGET:func.",
            style="muted",
        )
    )
    console.print()


def render_index_rows(rows: list[IndexRow], console: Console) -> None:
    cells = [
        (
            clean(r.compile_id),
            clean(r.function) + (" (failed)" if r.failed else ""),
            str(r.graphs),
            str(r.breaks),
            "-" if r.kernels is None else str(r.kernels),
            "-" if r.compile_time_s is None else f"{r.compile_time_s:.2f}",
        )
        for r in rows
    ]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(COLUMNS)]
    pairs = enumerate(zip(COLUMNS, widths, strict=True))
    titles = [h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in pairs]
    head = Text("  ".join(titles))
    head.append("  drill down")
    head.stylize("muted")
    lines = [head]
    for row, cell in zip(rows, cells, strict=True):
        line = Text(cell[0].ljust(widths[0]), style="count")
        line.append("  " + cell[1].ljust(widths[1]), style="bad" if row.failed else "loc")
        line.append("".join("  " + c.rjust(w) for c, w in zip(cell[2:], widths[2:], strict=True)))
        line.append("  " + clean(row.command), style="muted")
        lines.append(line)
    print_lines(console, lines)  # a row is never cut: whole in a pipe, wrapped with ↪ on a terminal
