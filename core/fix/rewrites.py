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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tcx.core.views.explain import BreakSite

MARK = "  # tcx fix: a data-dependent `if` as torch.cond"


@dataclass(frozen=True)
class Rewrite:
    file: str
    text: str  # the whole rewritten file
    line: str  # the new statement, as code
    patch: str  # unified diff of the original and the rewritten file
    needs: str | None = None  # a torch API the rewrite calls that an older torch lacks (`missing` key)


def parsed(file: str | None, line: int | None) -> tuple[str, ast.Module] | str:
    """The source and syntax tree of a break's file (one that imports torch), or why not."""
    if not file or not line:
        return "the break has no source line"
    try:
        source = Path(file).read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError) as exc:
        return f"the source could not be read ({type(exc).__name__})"
    if not _imports_torch(tree):
        return "the file does not `import torch`"
    return source, tree


def rewritten(file: str, source: str, text: str, line: str, needs: str | None = None) -> Rewrite:
    """The Rewrite of `file` from `source` to `text`, with its unified diff."""
    lines, new = source.splitlines(keepends=True), text.splitlines(keepends=True)
    patch = "".join(difflib.unified_diff(lines, new, file, f"{file} (tcx fix)"))
    return Rewrite(file, text, line, patch, needs)


def cond_at(site: BreakSite) -> Rewrite | str:
    """CODE_RULES' entry for a data-dependent branch: `cond_rewrite` at the break's line."""
    return cond_rewrite(site.file, site.line)


def write_patch(rewrite: Rewrite) -> Path:
    """`--apply`: the rewrite's unified diff next to its file, as FILE.tcx.patch; the file itself is
    never changed (`patch FILE < FILE.tcx.patch` applies it)."""
    path = Path(rewrite.file + ".tcx.patch")
    path.write_text(rewrite.patch, encoding="utf-8")
    return path


def cond_rewrite(file: str | None, line: int | None) -> Rewrite | str:
    """The rewrite of the `if` at `file:line`, or why there is none."""
    read = parsed(file, line)
    if isinstance(read, str):
        return read
    source, tree = read
    found = if_at(tree, line)  # type: ignore[arg-type]
    if found is None:
        return f"no `if` statement starts at line {line}"
    func, parent, node = found
    statement = _cond_statement(source, func, parent, node)
    if isinstance(statement, str):
        return statement
    code, first, last = statement
    lines = source.splitlines(keepends=True)
    indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
    new = [f"{indent}{code}{MARK}\n"]
    new += [commented(text, indent) for text in lines[first:last]]
    text = "".join([*lines[: first - 1], *new, *lines[last:]])
    return rewritten(str(file), source, text, code)


def commented(text: str, indent: str) -> str:
    body = text[len(indent) :] if text.startswith(indent) else text.lstrip()
    return f"{indent}# {body}" if body.strip() else text


def _imports_torch(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Import) and any(a.name == "torch" and a.asname is None for a in node.names)
        for node in tree.body
    )


def if_at(tree: ast.Module, line: int) -> tuple[ast.FunctionDef, list[ast.stmt], ast.If] | None:
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for parent in ast.walk(func):
            for field in ("body", "orelse"):
                block = getattr(parent, field, None)
                if not isinstance(block, list):
                    continue
                for stmt in block:
                    if isinstance(stmt, ast.If) and stmt.lineno == line:
                        return func, block, stmt  # type: ignore[return-value]
    return None


def _cond_statement(
    source: str, func: ast.FunctionDef, block: list[ast.stmt], node: ast.If
) -> tuple[str, int, int] | str:
    """(the torch.cond statement, first line, last line it replaces) or why not."""
    cond = ast.get_source_segment(source, node.test)
    if not cond or "\n" in cond:
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
        true = ast.get_source_segment(source, body[0].value)
        false = ast.get_source_segment(source, node.orelse[0].value) if node.orelse else f"{name}.clone()"  # type: ignore[attr-defined]
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
        true = ast.get_source_segment(source, body[0].value)
        false = ast.get_source_segment(source, returned.value)  # type: ignore[attr-defined]
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
    local |= {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    read = [
        n.id
        for e in exprs
        for n in ast.walk(e)
        if isinstance(n, ast.Name) and n.id in local and not hasattr(builtins, n.id)
    ]
    return list(dict.fromkeys([*([first] if first else []), *read]))
