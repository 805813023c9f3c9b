"""The print rewrite of `tcx fix`: a `print` at the end of a compiled function moved after its calls.

One shape is moved, where the printed values are exactly what the call returns:

    @torch.compile                            @torch.compile
    def step(x):                              def step(x):
        y = x.sin()                               y = x.sin()
        print("y:", y)             ->             # print("y:", y)  # tcx fix: moved after ...
        return y                                  return y
    ...                                       ...
    out = step(a)                             out = step(a); print("y:", out)  # tcx fix: ...
    step(b)                                   print("y:", step(b))

The print is the statement just before the function's last statement, `return NAME` or
`return NAME, NAME, ...`; its arguments read only returned names and names that are not the
function's own (module globals, builtins); the function is compiled in this file (`@torch.compile`,
or `NAME = torch.compile(step, ...)`); and every use of it in the file is a call that is a statement
of its own: `v = step(...)`, `a, b = step(...)` (the return's length) or `step(...)` (one returned
name, printed once). Anything else (a print in the middle of the function, of a value the function
changes afterwards, a call inside an expression or a call from another file, a function
passed around) is not moved, and the config remedy (reorderable_logging_functions) stays the one
tried. Line numbers stay as they were: the print becomes a comment, each call gets its print on its
own line (after `;`, or around the call).

A program run as `script.py:f` has its calls made by tcx, which prints nothing after them.

Pure and torch-free.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from tcx.core import pysource
from tcx.core.fix.rewrites import Rewrite, rewritten
from tcx.core.fix.source_file import read, walk

if TYPE_CHECKING:
    from tcx.core.views.explain import BreakSite

MARK = "  # tcx fix: the print moved after the compiled call"
MAX_CALLS = 100  # a function called in more places than this is not rewritten (each call is an edit)
Edit = tuple[int, int, str]  # (1-based line, column, text inserted there)


def print_rewrite(site: BreakSite) -> Rewrite | str:
    """The print at the break's line moved after each call of its compiled function, or why not."""
    src = read(site.file, site.line)
    if isinstance(src, str):
        return src
    tree = src.tree
    found = _print_before_return(tree, int(site.line or 0))
    if isinstance(found, str):
        return found
    func, printed, returned = found
    text = src.one_line(printed)
    if not text:
        return "the print spans several lines"
    unread = _foreign_names(func, printed, set(returned))
    if unread:
        return f"the print reads {', '.join(unread)}, which the function does not return"
    names = _compiled_names(tree, func)
    if not names:
        return f"{func.name} is not compiled with torch.compile in this file"
    edits = _call_edits(tree, names, text, printed, returned)
    if isinstance(edits, str):
        return edits
    if not edits:
        return f"{func.name} is not called in this file"
    lines = list(src.lines)
    head = lines[printed.lineno - 1]
    indent = head[: len(head) - len(head.lstrip())]
    end = pysource.line_end(head) or "\n"
    lines[printed.lineno - 1] = f"{indent}# {text}{MARK}{end}"
    by_line: dict[int, list[tuple[int, str]]] = {}
    for line, col, insert in (e for call in edits for e in call):
        by_line.setdefault(line, []).append((col, insert))
    for line, inserts in by_line.items():
        lines[line - 1] = _inserted(src.raw[line - 1], inserts)
    change = f"{text} after each call of {func.name} ({len(edits)} in the file)"
    return rewritten(src, "".join(lines), change)


def _inserted(row: bytes, inserts: list[tuple[int, str]]) -> str:
    """`row` (a line in UTF-8: ast's columns count its bytes) with each text inserted at its column,
    in one pass. An insertion followed by more code (or a comment) loses its mark, which would
    comment that out."""
    pieces, at = [], 0
    code_ends = len(row.rstrip())
    for col, insert in sorted(inserts):
        if col < code_ends:
            insert = insert.removesuffix(MARK)
        pieces += [row[at:col], insert.encode("utf-8")]
        at = col
    pieces.append(row[at:])
    return b"".join(pieces).decode("utf-8")


def _print_before_return(tree: ast.Module, line: int) -> tuple[ast.FunctionDef, ast.Call, list[str]] | str:
    """(function, the print call, the returned names) for a print at `line` just before the return."""
    for func in tree.body:
        if not isinstance(func, ast.FunctionDef) or not func.lineno <= line <= (func.end_lineno or 0):
            continue
        body = func.body
        at = next((i for i, s in enumerate(body) if s.lineno == line), None)
        if at is None:
            return "the print is not a statement of the compiled function's own body"
        stmt = body[at]
        if not (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id == "print"
        ):
            return f"line {line} is not a print statement"
        if at != len(body) - 2 or not isinstance(body[-1], ast.Return):
            return "the print is not just before the function's final return"
        value = body[-1].value
        items = value.elts if isinstance(value, ast.Tuple) else [value]
        if not items or not all(isinstance(i, ast.Name) for i in items):
            return "the function does not return names (return y, or return y, z)"
        return func, stmt.value, [i.id for i in items]  # type: ignore[union-attr]
    return f"line {line} is not in a top-level function"


