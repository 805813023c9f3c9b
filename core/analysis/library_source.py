"""The source a remedy reads: a file's lines and syntax tree (read and parsed once per version of the
file), and the program's name for the one nn.Module it compiled (from its `torch.compile(...)` line).

Shared by the remedies that read library and program source (library_branch.py, experts_dispatch.py).
Pure and torch-free.
"""

from __future__ import annotations

import ast
import functools
import os
from typing import TYPE_CHECKING

from tcx.core import pysource

if TYPE_CHECKING:
    from tcx.core.model import RunModel

MAX_BYTES = 2_000_000  # a larger source file is not parsed


def compiled_module(model: RunModel) -> tuple[str, str] | None:
    """(the program's name for it, file:line) of the one nn.Module the program compiled."""
    from tcx.core.analysis.empty_run import compile_calls

    modules = [c for c in compile_calls(model) if c.target[:1].isupper()]  # a class: a module compiled
    if len(modules) != 1 or not modules[0].file or not modules[0].line:
        return None
    call = modules[0]
    tree = parse(call.file or "")
    name = _compiled_name(tree, call.line or 0) if tree else None
    return (name, call.where) if name else None


def _compiled_name(tree: ast.Module, line: int) -> str | None:
    """The argument of the `torch.compile(...)` call at `line`, when it is a (dotted) name."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and node.lineno <= line <= (node.end_lineno or node.lineno)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "compile"
            and node.args
            and isinstance(node.args[0], (ast.Name, ast.Attribute))
        ):
            return ast.unparse(node.args[0])
    return None


def parse(path: str) -> ast.Module | None:
    """The file's syntax tree; None when it cannot be read or parsed."""
    try:
        return _load(path, os.stat(path).st_mtime_ns)[1] if path else None
    except (OSError, ValueError):
        return None


def source_lines(path: str) -> list[str] | None:
    """The file's lines (with their ends), as Python reads it; None when it cannot be read."""
    try:
        return _load(path, os.stat(path).st_mtime_ns)[0]
    except (OSError, ValueError):
        return None


@functools.lru_cache(maxsize=8)
def _load(path: str, _mtime_ns: int) -> tuple[list[str] | None, ast.Module | None]:
    """Read and parse once per version of the file."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            return None, None
        text = pysource.decode(data)[0]
    except (OSError, SyntaxError, ValueError, LookupError):
        return None, None
    try:
        tree: ast.Module | None = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    return pysource.lines(text), tree
