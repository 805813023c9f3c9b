"""A graph break inside a library `if` that a setting of the user's model decides, and the setting that
takes the branch away.

The library's method reads an attribute of `self` (`loss_type = getattr(self, "loss_type", None)`, or
`self.loss_type` in the condition itself), branches on it, and the branch that breaks assigns a constant
(`loss_type = "ForCausalLM"`). When `self` is the module the program compiled (the break's frame is
reached as `self.<method>` from a frame that the nn.Module call of the program's compiled module
entered, passing `self` along), setting `model.<attribute> = <constant>` before torch.compile makes the
condition false, so the branch, and its break, never run. Everything is read from the break's own frames
and the library's source (the function around the break's line, parsed); nothing here knows a library.

The remedy heads the break's fix text (`head_suggestions`), and `tcx fix` verifies it by setting the
attribute on the compiled module before it is compiled (core/fix/candidates.py, core/recorder/
compat_fix.py's `attributes`). The generic logging text is narrowed to the method the break's line
calls (`logging_text`). Pure and torch-free.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tcx.core.analysis.experts_dispatch import ExpertsDispatch, experts_dispatch
from tcx.core.analysis.library_source import compiled_module, parse, source_lines

if TYPE_CHECKING:
    from tcx.core.model import Frame, RunModel
    from tcx.core.views.explain import BreakSite

_MODULE_CALL = re.compile(r"\bself\b|\*args\b")  # a frame that hands the module on to the next one


@dataclass(frozen=True)
class LibraryBranch:
    """`<name>.<path> = <value>` before torch.compile(<name>) removes the break at the library's `if`."""

    path: tuple[str, ...]  # the attribute under the compiled module ("loss_type",)
    value: Any  # the constant the branch assigns
    value_source: str  # the constant as the library writes it ('"ForCausalLM"')
    name: str  # the program's name for the compiled module ("model")
    where: str  # where the program compiled it (file:line)
    condition: str  # the library's condition, as written
    at: str  # the library's `if` (file:line)

    @property
    def change(self) -> str:
        return f"{self.name}.{'.'.join(self.path)} = {self.value_source}  # before torch.compile({self.name})"

    @property
    def attribute(self) -> dict[str, Any]:
        """The fix capture's `attributes` item (set on the compiled module before it is compiled)."""
        return {"path": list(self.path), "value": self.value}

    def text(self) -> str:
        attr = ".".join(self.path)
        return (
            f"The break sits in the library's `if {self.condition}` ({self.at}), which reads "
            f"`self.{attr}` of the module you compiled, and whose branch assigns {self.value_source} in its "
            f"place. Set it before compiling, at your call site ({self.where}): `{self.change}`, so the "
            "condition is false and the branch (and its break) never runs (untested until `tcx fix` runs it)."
        )


def head_suggestions(model: RunModel, sites: list[BreakSite]) -> None:
    """Put each site's module-setting remedy first in its fix text, and name the logger method a logging
    break's line calls instead of a generic one."""
    for site in sites:
        if site.suggestion and "logging.Logger" in site.gb_type:
            site.suggestion = narrow_logging(site.suggestion, site)
        found = module_setting(model, site)
        if found is not None:
            site.suggestion = " ".join(t for t in (found.text(), site.suggestion) if t)


def module_setting(model: RunModel, site: BreakSite) -> LibraryBranch | ExpertsDispatch | None:
    """What to set on the compiled module before compiling so the break's library code does not run: a
    library branch's attribute, or transformers' experts implementation (analysis/experts_dispatch.py)."""
    return library_branch(model, site) or experts_dispatch(model, site)


def library_branch(model: RunModel, site: BreakSite) -> LibraryBranch | None:
    """The setting of the compiled module that takes the break's branch away, or None where the break is
    not in such a branch (no constant assigned, a condition not on an attribute of `self`, `self` not
    the compiled module, no single compiled module)."""
    stack = site.user_stack
    if len(stack) < 2 or stack[-1].origin == "user" or site.line is None:
        return None
    compiled = compiled_module(model) if _reaches_self(stack) else None
    if compiled is None:
        return None
    frame = stack[-1]
    tree = parse(frame.file)
    function = _function_at(tree, frame.name, site.line) if tree else None
    if function is None or not _is_method(function):
        return None
    found = _branch(function, site.line)
    if found is None:
        return None
    path, value, value_source, condition, if_line = found
    name, where = compiled
    at = f"{os.path.basename(frame.file)}:{if_line}"
    return LibraryBranch(path, value, value_source, name, where, condition, at)


def narrow_logging(suggestion: str, site: BreakSite) -> str:
    """The generic logging text replaced by one for the method the break's line calls."""
    from tcx.core.analysis.remedies import remedy_for

    generic = remedy_for("logging.Logger") or ""
    return suggestion.replace(generic, logging_text(site)) if generic else suggestion


# logging.Logger's own methods: the fix capture can name them before the program runs (core/fix/candidates.py)
_OWN_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}


