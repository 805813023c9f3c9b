"""A failed run's paragraph (core/model/failure.py): what failed and where, at the end of a view.

The views that give a verdict (explain, recompiles, check) end with it, never with "no graph
breaks"; a one-line notice at the top says that what follows is what was recorded before it.
"""

from __future__ import annotations

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from tcx.core.model import Frame
from tcx.core.model.failure import Failure
from tcx.renderers.header import location
from tcx.renderers.safe import clean


def render_failure_notice(f: Failure, console: Console) -> None:
    console.print(
        Text(
            f"The program did not finish: {clean(f.headline)} (what failed and where: at the end). "
            "Below is what was recorded before it stopped.",
            style="bad",
        )
    )
    console.print()


def render_failure(f: Failure, console: Console) -> None:
    console.print(Text(f"The program did not finish: {clean(f.headline)}.", style="bad"))
    body = Text()
    if f.message:
        body.append(clean(f.message) + "\n")
    if f.message_lines_cut:
        cut = f"[{f.message_lines_cut} more lines of the message: --format json has them]\n"
        body.append(cut, style="muted")
    if f.called_from:
        body.append("called from ", style="muted")
        _frame(body, f.called_from)
    if f.raised_at:
        body.append("raised at ", style="muted")
        _frame(body, f.raised_at)
    if f.other_frames:
        body.append(
            f"({f.other_frames} more frame(s) of the traceback: --format json has all of it)\n", style="muted"
        )
    for line in f.output_tail:
        body.append(clean(line) + "\n")
    body.rstrip()
    if body.plain:
        console.print(Padding(body, (0, 0, 0, 2)))
    if f.during_compile:
        where = "while torch.compile was compiling"
    elif f.compiles:
        where = f"after {f.compiles} compile(s)"
    else:
        where = "before anything was compiled"
    text = f"It stopped {where}; the counts above cover only what ran until then."
    console.print(Text(text, style="muted"))


def _frame(body: Text, fr: Frame) -> None:
    body.append(location(fr.file, fr.line), style="loc")
    body.append(f" in {clean(fr.name)}")
    if fr.code.strip():
        body.append(f": {clean(fr.code.strip())}")
    body.append("\n")
