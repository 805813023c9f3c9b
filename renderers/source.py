"""Source excerpts around a line, syntax-highlighted, from the recording or from disk."""

from __future__ import annotations

import linecache

from rich.syntax import Syntax
from rich.text import Text

from tcx.renderers.safe import clean

CONTEXT = 2


def source_lines(file: str, sources: dict[str, str]) -> list[str] | None:
    text = sources.get(file)
    if text is not None:
        return text.splitlines()
    lines = linecache.getlines(file)
    return [ln.rstrip("\n") for ln in lines] if lines else None


def excerpt(file: str | None, line: int | None, sources: dict[str, str], fallback: str = "") -> Syntax | Text:
    """Lines around `line` with it highlighted; the recorded code line when the file is gone."""
    lines = source_lines(file, sources) if file else None
    if not lines or line is None or not (1 <= line <= len(lines)):
        return Text(f"    {clean(fallback)}" if fallback else "    (source not available)", style="muted")
    start = max(1, line - CONTEXT)
    end = min(len(lines), line + CONTEXT)
    code = "\n".join(clean(ln) for ln in lines[start - 1 : end])
    return Syntax(
        code,
        "python",
        line_numbers=True,
        start_line=start,
        highlight_lines={line},
        theme="ansi_dark",
        background_color="default",
        word_wrap=True,
    )
