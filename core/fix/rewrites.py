"""Mechanical code rewrites for `tcx fix`: what they share (the Rewrite, its diff, reading the file),
and a data-dependent `if` as `torch.cond`, on a copy. The other rewrites: check_rewrite.py
(`torch._check`), helper_rewrite.py (nonstrict_trace / allow_in_graph), print_rewrite.py.

Two shapes of branch are rewritten, where both branches are one tensor expression:

    if COND:                    NAME = torch.cond(COND, lambda NAME, ...: A, lambda NAME, ...: B, (NAME, ...))
        NAME = A          ->
    [else:
        NAME = B]               (no else: B is NAME.clone())

    if COND:
        return A          ->    return torch.cond(COND, lambda ...: A, lambda ...: B, (...))
    return B

The operands are the function's local names the branches read. The rewrite keeps every line
number: the first line becomes the `torch.cond` call and the statement's other lines become
comments, so a finding of the re-run is at the line it was. The user's file is read, never written:
the new text goes to a copy (core/fix/verify.py) and comes with its unified diff.

Pure and torch-free.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tcx.core import files, pysource
from tcx.core.fix.source_file import SourceFile, read, walk

if TYPE_CHECKING:
    from tcx.core.views.explain import BreakSite

MARK = "  # tcx fix: a data-dependent `if` as torch.cond"
# The fields of a statement that hold statements (an except clause's and a match case's bodies too).
STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")


@dataclass(frozen=True)
class Rewrite:
    file: str
    text: str  # the whole rewritten file
    line: str  # the new statement, as code
    patch: str  # unified diff of the original and the rewritten file, to show
    needs: str | None = None  # a torch API the rewrite calls that an older torch lacks (`missing` key)
    encoding: str = "utf-8"  # the file's, as Python reads it ("utf-8-sig": it starts with a BOM)
    original: str = ""  # the file's text before the rewrite

    @property
    def data(self) -> bytes:
        """The rewritten file's bytes, in the file's own encoding (a copy runs as the file would)."""
        return self.text.encode(self.encoding)

    def patch_data(self) -> bytes:
        """The patch in the file's own bytes (its encoding, its BOM), so `patch FILE < FILE.tcx.patch`
        finds every line it changes."""
        name = os.fsencode(self.file)
        return b"".join(
            difflib.diff_bytes(
                difflib.unified_diff,
                self.original.encode(self.encoding).splitlines(keepends=True),  # the lines Python counts
                self.data.splitlines(keepends=True),
                name,
                name + b" (tcx fix)",
            )
        )


def rewritten(src: SourceFile, text: str, line: str, needs: str | None = None) -> Rewrite:
    """The Rewrite of `src` to `text`, with its unified diff."""
    new = pysource.lines(text)
    patch = "".join(difflib.unified_diff(list(src.lines), new, src.path, f"{src.path} (tcx fix)"))
    return Rewrite(src.path, text, line, patch, needs, src.encoding, src.text)


def cond_at(site: BreakSite) -> Rewrite | str:
    """CODE_RULES' entry for a data-dependent branch: `cond_rewrite` at the break's line."""
    return cond_rewrite(site.file, site.line)


def write_patch(rewrite: Rewrite) -> Path:
    """`--apply`: the rewrite's unified diff next to its file, as FILE.tcx.patch; the file itself is
    never changed (`patch FILE < FILE.tcx.patch` applies it). A FILE.tcx.patch that exists is
    replaced, never written through (a link to another file stays as it was: core/files.py)."""
    path = Path(rewrite.file + ".tcx.patch")
    files.write_bytes(path, rewrite.patch_data())
    return path


def cond_rewrite(file: str | None, line: int | None) -> Rewrite | str:
    """The rewrite of the `if` at `file:line`, or why there is none."""
    src = read(file, line)
    if isinstance(src, str):
        return src
    found = if_at(src.tree, line)  # type: ignore[arg-type]
    if found is None:
        return f"no `if` statement starts at line {line}"
    func, parent, node = found
    statement = _cond_statement(src, func, parent, node)
    if isinstance(statement, str):
        return statement
    code, first, last = statement
    lines = list(src.lines)
    indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
    end = pysource.line_end(lines[first - 1]) or "\n"
    new = [f"{indent}{code}{MARK}{end}"]
    new += [commented(text, indent) for text in lines[first:last]]
    text = "".join([*lines[: first - 1], *new, *lines[last:]])
    return rewritten(src, text, code)


def commented(text: str, indent: str) -> str:
    body = text[len(indent) :] if text.startswith(indent) else text.lstrip()
    return f"{indent}# {body}" if body.strip() else text


def if_at(tree: ast.Module, line: int) -> tuple[ast.FunctionDef, list[ast.stmt], ast.If] | None:
    """(the innermost function around it, the statements it is one of, the `if`) for the `if`
    statement that starts at `line` inside a function. Only the statements whose lines hold `line`
    are entered (a statement is within its parent's lines; an `if` is never inside an expression),
    so a 700,000-element literal elsewhere in the file costs nothing."""
    stack: list[tuple[ast.AST, ast.FunctionDef | None]] = [(tree, None)]
    while stack:
        node, func = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            func = node  # type: ignore[assignment]
        for field in STATEMENT_LISTS:
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for stmt in block:
                first = getattr(stmt, "lineno", None)  # a match_case has no position of its own
                if first is not None and not first <= line <= (getattr(stmt, "end_lineno", None) or first):
                    continue
                in_block = field in ("body", "orelse") and func is not None
                if in_block and isinstance(stmt, ast.If) and first == line:
                    return func, block, stmt  # type: ignore[return-value]
                stack.append((stmt, func))
    return None


def _cond_statement(
    src: SourceFile, func: ast.FunctionDef, block: list[ast.stmt], node: ast.If
) -> tuple[str, int, int] | str:
    """(the torch.cond statement, first line, last line it replaces) or why not."""
    cond = src.one_line(node.test)
    if not cond:
        return "the condition spans several lines"
    body = node.body
    if len(body) == 1 and isinstance(body[0], ast.Assign) and _single_name(body[0]):
        name = body[0].targets[0].id  # type: ignore[attr-defined]
        if node.orelse and not (
            len(node.orelse) == 1
            and isinstance(node.orelse[0], ast.Assign)
            and _single_name(node.orelse[0]) == name
        ):
            return "the else branch is not one assignment to the same name"
        true = src.segment(body[0].value)
        false = src.segment(node.orelse[0].value) if node.orelse else f"{name}.clone()"  # type: ignore[attr-defined]
        operands = _operands(func, [body[0].value, *(o.value for o in node.orelse)], first=name)  # type: ignore[attr-defined]
        return _call(f"{name} = ", cond, true, false, operands), node.lineno, node.end_lineno or node.lineno
    after = block.index(node) + 1
    if (
        len(body) == 1
        and isinstance(body[0], ast.Return)
        and body[0].value is not None
        and not node.orelse
        and after < len(block)
        and isinstance(block[after], ast.Return)
        and block[after].value is not None  # type: ignore[attr-defined]
    ):
        returned = block[after]
        true = src.segment(body[0].value)
        false = src.segment(returned.value)  # type: ignore[attr-defined]
        operands = _operands(func, [body[0].value, returned.value])  # type: ignore[attr-defined, list-item]
        return (
            _call("return ", cond, true, false, operands),
            node.lineno,
            returned.end_lineno or returned.lineno,
        )
    return "the branch is not one assignment or one return of a tensor expression"


def _single_name(stmt: ast.Assign) -> str | None:
    target = stmt.targets[0]
    return target.id if len(stmt.targets) == 1 and isinstance(target, ast.Name) else None


def _call(prefix: str, cond: str, true: str | None, false: str | None, operands: list[str]) -> str:
    args = ", ".join(operands)
    tuple_text = f"({args},)" if len(operands) == 1 else f"({args})"
    return f"{prefix}torch.cond({cond}, lambda {args}: {true}, lambda {args}: {false}, {tuple_text})"


def _operands(func: ast.FunctionDef, exprs: list[ast.expr], first: str | None = None) -> list[str]:
    """The function's local names the branches read (parameters and assigned names), `first` first."""
    local = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
    local |= {n.id for n in walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    read = [
        n.id
        for e in exprs
        for n in walk(e)
        if isinstance(n, ast.Name) and n.id in local and not hasattr(builtins, n.id)
    ]
    return list(dict.fromkeys([*([first] if first else []), *read]))
