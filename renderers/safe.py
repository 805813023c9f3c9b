"""Text from programs and logs is data: neutralise terminal control sequences before printing.

Rich markup is never interpreted in data because renderers wrap it in `rich.text.Text`
(or `Syntax`), which print brackets literally; this module removes the other hazard,
escape sequences and control characters that would drive the user's terminal.
"""

from __future__ import annotations

import json
import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Only ever inside JSON strings, where \uXXXX is the same character. A lone surrogate (from a
# `\udcff` escape in a log's JSON) cannot be written as UTF-8 at all.
_C1 = re.compile("[\x7f-\x9f\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(doc: object, indent: int | None = 2) -> str:
    """Indented JSON for stdout; json escapes C0 controls, this also escapes DEL and C1 (e.g. CSI \\x9b)."""
    text = json.dumps(doc, indent=indent, ensure_ascii=False)
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def clean(text: object) -> str:
    """Replace control characters (ESC, BEL, CR, C1 ...) and lone surrogates by visible escapes;
    keep newlines and tabs."""
    s = str(text) if text is not None else ""
    s = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", s)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", s)
