"""A run that compiled nothing, and the `torch.compile` calls whose result never ran.

`torch.compile(model)` followed by `model.generate()` (HF) or `compiled.generate()` compiles nothing:
`generate` is looked up on the original module and calls it uncompiled. Counts of 0 then mean "not
seen", not "clean", so `tcx check` fails such a run unless told an empty run is fine (`--allow-empty`),
and explain names the same calls.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from tcx.core.model import RunModel
from tcx.core.selection import Selection

_CLASS = re.compile(r"([A-Za-z_][\w.]*)\(")


@dataclass(frozen=True)
class CompileCall:
    """One `torch.compile(...)` call of the program: what it compiled and where (the recorder's)."""

    target: str  # "TinyLM" for a module, the function's qualified name for a function
    file: str | None
    line: int | None

    @property
    def where(self) -> str:
        """`file:line`, relative to the current directory when the file is under it."""
        if not self.file:
            return "an unrecorded line"
        rel = os.path.relpath(self.file) if os.path.isabs(self.file) else self.file
        return f"{self.file if rel.startswith('..') else rel}:{self.line}"


def compile_calls(model: RunModel) -> list[CompileCall]:
    """The program's `torch.compile` calls, once per site and target, in call order."""
    out: dict[tuple[str, str | None, int | None], CompileCall] = {}
    for call in model.status.torch_compile_calls:
        target = call.target or "?"
        named = _CLASS.match(target)  # a module's repr, "TinyLM(\n  (emb): ...", names its class first
        target = named.group(1) if named else target
        key = (target, call.file, call.line)
        out.setdefault(key, CompileCall(*key))
    return list(out.values())


def compiled_nothing(model: RunModel, selection: Selection) -> bool:
    """True when no frame of the selection compiled, in the program or its observed child processes.
    A child process tcx could not observe may have compiled: that run is lost capture (exit 4), not
    an empty one."""
    if any(selection.includes(cid) for cid in model.compiles) or model.status.children.not_observed:
        return False
    function = None if selection.whole_run else selection.function
    return model.status.children.total("compile_count", function) == 0


def empty_run_text(model: RunModel) -> str:
    """What explain and check say of a run that compiled nothing: the calls whose result never ran."""
    calls = compile_calls(model)
    if not calls:
        return "Nothing was compiled: the program never called torch.compile (no compiled function ran)."
    named = "; ".join(f"torch.compile({c.target}) at {c.where}" for c in calls[:5])
    more = f" and {len(calls) - 5} more" if len(calls) > 5 else ""
    return (
        f"Nothing was compiled: {named}{more} returned a compiled callable that was never called "
        "(no compiled frame ran). A method reached through a compiled module, such as .generate(), runs the "
        "original module's uncompiled forward: call the compiled object itself, or compile what that method "
        "calls, e.g. `model.forward = torch.compile(model.forward)` (untested on this program)."
    )