def logging_text(site: BreakSite) -> str:
    """What to do about a logger call in compiled code, for the method its line calls."""
    code = site.user_stack[-1].code if site.user_stack else ""
    m = re.search(r"\.(\w+)\(", code or "")
    method = m.group(1) if m else None
    if method is None:
        how = "add the logger method it calls to torch._dynamo.config.ignore_logging_functions (untested)"
    elif method in _OWN_METHODS:
        how = (
            f"add the method it calls to torch._dynamo.config.ignore_logging_functions (e.g. "
            f".add(logging.Logger.{method}); `tcx fix` tries it)"
        )
    else:
        how = (
            f"adding the method it calls, `{method}` (not one of logging.Logger's own methods: code "
            f"imported by the program adds it), to torch._dynamo.config.ignore_logging_functions is "
            "untested (tcx fix cannot name it before the program imports that code)"
        )
    text = (
        f"A logging call inside the compiled code: {how}; the call then does not run in compiled code, so "
        "that message is not logged from there. Or move the log call after the compiled call"
    )
    if _mentions(site, "output_attentions"):
        text += (
            ", or avoid the option that makes the library log here (for transformers' output_attentions: "
            "attn_implementation='eager')"
        )
    return text + "."


def _mentions(site: BreakSite, word: str) -> bool:
    """The break's explanation, its line, or its source lines up to the break, name `word`."""
    frame = site.user_stack[-1] if site.user_stack else None
    if word in site.explanation or (frame is not None and word in frame.code):
        return True
    text = source_lines(frame.file) if frame else None
    if text is None or site.line is None:
        return False
    return any(word in ln for ln in text[max(0, site.line - 6) : site.line])


def _reaches_self(stack: list[Frame]) -> bool:
    """The break's method is reached as `self.<method>` from the frame above it, and every library frame
    between the program's last line and it hands the module on (`self`, or `*args` from nn.Module's call)."""
    users = [i for i, f in enumerate(stack) if f.origin == "user"]
    if not users:
        return False
    inner = stack[users[-1] + 1 :]
    if len(inner) < 2 or not re.search(rf"\bself\.{re.escape(inner[-1].name)}\b", inner[-2].code or ""):
        return False
    return all(_MODULE_CALL.search(f.code or "") for f in inner[:-1])


def _is_method(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = function.args.posonlyargs + function.args.args
    return bool(args) and args[0].arg == "self"


def _branch(
    function: ast.FunctionDef | ast.AsyncFunctionDef, line: int
) -> tuple[tuple[str, ...], Any, str, str, int] | None:
    """(attribute path, constant, its source, condition text, the if's line) of the innermost `if` whose
    body holds `line`, tests an attribute of `self` (directly or through a local read from it before the
    `if`) and assigns that local (or attribute) a constant in the body."""
    ifs = [
        n
        for n in ast.walk(function)
        if isinstance(n, ast.If) and n.body and n.body[0].lineno <= line <= (n.body[-1].end_lineno or 0)
    ]
    for node in sorted(ifs, key=lambda n: -n.lineno):  # innermost first
        reads = _self_reads(function, node)
        for target, path in reads.items():
            if target not in _names(node.test):
                continue
            assigned = _assigned_constant(node.body, target)
            if assigned is not None:
                value, source = assigned
                return path, value, source, ast.unparse(node.test), node.lineno
    return None


def _self_reads(function: ast.AST, branch: ast.If) -> dict[str, tuple[str, ...]]:
    """Name (a local, or `self.x`) -> the attribute path of `self` it holds, for the `if`'s condition:
    `self.x` itself, and locals assigned `getattr(self, "x", ...)` or `self.x` before the `if`."""
    out: dict[str, tuple[str, ...]] = {}
    for n in ast.walk(branch.test):
        path = _self_path(n)
        if path:
            out[ast.unparse(n)] = path
    for n in ast.walk(function):
        if (
            isinstance(n, ast.Assign)
            and n.lineno < branch.lineno
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name)
        ):
            path = _self_path(n.value)
            if path:
                out[n.targets[0].id] = path
    return out


def _self_path(node: ast.AST) -> tuple[str, ...] | None:
    """("config", "x") for `self.config.x` or `getattr(self.config, "x", default)`; else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        owner = _self_path(node.args[0]) if not _is_self(node.args[0]) else ()
        return (*owner, node.args[1].value) if owner is not None else None
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return tuple(parts) if parts and _is_self(node) else None


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _names(test: ast.AST) -> set[str]:
    """The names and `self.x` attributes a condition reads, as written."""
    return {ast.unparse(n) for n in ast.walk(test) if isinstance(n, (ast.Name, ast.Attribute))}


def _assigned_constant(body: list[ast.stmt], target: str) -> tuple[Any, str] | None:
    """The constant the branch's body assigns `target` (the last such statement), and its source."""
    found = None
    for stmt in body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and ast.unparse(stmt.targets[0]) == target
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, (str, int, float, bool))
        ):
            found = (stmt.value.value, ast.unparse(stmt.value))
    if found is not None and isinstance(found[0], str):  # as the library writes it
        found = (found[0], '"' + found[0] + '"' if '"' not in found[0] else repr(found[0]))
    return found


def _function_at(tree: ast.Module, name: str, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function named `name` whose body holds `line`."""
    found = None
    for n in ast.walk(tree):
        if (
            isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name == name
            and n.lineno <= line <= (n.end_lineno or 0)
            and (found is None or n.lineno > found.lineno)
        ):
            found = n
    return found
