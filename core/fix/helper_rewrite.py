"""The helper rewrites of `tcx fix`: a function the compiled code calls, decorated so Dynamo stops
tracing into it.

A break inside a helper the compiled function calls (a call Dynamo cannot trace: a builtin it
skips such as `time.time`, a C object such as json's scanner) goes away when the helper is
decorated:

- `@torch._dynamo.nonstrict_trace`: Dynamo puts a call of the helper in the graph and the helper
  is traced by make_fx, not by Dynamo (Python it cannot trace runs at trace time); where the
  installed torch lacks it, the candidate says "not available on torch X.Y" and is not run;
- `@torch.compiler.allow_in_graph`: the helper is one opaque call in Dynamo's graph (its inputs
  and outputs tensors), traced by AOTAutograd like any op.

Either way Dynamo no longer guards on what the helper reads: a global it reads is read once,
when the graph is made (a backend that traces the graph, aot_eager or Inductor, freezes it), which
the re-run's outputs show. The helper is the deepest function of the program's file on the break's
stack below the compiled frame, a top-level `def` with no decorator; the decorator takes the blank
line above the `def`, so every line keeps its number.

Pure and torch-free.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from tcx.core import pysource
from tcx.core.fix.rewrites import Rewrite, rewritten
from tcx.core.fix.source_file import read

if TYPE_CHECKING:
    from tcx.core.views.explain import BreakSite

DECORATORS = (
    ("torch._dynamo.nonstrict_trace", "nonstrict_trace"),
    ("torch.compiler.allow_in_graph", None),
)
MARK = "  # tcx fix: Dynamo does not trace into this helper"


def helper_rewrites(site: BreakSite) -> list[Rewrite] | str:
    """The helper at the break decorated with each of DECORATORS (in that order), or why not."""
    helper = _helper_frame(site)
    if isinstance(helper, str):
        return helper
    file, line, name = helper
    src = read(file, line)
    if isinstance(src, str):
        return src
    func = next(
        (
            n
            for n in src.tree.body
            if isinstance(n, ast.FunctionDef) and n.name == name and n.lineno <= line <= (n.end_lineno or 0)
        ),
        None,
    )
    if func is None:
        return f"{name} is not a top-level function of {file}"
    if func.decorator_list:
        return f"{name} already has decorators"
    lines = src.lines
    above = func.lineno - 2  # the line above `def`, 0-based
    if above < 0 or lines[above].strip(" \t\f\r\n"):
        return f"no blank line above `def {name}` to put the decorator on (every line keeps its number)"
    end = pysource.line_end(lines[above]) or "\n"
    rewrites = []
    for decorator, needs in DECORATORS:
        text = "".join([*lines[:above], f"@{decorator}{MARK}{end}", *lines[above + 1 :]])
        rewrites.append(rewritten(src, text, f"@{decorator}  # on def {name}", needs))
    return rewrites


def _helper_frame(site: BreakSite) -> tuple[str, int, str] | str:
    """(file, line, function) of the deepest user frame below the outermost compiled frame of the
    break's stack, in that frame's file (the program's file, which a rewrite can change)."""
    compiled = {o.frame for o in site.occurrences if o.frame}
    stack = site.user_stack
    top = next((i for i, f in enumerate(stack) if f.name in compiled), None)
    if top is None:
        return "the compiled frame is not on the break's stack"
    below = [f for f in stack[top + 1 :] if f.origin == "user" and f.file == stack[top].file and f.line]
    if not below:
        return "the break is in the compiled function itself, not in a helper it calls"
    frame = below[-1]
    return frame.file, int(frame.line or 0), frame.name