def _foreign_names(func: ast.FunctionDef, printed: ast.Call, returned: set[str]) -> list[str]:
    """The function's own names the print reads that it does not return (a starred argument too)."""
    own = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
    own |= {a.arg for a in (func.args.vararg, func.args.kwarg) if a}
    own |= {n.id for n in walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    read = [
        n.id
        for arg in [*printed.args, *(k.value for k in printed.keywords)]
        for n in walk(arg)
        if isinstance(n, ast.Name)
    ]
    foreign = [n for n in read if n in own and n not in returned]
    if any(isinstance(a, ast.Starred) for a in printed.args) or any(k.arg is None for k in printed.keywords):
        foreign.append("*args")
    return list(dict.fromkeys(foreign))


def _compiled_names(tree: ast.Module, func: ast.FunctionDef) -> set[str]:
    """The names that call `func` compiled: its own when `@torch.compile` decorates it, and each
    `NAME = torch.compile(func, ...)` of the module (with `func` itself, whose body changes too)."""
    names = {func.name} if any(_is_compile(d) for d in func.decorator_list) else set()
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and _is_compile(node.value.func)
            and node.value.args
            and isinstance(node.value.args[0], ast.Name)
            and node.value.args[0].id == func.name
        ):
            names |= {node.targets[0].id, func.name}
    return names


def _is_compile(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return (
        isinstance(target, ast.Attribute)
        and target.attr == "compile"
        and isinstance(target.value, ast.Name)
        and target.value.id == "torch"
    )


def _call_edits(
    tree: ast.Module,
    names: set[str],
    text: str,
    printed: ast.Call,
    returned: list[str],
) -> list[list[Edit]] | str:
    """The insertions that print after each call of `names` (one list per call), or why a use of
    them is not one tcx fix can handle."""
    handled: set[int] = set()
    edits: list[list[Edit]] = []
    for node in walk(tree):
        if len(edits) > MAX_CALLS:
            called = ", ".join(sorted(names))
            return f"{called} is called in over {MAX_CALLS} places (tcx fix moves a print after that many)"
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _calls(node.value, names):
            targets = node.targets[0] if len(node.targets) == 1 else None
            values = _assigned(targets, returned)
            if values is None:
                return f"the call at line {node.lineno} is not assigned to names tcx fix can print"
            handled.add(id(node.value.func))
            at = (node.end_lineno or node.lineno, node.end_col_offset or 0)
            edits.append([(*at, f"; {_substituted(text, printed, values)}{MARK}")])
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _calls(node.value, names):
            call = node.value
            reads = [n for n in walk(printed) if isinstance(n, ast.Name) and n.id in returned]
            handled.add(id(call.func))
            end = (call.end_lineno or call.lineno, call.end_col_offset or 0)
            if not reads:  # the print reads nothing the call returns: it follows the call
                edits.append([(*end, f"; {text}{MARK}")])
                continue
            if len(returned) != 1 or len(reads) != 1:
                return f"the call at line {node.lineno} keeps no result and the print reads it twice"
            before, after = _around(text, printed, reads[0])
            edits.append([(call.lineno, call.col_offset, before), (*end, f"{after}{MARK}")])
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _is_compile(node.value):
            handled.update(id(a) for a in node.value.args[:1])  # NAME = torch.compile(func): not a call
    for node in walk(tree):
        if isinstance(node, ast.Name) and node.id in names and id(node) not in handled:
            return f"{node.id} is used at line {node.lineno} other than in a call statement"
    return edits


def _calls(call: ast.Call, names: set[str]) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id in names


def _assigned(target: ast.expr | None, returned: list[str]) -> dict[str, str] | None:
    """Each returned name -> the caller's expression for it, from the assignment's target."""
    if isinstance(target, ast.Name):
        if len(returned) == 1:
            return {returned[0]: target.id}
        return {name: f"{target.id}[{i}]" for i, name in enumerate(returned)}
    if (
        isinstance(target, ast.Tuple)
        and len(target.elts) == len(returned) > 1
        and all(isinstance(e, ast.Name) for e in target.elts)
    ):
        return {name: e.id for name, e in zip(returned, target.elts, strict=True)}  # type: ignore[attr-defined]
    return None


def _around(text: str, printed: ast.Call, name: ast.Name) -> tuple[str, str]:
    """The print's source before and after one name it reads (ast's columns count UTF-8 bytes)."""
    raw = text.encode("utf-8")
    start, end = name.col_offset - printed.col_offset, (name.end_col_offset or 0) - printed.col_offset
    return raw[:start].decode("utf-8"), raw[end:].decode("utf-8")


def _substituted(text: str, printed: ast.Call, values: dict[str, str]) -> str:
    """The print's source with each returned name it reads replaced by the caller's expression."""
    reads = sorted(
        (n for n in walk(printed) if isinstance(n, ast.Name) and n.id in values),
        key=lambda n: n.col_offset,
        reverse=True,
    )
    for n in reads:
        before, after = _around(text, printed, n)
        text = before + values[n.id] + after
    return text
