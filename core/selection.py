"""One `Selection` per run: the compile ids that `TARGET:func` chooses, honoured by every view.

The rule (the one `explain` has always used): a compile belongs to `func` when it is a compile of
`func` itself or of one of its resume functions, when `func` is on the stack of the frame being
compiled (a frame it called that Dynamo compiled on its own), or when one of the compile's graph
breaks happened with `func` on the user's stack (a frame inlined into it broke).

Pure and torch-free. Views filter by compile id (`Selection.includes`); a record that carries
only a function name (a per-call event with no compile id) is matched against the names of the
selected compiles (`Selection.includes_function`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tcx.core.errors import UsageError
from tcx.core.model import Compile, GraphBreak, RunModel, resume_target


@dataclass(frozen=True)
class Selection:
    function: str | None  # the `:func` asked for (None: the whole run)
    compile_ids: tuple[str, ...]  # in the run's order
    whole_run: bool  # no function asked, or tcx called it itself (everything recorded is its)
    functions: frozenset[str] = frozenset()  # code names of the selected compiles
    kernel: str | None = None  # `--kernel NAME`: only the kernels named so (or containing it)
    site: tuple[str, str | None, int | None] | None = None  # one break site (type, file, line): browse
    _ids: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ids", frozenset(self.compile_ids))

    def includes(self, compile_id: str | None) -> bool:
        """Is this compile id chosen? (A record without one belongs only to the whole run.)"""
        return self.whole_run or (compile_id is not None and compile_id in self._ids)

    def includes_function(self, name: str | None) -> bool:
        """For records that carry only a code name: is it the name of a chosen compile?"""
        return self.whole_run or (name is not None and name in self.functions)

    def shows_kernel(self, name: str) -> bool:
        return self.kernel is None or name == self.kernel or self.kernel in name

    def shows_site(self, key: tuple[str, str | None, int | None]) -> bool:
        return self.site is None or key == self.site

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"function": self.function, "compile_ids": list(self.compile_ids)}
        if self.kernel is not None:
            doc["kernel"] = self.kernel
        return doc


def whole_run(model: RunModel) -> Selection:
    return Selection(
        function=None,
        compile_ids=tuple(model.compiles),
        whole_run=True,
        functions=frozenset(c.co_name for c in model.compiles.values() if c.co_name),
    )


def select(model: RunModel, function: str | None, *, strict: bool = True) -> Selection:
    """The compiles `function` chooses in `model` (the whole run when `function` is None).

    When tcx called `function` itself (`--call`, `tcx_calls()`), everything recorded belongs to
    it (the compiled frame may be a module's `forward`). With `strict`, a function that chose no
    compile is a usage error naming the functions that were compiled."""
    if not function:
        return whole_run(model)
    if function in model.status.called:
        return Selection(
            function=function,
            compile_ids=tuple(model.compiles),
            whole_run=True,
            functions=frozenset(c.co_name for c in model.compiles.values() if c.co_name),
        )
    via_breaks = {b.compile_id for b in model.graph_breaks if passes_through(b, function)}
    chosen = [c for cid, c in model.compiles.items() if cid in via_breaks or belongs_to(c, function)]
    if strict and not chosen:
        hint = "Compiled functions: " + (", ".join(compiled_functions(model)) or "none") + "."
        if model.compiles and not any(c.full_stack for c in model.compiles.values()):
            hint += (
                " This input has torch's own compile stacks only, which leave out the direct caller of "
                "a torch.compile-wrapped function (a function that only calls one cannot be matched): "
                "select the compiled function, or record the program with tcx, which keeps every caller."
            )
        raise UsageError(f"{function!r} was not compiled in this run: no compile belongs to it.", hint=hint)
    return Selection(
        function=function,
        compile_ids=tuple(c.compile_id for c in chosen),
        whole_run=False,
        functions=frozenset(c.co_name for c in chosen if c.co_name),
    )


def focus(
    model: RunModel,
    selection: Selection,
    compile_ids: tuple[str, ...] = (),
    *,
    kernel: str | None = None,
    site: tuple[str, str | None, int | None] | None = None,
) -> Selection:
    """`selection` narrowed to these compiles (all of it when none is given), one kernel, one break
    site: what `tcx browse` shows for one item of the run."""
    if compile_ids:
        names = frozenset(c.co_name for cid in compile_ids if (c := model.compiles.get(cid)) and c.co_name)
        selection = Selection(None, tuple(compile_ids), whole_run=False, functions=names)
    return replace(selection, kernel=kernel or selection.kernel, site=site or selection.site)


def compiled_functions(model: RunModel) -> list[str]:
    """The user functions Dynamo compiled (resume functions named after theirs), in run order."""
    names: list[str] = []
    for comp in model.compiles.values():
        resumed = resume_target(comp)
        name = resumed[0] if resumed else comp.co_name
        if name and name not in names:
            names.append(name)
    return names


def belongs_to(comp: Compile, function: str) -> bool:
    """A compile of `function`, of one of its resume functions, or of a frame it called."""
    resumed = resume_target(comp)
    if comp.co_name == function or (resumed and resumed[0] == function):
        return True
    return any(fr.name == function for fr in comp.stack[:-1])


def passes_through(b: GraphBreak, function: str) -> bool:
    """The break happened while `function` was on the user's stack (in it or below it)."""
    return any(fr.name == function for fr in b.user_stack)
