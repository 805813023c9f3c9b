"""A graph break inside transformers' loop over MoE experts, and the experts implementation that has none.

transformers dispatches an MoE block's experts through a class decorator (`@use_experts_implementation`):
the class's own `forward` is the "eager" implementation, a Python loop over the experts the router hit
(`nonzero()`, then `for expert_idx in expert_hit`), whose number depends on the routing, so Dynamo
breaks there in every layer; the other implementations ("grouped_mm", transformers' default where torch has
it, and "batched_mm") replace that forward with tensor code of fixed shape. When the break's line sits in
the `forward` of such a decorated class, the implementation that ran is the loop, and
`model.set_experts_implementation("grouped_mm")` on the module the program compiled (before compiling)
takes the loop away. torch's hint for the `nonzero()` break, `capture_dynamic_output_shape_ops`, keeps the
`for` over its result (bench/advice.txt saw it move the break there on Qwen2-MoE), so that config is
tried after this remedy.

Everything is read from the break's frames, the library's source (the class around the break's line,
parsed) and the program's own source; `tcx fix` verifies it by calling the method on the compiled module
before it is compiled (core/recorder/compat_fix.py's `attributes` with `call`). Pure and torch-free.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tcx.core.analysis.library_source import compiled_module, parse

if TYPE_CHECKING:
    from tcx.core.model import RunModel
    from tcx.core.views.explain import BreakSite

DISPATCH_DECORATOR = "use_experts_implementation"
METHOD = "set_experts_implementation"
IMPLEMENTATION = "grouped_mm"  # transformers' default where torch has grouped_mm; no loop, no break
_ASKED = re.compile(r"""experts_implementation\s*=\s*["']eager["']""")


@dataclass(frozen=True)
class ExpertsDispatch:
    """`<name>.set_experts_implementation("grouped_mm")` before torch.compile(<name>) removes the loop."""

    name: str  # the program's name for the compiled module ("model")
    where: str  # where the program compiled it (file:line)
    experts_class: str  # the decorated class whose forward broke ("Qwen2MoeExperts")
    at: str  # the break's line in it (file:line)
    asked_at: str | None  # the program's own line that asks for the loop (experts_implementation="eager")
    loop_line: int | None  # the `for` over the break line's result, when the break is that line's op

    @property
    def change(self) -> str:
        return f'{self.name}.{METHOD}("{IMPLEMENTATION}")  # before torch.compile({self.name})'

    @property
    def attribute(self) -> dict[str, Any]:
        """The fix capture's `attributes` item: the method called on the compiled module before compiling."""
        return {"path": [METHOD], "call": [IMPLEMENTATION]}

    def text(self) -> str:
        asked = (
            f" Your program asks for that loop at {self.asked_at}: drop the argument there (transformers "
            f'then picks "{IMPLEMENTATION}" where torch has it), or'
            if self.asked_at
            else " Switch it"
        )
        return (
            f"The break is in transformers' Python loop over the MoE experts the router hit ({self.at}, "
            f'{self.experts_class}.forward: the "eager" experts implementation), whose length depends on '
            f"the routing.{asked} at your call site ({self.where}): `{self.change}`; that implementation "
            "has no loop, so the break goes away (untested until `tcx fix` runs it)."
            + (
                f" torch's hint, capture_dynamic_output_shape_ops, keeps the `for` over that result "
                f"(line {self.loop_line}), whose length is still data-dependent."
                if self.loop_line
                else ""
            )
        )


def experts_dispatch(model: RunModel, site: BreakSite) -> ExpertsDispatch | None:
    """The experts implementation to switch to, or None where the break is not in the `forward` of a class
    transformers dispatches through `@use_experts_implementation`, or no single module was compiled."""
    stack = site.user_stack
    if not stack or stack[-1].origin == "user" or site.line is None:
        return None
    frame = stack[-1]
    tree = parse(frame.file)
    experts = _dispatched_class(tree, site.line) if tree else None
    compiled = compiled_module(model) if experts else None
    if experts is None or compiled is None:
        return None
    name, where = compiled
    at = f"{os.path.basename(frame.file)}:{site.line}"
    loop = _loop_over_result(tree, site.line) if tree and "Dynamic shape operator" in site.gb_type else None
    return ExpertsDispatch(name, where, experts, at, _asked_at(stack), loop)


def _dispatched_class(tree: ast.Module, line: int) -> str | None:
    """The name of the class decorated with `@use_experts_implementation` whose `forward` holds `line`."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef) or not node.lineno <= line <= (node.end_lineno or 0):
            continue
        if not any(_decorator_name(d) == DISPATCH_DECORATOR for d in node.decorator_list):
            continue
        for item in node.body:
            if (
                isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                and item.name == "forward"
                and item.lineno <= line <= (item.end_lineno or 0)
            ):
                return node.name
    return None


def _decorator_name(node: ast.expr) -> str | None:
    """`use_experts_implementation`, `integrations.use_experts_implementation`, or either called."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def _asked_at(stack: list[Any]) -> str | None:
    """file:line of the first call in the program's own files that passes experts_implementation="eager"."""
    for path in dict.fromkeys(f.file for f in stack if f.origin == "user"):
        tree = parse(path)
        if tree is None:
            continue
        lines = sorted(
            n.value.lineno
            for n in ast.walk(tree)
            if isinstance(n, ast.keyword)
            and n.arg == "experts_implementation"
            and isinstance(n.value, ast.Constant)
            and n.value.value == "eager"
        )
        if lines:
            shown = os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else path
            return f"{shown}:{lines[0]}"
    return None


def _loop_over_result(tree: ast.Module, line: int) -> int | None:
    """The line of a `for` over the name the break's line assigns (`hit = x.nonzero()` ... `for i in hit`)."""
    targets = {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and n.lineno <= line <= (n.end_lineno or n.lineno)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    loops = [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.For)
        and n.lineno > line
        and isinstance(n.iter, ast.Name)
        and n.iter.id in targets
    ]
    return min(loops) if loops else None
