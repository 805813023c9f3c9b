"""Text from programs and logs is data: one place that makes it safe for every output format.

- Terminal, and the Markdown and HTML made from terminal output: `clean` turns control
  characters (ESC, BEL, C1 such as CSI \\x9b) and lone surrogates into visible escapes. Renderers
  call it on what they build, and `SafeConsole`, the console every renderer prints to, applies it
  again to each piece of text it is given, so a field a renderer forgot cannot reach the
  terminal raw. It also interprets no rich markup and no emoji codes: `[red]` from a log
  prints as `[red]`.
- Markdown outside code fences: `markdown_text` (HTML-escaped, Markdown punctuation escaped).
- HTML: rich's export escapes the text of every segment (`SafeConsole` cleaned it first).
- JSON: `json_text` is strict JSON (no NaN or Infinity: they become null, and the document
  says where), with DEL and C1 escaped as \\uXXXX.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Only ever inside JSON strings, where \uXXXX is the same character. A lone surrogate (from a
# `\udcff` escape in a log's JSON) cannot be written as UTF-8 at all.
_C1 = re.compile("[\x7f-\x9f\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# Markdown punctuation that could start emphasis, a link, a code span or a table cell.
_MD_ACTIVE = re.compile(r"[\\`*_\[\]|~]")
# The key a JSON document gets when numbers in it were not finite (see json_text).
NON_FINITE_KEY = "non_finite_numbers"


def clean(text: object) -> str:
    """Replace control characters (ESC, BEL, CR, C1 ...) and lone surrogates by visible escapes;
    keep newlines and tabs."""
    s = str(text) if text is not None else ""
    if not _UNSAFE.search(s):
        return s
    s = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", s)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", s)


def markdown_text(text: object) -> str:
    """Text from the run as one line of Markdown text: GitHub and GitLab render inline HTML, so it
    is HTML-escaped as in the HTML report, and Markdown's own punctuation is backslash-escaped."""
    escaped = html.escape(clean(text), quote=False).replace("\r", " ").replace("\n", " ")
    return _MD_ACTIVE.sub(lambda m: "\\" + m.group(), escaped)


def json_text(doc: object, indent: int | None = 2) -> str:
    """Strict JSON for stdout. Non-finite numbers (a NaN read from a log) are written as null and
    listed under NON_FINITE_KEY; json escapes C0 controls, this also escapes DEL and C1."""
    try:
        text = json.dumps(doc, indent=indent, ensure_ascii=False, allow_nan=False)
    except ValueError:
        where: list[str] = []
        doc = _finite(doc, "$", where)
        if isinstance(doc, dict):
            doc[NON_FINITE_KEY] = where
        text = json.dumps(doc, indent=indent, ensure_ascii=False, allow_nan=False)
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _finite(value: Any, path: str, where: list[str]) -> Any:
    """`value` with each non-finite float replaced by None, its path added to `where`."""
    if isinstance(value, float) and not math.isfinite(value):
        where.append(f"{path} was {value!r} in the input: written as null")
        return None
    if isinstance(value, dict):
        return {k: _finite(v, f"{path}.{k}", where) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v, f"{path}[{i}]", where) for i, v in enumerate(value)]
    return value


class SafeConsole(Console):
    """A rich Console that prints every piece of text through `clean`, and reads no markup.

    Styles, and the control segments rich makes itself (cursor moves of a status line), are
    untouched: only the text of segments is cleaned, after layout (a hostile field may then
    make its line a little longer than the width)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["markup"] = False
        kwargs.setdefault("emoji", False)
        super().__init__(*args, **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        search = _UNSAFE.search
        for segment in super().render(renderable, options):
            if segment.control or not search(segment.text):
                yield segment
            else:
                yield Segment(clean(segment.text), segment.style)
