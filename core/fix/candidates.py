"""The candidate remedies of `tcx fix`: derived from the baseline run's findings, one per change.

Each graph break type with a known config remedy gets one, each shape recompile of a compiled
function's argument gets `mark_dynamic` on that argument and dimension (and the run gets one
`dynamic=True` candidate, unless the program already compiles with it). A break that needs a
code change (a data-dependent `if`) gets the mechanical rewrite core/fix/rewrites.py can make, run
from a copy; where it can make none, what to write, not run.

Pure and torch-free: the runs are core/fix/verify.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tcx.core.fix.rewrites import Rewrite, cond_rewrite

if TYPE_CHECKING:
    from tcx.core.views.explain import BreakSite, Explanation
    from tcx.core.views.recompiles import RecompileReport

DYNAMO_CONFIG = "torch._dynamo.config"


@dataclass(frozen=True)
class ConfigRule:
    """A break type (matched in its type or explanation text) and the config assignment that removes it."""

    needles: tuple[str, ...]
    name: str
    value: Any = True
    add: str | None = None  # "module.attr" of a callable added to the config's set instead of a value

    def change(self) -> str:
        if self.add:
            return f"{DYNAMO_CONFIG}.{self.name}.add({self.add.removeprefix('builtins.')})"
        return f"{DYNAMO_CONFIG}.{self.name} = {self.value!r}"

    def spec(self) -> dict[str, Any]:
        item: dict[str, Any] = {"module": DYNAMO_CONFIG, "name": self.name}
        if self.add:
            item["add"] = self.add
        else:
            item["value"] = self.value
        return item


CONFIG_RULES = (
    ConfigRule(
        ("Tensor.item()", "capture_scalar_outputs", "Data dependent operator"), "capture_scalar_outputs"
    ),
    ConfigRule(
        ("dynamic output shape", "Dynamic shape operator", "capture_dynamic_output_shape_ops"),
        "capture_dynamic_output_shape_ops",
    ),
    ConfigRule(("builtin operator `print`",), "reorderable_logging_functions", add="builtins.print"),
)
# Breaks whose fix is a change to the program's code: what to write, and the mechanical rewrite
# tried on a copy where the code has a shape it knows (core/fix/rewrites.py).
CODE_RULES = (
    (
        ("Data-dependent branching",),
        "rewrite the branch with torch.cond(pred, true_fn, false_fn, operands) (both branches "
        "tensor-only) or torch.where(cond, a, b)",
        cond_rewrite,
    ),
)


@dataclass(frozen=True)
class Finding:
    kind: str  # graph_break | recompile
    what: str  # the break type, or the recompile cause
    file: str | None
    line: int | None
    function: str | None
    occurrences: int
    arg: str | None = None
    dim: int | None = None

    def to_json(self) -> dict[str, Any]:
        site = {"file": self.file, "line": self.line, "function": self.function}
        if self.arg is not None:
            site.update(arg=self.arg, dim=self.dim)
        return {"kind": self.kind, "what": self.what, "occurrences": self.occurrences, "site": site}


@dataclass
class Remedy:
    """One candidate: the finding it targets, the change as code, and how a run applies it."""

    kind: str  # config | dynamism | code
    change: str
    findings: list[Finding]
    config: list[dict[str, Any]] = field(default_factory=list)  # the fix capture's `config`
    mark_dynamic: list[dict[str, Any]] = field(default_factory=list)  # the fix capture's `mark_dynamic`
    dynamic: bool | None = None  # RunOptions.dynamic (torch.compile(dynamic=True) for every compile)
    runnable: bool = True
    why_not_run: str | None = None
    rewrite: Rewrite | None = None  # a code remedy's rewritten file (run from a copy)

    @property
    def weight(self) -> int:
        return sum(f.occurrences for f in self.findings)


def candidates(ex: Explanation, recompiles: RecompileReport, already_dynamic: bool) -> list[Remedy]:
    """Every remedy the baseline's findings suggest, heaviest (most occurrences) first; code
    rewrites after them, remedies that cannot run last. `already_dynamic`: the program compiles
    with dynamic=True already."""
    by_change: dict[str, Remedy] = {}
    for site in ex.sites:
        _add_break_remedy(by_change, site)
    shape = _shape_recompiles(recompiles)
    for finding in shape:
        mark = {"function": finding.function, "arg": finding.arg, "dim": finding.dim}
        call = f"torch._dynamo.mark_dynamic({finding.arg}, {finding.dim})"
        change = f"{call}  # before each call of {finding.function}"
        remedy = by_change.setdefault(change, Remedy("dynamism", change, [], mark_dynamic=[mark]))
        remedy.findings.append(finding)
    if shape:
        already = already_dynamic
        by_change["dynamic=True"] = Remedy(
            "dynamism",
            "torch.compile(fn, dynamic=True)",
            list(shape),
            dynamic=True,
            runnable=not already,
            why_not_run="the program already compiles with dynamic=True" if already else None,
        )
    remedies = list(by_change.values())
    return sorted(remedies, key=lambda r: (not r.runnable, r.kind == "code", -r.weight))


def _add_break_remedy(by_change: dict[str, Remedy], site: BreakSite) -> None:
    text = f"{site.gb_type}\n{site.explanation}"
    finding = Finding("graph_break", site.gb_type, site.file, site.line, site.function, len(site.occurrences))
    for rule in CONFIG_RULES:
        if any(n in text for n in rule.needles):
            remedy = by_change.setdefault(
                rule.change(), Remedy("config", rule.change(), [], config=[rule.spec()])
            )
            remedy.findings.append(finding)
            return
    for needles, advice, rewriter in CODE_RULES:
        if any(n in text for n in needles):
            rewrite = rewriter(site.file, site.line)
            if isinstance(rewrite, Rewrite):
                remedy = by_change.setdefault(rewrite.line, Remedy("code", rewrite.line, [], rewrite=rewrite))
            else:
                why = f"needs a code change tcx fix cannot make mechanically ({rewrite}), so it was not run"
                remedy = by_change.setdefault(
                    advice, Remedy("code", advice, [], runnable=False, why_not_run=why)
                )
            remedy.findings.append(finding)
            return


def _shape_recompiles(report: RecompileReport) -> list[Finding]:
    """One finding per (function, argument, dimension) whose size guard failed: a recompile of a
    compiled function (not of a resume function torch made) on a named argument's dimension."""
    seen: dict[tuple[str, str, int], list[Any]] = {}
    for call in report.calls:
        if call.outcome != "recompile" or not call.failed_guards:
            continue
        guard = call.failed_guards[0]
        if guard.kind != "shape" or guard.arg is None or guard.dim is None:
            continue
        if call.function.startswith("torch_dynamo_resume_in_"):
            continue
        seen.setdefault((call.function, guard.arg, guard.dim), []).append(call)
    return [
        Finding(
            "recompile", "shape specialization", calls[0].file, calls[0].line, function, len(calls), arg, dim
        )
        for (function, arg, dim), calls in seen.items()
    ]


def break_matches(finding: Finding, sites: set[tuple[str, str | None, int | None]]) -> bool:
    """The same break in another run, whose sites are (type, file, line): its type at its line."""
    return (finding.what, finding.file, finding.line) in sites


def recompile_matches(finding: Finding, report: RecompileReport) -> bool:
    """The same shape recompile in another run: that function, argument and dimension."""
    return any(
        f.function == finding.function and f.arg == finding.arg and f.dim == finding.dim
        for f in _shape_recompiles(report)
    )
