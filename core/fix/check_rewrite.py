"""The `torch._check` rewrite of `tcx fix`: a guard clause on a Python number as a runtime check.

With `capture_scalar_outputs`, `n = t.item()` is an unbacked symbol (u0): Dynamo cannot decide
`if n < 0:` at trace time ("Could not guard on data-dependent expression u0 < 0", a graph break
torch reports as "Data-dependent branching" with "attempted to jump with SymNodeVariable"). When
the `if` only raises, what it means is "n >= 0 holds", which `torch._check(n >= 0)` says to the
compiler: torch records the fact, the branch is decided, and the check stays as an assert that
runs with the graph (a RuntimeError instead of the program's own exception when it fails).

    if n < 0:                          torch._check(n >= 0, lambda: "negative")  # tcx fix: ...
        raise ValueError("negative")   # raise ValueError("negative")

The condition is negated by flipping its comparison (`<` to `>=`, `==` to `!=`, `not c` to `c`):
`torch._check(not c)` makes Dynamo break again (torch 2.13). The message is kept when it is one
string literal; an f-string in the message lambda breaks the graph, so it is left out. Line numbers
stay as they were (the `if` line becomes the check, the raise is commented out).

Pure and torch-free.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from tcx.core import pysource
from tcx.core.fix.rewrites import Rewrite, commented, if_at, rewritten
from tcx.core.fix.source_file import SourceFile, read

if TYPE_CHECKING:
    from tcx.core.views.explain import BreakSite

MARK = "  # tcx fix: the guard clause as torch._check"
FLIPPED = {
    ast.Lt: ">=",
    ast.LtE: ">",
    ast.Gt: "<=",
    ast.GtE: "<",
    ast.Eq: "!=",
    ast.NotEq: "==",
}
# torch's debug context of a branch on a Python number (SymInt/SymBool), not on a tensor
ON_A_NUMBER = "SymNodeVariable"


def check_rewrite(site: BreakSite) -> Rewrite | str:
    """The guard clause at the break's line as `torch._check(...)`, or why there is none."""
    contexts = " ".join(o.debug_context or "" for o in site.occurrences)
    if ON_A_NUMBER not in contexts:
        if "TensorVariable" in contexts:
            return "the branch is on a tensor, not on a Python number (torch._check takes a bool)"
        return "torch's break does not say the condition is a Python number (SymNodeVariable)"
    src = read(site.file, site.line)
    if isinstance(src, str):
        return src
    found = if_at(src.tree, int(site.line or 0))
    if found is None:
        return f"no `if` statement starts at line {site.line}"
    _func, _block, node = found
    if node.orelse or len(node.body) != 1 or not isinstance(node.body[0], ast.Raise):
        return "the `if` does more than raise (torch._check would drop a branch the program takes)"
    holds = _negated(src, node.test)
    if holds is None:
        return "the condition is not one comparison (or `not` of one) tcx fix can negate"
    message = _message(node.body[0])
    code = f"torch._check({holds}{f', lambda: {message}' if message else ''})"
    lines = list(src.lines)
    first, last = node.lineno, node.end_lineno or node.lineno
    head = lines[first - 1]
    indent = head[: len(head) - len(head.lstrip())]
    end = pysource.line_end(head) or "\n"
    new = [f"{indent}{code}{MARK}{end}", *(commented(text, indent) for text in lines[first:last])]
    text = "".join([*lines[: first - 1], *new, *lines[last:]])
    return rewritten(src, text, code)


def _negated(src: SourceFile, test: ast.expr) -> str | None:
    """The source of `not test` without `not`: one comparison flipped, or the operand of a `not`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return src.segment(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in FLIPPED:
        left = src.one_line(test.left)
        right = src.one_line(test.comparators[0])
        if left and right:
            return f"{left} {FLIPPED[type(test.ops[0])]} {right}"
    return None


def _message(node: ast.Raise) -> str | None:
    """The raised exception's message when it is one string literal, as code."""
    exc = node.exc
    if isinstance(exc, ast.Call) and len(exc.args) == 1 and not exc.keywords:
        arg = exc.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return repr(arg.value)
    return None
