"""No trailing spaces in plain output: rich pads table cells and padded blocks to the console's
width with spaces, which end up at the end of lines (in a pipe, a diff, a PR comment).

`LineEnds` wraps the stream a plain (no colour) console writes to and drops the spaces that end a
line, across writes: spaces at the end of one write are held until the next shows whether the
line goes on. With colour on, rich's own escapes sit between the spaces and the newline (and a
space may carry a background), so a terminal's output is left as it is.
"""

from __future__ import annotations

import re
from typing import IO, Any

_SPACES_BEFORE_NEWLINE = re.compile(r" +\n")


class LineEnds:
    """A text stream that writes to `out` without the spaces before each newline."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._held = ""  # spaces at the end of the last write: the line may go on

    def write(self, text: str) -> int:
        text = _SPACES_BEFORE_NEWLINE.sub("\n", self._held + text)
        body = text.rstrip(" ")
        self._held = text[len(body) :]
        self._out.write(body)
        return len(text)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, flush, encoding: the stream's own
        return getattr(self._out, name)
