"""Under what conditions a run compiled: the backend, mode and dynamic setting it used against the
ones the program asks for, and whether the compile caches were the program's own.

A live run keeps the program's own choices unless the user overrides them (`--backend`,
`--mode`, `--dynamic`); then its counts may differ from the program's own run (Inductor adds
guards and restarts that `eager` does not), and every view and `check` say so. Pure and
torch-free: the same facts for a live run, a saved recording and a TORCH_TRACE log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tcx.core.model.run import RunModel

# What torch.compile uses when the program does not say (torch.compile's own defaults).
DEFAULTS = {"backend": "inductor", "mode": "None", "dynamic": "None"}
CACHES_TEXT = {
    "program": "compile caches as the program has them",
    "off": "compile caches off (a cache hit would skip the stages this view shows)",
}


@dataclass(frozen=True)
class Override:
    """One torch.compile setting the run used instead of the program's own."""

    key: str  # "backend", "mode" or "dynamic"
    used: str
    asked: tuple[str, ...]  # what the program's torch.compile calls ask for

    @property
    def text(self) -> str:
        program = ", ".join(self.asked) or "nothing (no torch.compile call was recorded)"
        return f"{self.key} {self.used} (the program asks for {program})"


@dataclass(frozen=True)
class RunConditions:
    backend: str | None  # the backend every compile used when overridden, else the program's own
    program_asked: tuple[str, ...]  # the backends the program's torch.compile calls ask for
    overrides: tuple[Override, ...]
    reason: str | None  # why this backend: "as the program asks", "chosen with --backend", ...
    caches: str | None  # "program", "off", or None when the input does not say (a log, older tcx)

    @property
    def as_program(self) -> bool:
        """The run compiled as the program does, so its counts are the program's."""
        return not self.overrides

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.backend,
            "reason": self.reason,
            "program_asked": list(self.program_asked),
            "as_program": self.as_program,
            "counts_may_differ": not self.as_program,
            "overrides": [
                {"option": o.key, "used": o.used, "program_asks": list(o.asked)} for o in self.overrides
            ],
            "caches": self.caches,
        }


@dataclass(frozen=True)
class CompileCall:
    """One `torch.compile(...)` call of the program, as tcx's hook saw it: the function it compiled
    (None when unnamed), the options the program passed and the ones the run used (`--backend`...)."""

    target: str | None
    asked: Mapping[str, Any]
    used: Mapping[str, Any]
    file: str | None = None  # where the program called torch.compile (older recordings: None)
    line: int | None = None


def compile_calls(m: RunModel) -> tuple[CompileCall, ...]:
    """The program's torch.compile calls, typed (`RunModel.status.torch_compile_calls`)."""
    out = []
    for c in m._compile_calls:
        target, asked, used = c.get("target"), c.get("asked"), c.get("used")
        file, line = c.get("file"), c.get("line")
        out.append(
            CompileCall(
                target=str(target) if target is not None else None,
                asked=asked if isinstance(asked, dict) else {},
                used=used if isinstance(used, dict) else {},
                file=file if isinstance(file, str) else None,
                line=line if type(line) is int else None,
            )
        )
    return tuple(out)


def run_conditions(m: RunModel) -> RunConditions:
    rs = m._run_start or {}
    calls = compile_calls(m)
    asked = {key: _asked(calls, key) for key in DEFAULTS}
    overrides = []
    for key in DEFAULTS:
        used = rs.get(key)
        if used is None:
            continue
        if key == "backend" and rs.get("backend_reason") and not calls:
            continue  # an older recording's default backend, and no compile to compare with
        if {str(used)} != set(asked[key]):
            overrides.append(Override(key, str(used), tuple(asked[key])))
    if m.source_kind == "trace":
        reason = None
    elif rs.get("backend_reason"):  # recorded before tcx ran programs with their own backend
        reason = str(rs["backend_reason"])
    elif rs.get("backend") is not None:
        reason = "chosen with --backend"
    else:
        reason = "as the program asks"
    backend = rs.get("backend") if rs.get("backend") is not None else ", ".join(asked["backend"]) or None
    return RunConditions(
        backend=backend,
        program_asked=tuple(asked["backend"]),
        overrides=tuple(overrides),
        reason=reason,
        caches=rs.get("caches"),
    )


def _asked(calls: tuple[CompileCall, ...], key: str) -> list[str]:
    """What the program's torch.compile calls ask for `key` (torch's default when they leave it out)."""
    # Recordings made before tcx 0.1's strings fix wrote them with their quotes ('eager').
    return sorted({str(c.asked.get(key, DEFAULTS[key])).strip("'") for c in calls})


def conditions_from_json(doc: Any) -> RunConditions:
    """A run's conditions read back from facts written earlier (a baseline); what a document
    leaves out (older tcx, a log) is unknown, not assumed."""
    if not isinstance(doc, dict):
        return RunConditions(None, (), (), None, None)

    def texts(value: Any) -> tuple[str, ...]:
        return tuple(str(v) for v in value) if isinstance(value, list) else ()

    overrides = tuple(
        Override(str(o.get("option")), str(o.get("used")), texts(o.get("program_asks")))
        for o in doc.get("overrides") or []
        if isinstance(o, dict)
    )
    if not overrides and doc.get("as_program") is False:  # an override the document did not detail
        overrides = (Override("backend", str(doc.get("name")), texts(doc.get("program_asked"))),)
    name, reason, caches = doc.get("name"), doc.get("reason"), doc.get("caches")
    return RunConditions(
        backend=None if name is None else str(name),
        program_asked=texts(doc.get("program_asked")),
        overrides=overrides,
        reason=None if reason is None else str(reason),
        caches=None if caches is None else str(caches),
    )
