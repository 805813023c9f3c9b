"""Source excerpts around a line (highlighted when colour is on, never cut), from the recording (or
a file proven to match it).

A recording or log names files by path, and anyone can write one: a crafted `source` event or
stack frame must not make tcx open, let alone print, a local file. Lines come from the text
recorded with the run; from a file on disk only inside the program's recorded folders and when
its sha256 is the one recorded for it, or inside a folder the user gave (--source-root); or, for
a live run, from the files that just ran (core/ingest/source_roots.py). A file read is a regular file of
at most MAX_FILE_BYTES, never one under /proc, /dev or /sys.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from tcx.core import pysource
from tcx.core.ingest.source_roots import in_pseudo_filesystem, inside
from tcx.core.model import Sources
from tcx.renderers.code_block import CONTINUATION, colored, highlighted, pieces
from tcx.renderers.safe import clean

CONTEXT = 2
MAX_FILE_BYTES = 20_000_000


def source_lines(file: str, sources: Sources) -> list[str] | None:
    text = sources.texts.get(file)
    if text is not None:
        return pysource.line_texts(text)
    if sources.live:
        return _disk_lines(file, None)
    expected = sources.sha256.get(file)
    real = inside(file, sources.user_roots)
    if real is None and expected is not None:
        real = inside(file, sources.roots)  # the recording's own folders: only with its sha256
    return _disk_lines(real, expected) if real is not None else None


@functools.lru_cache(maxsize=64)
def _disk_lines(file: str, sha256: str | None) -> list[str] | None:
    """A regular file's lines, if it is no larger than MAX_FILE_BYTES and has this sha256 (when given)."""
    try:
        if in_pseudo_filesystem(os.path.realpath(file)) or not stat.S_ISREG(os.stat(file).st_mode):
            return None  # a device, FIFO or socket is not even opened
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)  # nor blocks, if one replaced the file since
    except (OSError, ValueError):
        return None
    with os.fdopen(fd, "rb") as fh:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
                return None
            data = fh.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        return None
    return pysource.line_texts(pysource.decode_lenient(data))


def excerpt(file: str | None, line: int | None, sources: Sources, fallback: str = "") -> SourceExcerpt | Text:
    """Lines around `line` with it marked; the recorded code line when the file is gone."""
    lines = source_lines(file, sources) if file else None
    if not lines or line is None or not (1 <= line <= len(lines)):
        return Text(f"    {clean(fallback)}" if fallback else "    (source not available)", style="muted")
    start = max(1, line - CONTEXT)
    end = min(len(lines), line + CONTEXT)
    return SourceExcerpt([clean(ln) for ln in lines[start - 1 : end]], start, line)


class SourceExcerpt:
    """Numbered source lines, `marked` with ❱, highlighted when colour is on. A line wider than the
    room it gets wraps under its code with CONTINUATION (renderers/code_block.py): never cut."""

    def __init__(self, lines: list[str], start: int, marked: int) -> None:
        self.lines = lines
        self.start = start
        self.marked = marked

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        code = "\n".join(self.lines)
        texts = highlighted(code, "python") if colored(console) else [Text(ln) for ln in self.lines]
        digits = len(str(self.start + len(self.lines) - 1))
        gutter = 2 + digits + 1
        room = max(options.max_width - gutter, 1)
        for number, text in enumerate(texts, start=self.start):
            mark = number == self.marked
            head = Text("❱ " if mark else "  ", style="bad" if mark else "")
            head.append(f"{number:>{digits}} ", style="" if mark else "muted")
            for i, (piece, _) in enumerate(pieces(text, room, at_spaces=True, mark_all=True)):
                if i:
                    yield Segment(" " * gutter)
                    yield Segment(CONTINUATION, Style(dim=True))
                else:
                    yield from head.render(console, end="")
                yield from piece.render(console, end="")
                yield Segment.line()
