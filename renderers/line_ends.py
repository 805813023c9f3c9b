"""No trailing spaces in plain output: rich pads table cells and padded blocks to the console's
width with spaces, which end up at the end of lines (in a pipe, a diff, a PR comment).

`LineEnds` wraps the stream a plain (no colour) console writes to and drops the spaces that end a
line, across writes: spaces at the end of one write are held until the next shows whether the
line goes on. With colour on, rich's own escapes sit between the spaces and the newline (and a
space may carry a background), so a terminal's output is left as it is.
"""

from __future__ import annotations

from typing import IO, Any


class LineEnds:
    """A text stream that writes to `out` without the spaces before each newline."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._held = ""  # spaces at the end of the last write: the line may go on

    def write(self, text: str) -> int:
        # split and rstrip, not a regex: ` +\n` tries a match at every space of an indent (a
        # megabyte of generated code took seconds).
        *ended, last = (self._held + text).split("\n")
        body = last.rstrip(" ")
        self._held = last[len(body) :]
        self._out.write("".join(line.rstrip(" ") + "\n" for line in ended) + body)
        return len(text)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, flush, encoding: the stream's own
        return getattr(self._out, name)
