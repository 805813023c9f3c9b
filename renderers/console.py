"""The rich Console every terminal renderer writes to, configured from the CLI options."""

from __future__ import annotations

import os
import sys
from typing import IO

from rich.console import Console
from rich.theme import Theme

from tcx.renderers.line_ends import LineEnds
from tcx.renderers.safe import SafeConsole

THEME = Theme(
    {
        "title": "bold",
        "muted": "dim",
        "bad": "bold red",
        "warn": "yellow",
        "good": "green",
        "gbtype": "bold magenta",
        "loc": "cyan",
        "count": "bold",
    }
)


def make_console(
    file: IO[str] | None = None, *, color: bool | None = None, width: int | None = None
) -> Console:
    """A console for reports; `color=False` (or --no-color / NO_COLOR) prints plain text. Text is
    printed through renderers/safe.clean and never read as markup (SafeConsole)."""
    out = file or sys.stdout
    no_color = color is False
    console = SafeConsole(
        file=out,
        theme=THEME,
        width=width,
        no_color=no_color,
        color_system=None if no_color else "auto",
        highlight=False,
        emoji=False,
        soft_wrap=False,
    )
    if console.color_system is None:  # plain text (a pipe, --no-color): no spaces end a line
        console.file = LineEnds(out)  # type: ignore[assignment]  # a stream by delegation, not an IO subclass
    console.on_broken_pipe = _stop_quietly  # type: ignore[method-assign]  # `tcx ... | head` is fine
    return console


def _stop_quietly() -> None:
    """The reader closed the pipe: stop writing, exit 0 (rich's default exits 1, the budget code)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise SystemExit(0)
