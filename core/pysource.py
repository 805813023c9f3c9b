"""Python source as Python itself reads it: its encoding and its lines.

- The encoding is the file's PEP 263 coding cookie (`# -*- coding: latin-1 -*-`) or its UTF-8
  byte-order mark, else UTF-8, exactly as `tokenize.detect_encoding` (and the interpreter)
  decide; the text has no BOM, and `encode` gives the file's bytes back (BOM and all).
- A line ends at `\\n`, `\\r\\n` or `\\r`, and nowhere else: the line numbers of Python's tokenizer,
  of `ast` and of tracebacks. `str.splitlines` also splits at a form feed, `\\v`, `\\x1c`-`\\x1e`,
  `\\x85`, `\\u2028` and `\\u2029`, which Python keeps inside a line (a form feed above an `if`
  would shift every line number after it).

Torch-free and pure.
"""

from __future__ import annotations

import io
import tokenize

BOM = "\ufeff"


def lines(text: str) -> list[str]:
    """The lines of `text` as Python's tokenizer counts them, each with its line end."""
    return io.StringIO(text, newline="").readlines()


def line_texts(text: str) -> list[str]:
    """The lines of `text` as Python counts them, without their line ends (line N is [N - 1])."""
    return [line.rstrip("\r\n") for line in lines(text)]


def line_end(line: str) -> str:
    """The line end of one of `lines`' lines ("" for a last line without one)."""
    return line[len(line.rstrip("\r\n")) :]


def decode(data: bytes) -> tuple[str, str]:
    """(the text, its encoding as `tokenize.detect_encoding` names it: "utf-8", "utf-8-sig" for a
    BOM, "iso-8859-1" for a latin-1 cookie ...). Raises SyntaxError for an unknown or
    contradictory cookie and UnicodeDecodeError for bytes that are not in the encoding, as Python
    refuses such a file."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding), encoding


def decode_lenient(data: bytes) -> str:
    """The text of `data` for showing it: as `decode`, with undecodable bytes replaced."""
    try:
        return decode(data)[0]
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return data.decode("utf-8", errors="replace").removeprefix(BOM)
