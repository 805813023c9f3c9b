"""A program's file as `tcx fix` rewrites it: read as Python reads it, parsed once, in bounded time.

- Read as the interpreter reads it (core/pysource.py): a PEP 263 coding cookie or a UTF-8 BOM
  decides the encoding, and a rewritten copy and its patch are written back in that encoding.
- Lines are the tokenizer's (`\\n`, `\\r\\n`, `\\r`), so `ast`'s line numbers index them even where
  a line holds a form feed or `\\u2028`; `segment` is `ast.get_source_segment` on that line table,
  linear in the text (the stdlib's splits the whole source a character at a time on every call:
  400 s on a file with a 2 MB line).
- Bounded: a file over MAX_BYTES is not rewritten; each rewrite's walks of the syntax tree stop
  (`OverBudget`) once the rewrite has taken SECONDS (candidates.py sets the budget per rewrite).

Pure and torch-free.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass

from tcx.core import pysource

MAX_BYTES = 1_000_000  # a larger file gets no rewrite (its parse alone takes seconds)
SECONDS = 10.0  # the time one rewrite may take to analyse its file
_deadline: list[float] = []  # the running rewrite's, innermost last


class OverBudget(Exception):
    """A rewrite's analysis ran past its budget of SECONDS."""


@dataclass(frozen=True)
class SourceFile:
    path: str
    text: str  # decoded; no BOM
    encoding: str  # as tokenize.detect_encoding names it ("utf-8-sig": the file starts with a BOM)
    tree: ast.Module
    lines: tuple[str, ...]  # the tokenizer's lines, each with its line end
    raw: tuple[bytes, ...]  # each line in UTF-8, the unit of ast's column offsets

    def segment(self, node: ast.AST) -> str | None:
        """The source text of `node` (as `ast.get_source_segment`), or None when it has no position."""
        first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        start, end = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
        if first is None or last is None or start is None or end is None:
            return None
        if first == last:
            return self.raw[first - 1][start:end].decode("utf-8")
        head = self.raw[first - 1][start:].decode("utf-8")
        tail = self.raw[last - 1][:end].decode("utf-8")
        return "".join([head, *self.lines[first : last - 1], tail])

    def one_line(self, node: ast.AST) -> str | None:
        """The source text of `node` when it is on one line, else None."""
        if getattr(node, "lineno", None) != getattr(node, "end_lineno", None):
            return None
        return self.segment(node)


def read(file: str | None, line: int | None) -> SourceFile | str:
    """The parsed file of a break (one that imports torch), or why it cannot be rewritten."""
    if not file or not line:
        return "the break has no source line"
    try:
        info = os.stat(file)
    except (OSError, ValueError) as exc:
        return f"the source could not be read ({type(exc).__name__})"
    if not stat.S_ISREG(info.st_mode):
        return "the source is not a regular file"
    if info.st_size > MAX_BYTES:
        return _too_big(info.st_size)
    loaded = _load(file, info.st_size, info.st_mtime_ns)
    if isinstance(loaded, str):
        return loaded
    if not _imports_torch(loaded.tree):
        return "the file does not `import torch`"
    return loaded


@functools.lru_cache(maxsize=8)
def _load(file: str, _size: int, _mtime_ns: int) -> SourceFile | str:
    """Read and parse once per version of the file (its size and time are the cache key)."""
    try:
        with open(file, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            return _too_big(len(data))
        text, encoding = pysource.decode(data)
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError, LookupError) as exc:
        return f"the source could not be read ({type(exc).__name__})"
    lines = tuple(pysource.lines(text))
    return SourceFile(file, text, encoding, tree, lines, tuple(ln.encode("utf-8") for ln in lines))


def _too_big(size: int) -> str:
    return f"the file is {size:,} bytes; tcx fix rewrites files up to {MAX_BYTES:,}"


def _imports_torch(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Import) and any(a.name == "torch" and a.asname is None for a in node.names)
        for node in tree.body
    )


@contextlib.contextmanager
def budget(seconds: float = SECONDS) -> Iterator[None]:
    """Walks inside the block raise OverBudget once `seconds` have passed."""
    _deadline.append(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.pop()


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk`, checking the running rewrite's budget every few thousand nodes."""
    deadline = _deadline[-1] if _deadline else None
    for count, child in enumerate(ast.walk(node)):
        if deadline is not None and not count % 4096 and time.monotonic() > deadline:
            raise OverBudget
        yield child
