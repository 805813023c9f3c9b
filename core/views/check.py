"""`tcx check`: compare the explain counts with budgets; exit 1 naming every budget exceeded.

Compiles in the program's child processes count against the budgets too; a child process
that compiled where tcx could not record it makes the check fail with exit 4 (not observed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tcx.core.analysis.empty_run import compiled_nothing, empty_run_text
from tcx.core.analysis.log_consistency import disagreements
from tcx.core.budgets import BUDGETS, Budget
from tcx.core.errors import EXIT_BUDGET, EXIT_INPUT, EXIT_OK, EXIT_TARGET, UsageError
from tcx.core.model import Compile
from tcx.core.model.conditions import run_conditions
from tcx.core.model.failure import Failure, failure
from tcx.core.model.status import CHILD_COUNTS
from tcx.core.views.explain import Explanation


@dataclass(frozen=True)
class Cause:
    """One thing behind a count: a break site, a recompile, a frame's graphs, a failed frame."""

    text: str
    file: str | None = None
    line: int | None = None


@dataclass
class Verdict:
    budget: Budget  # its option, label, SARIF rule id; a floor (--min-speedup) fails the run under it
    limit: float
    actual: float  # the program's and its child processes' together
    in_children: int = 0  # how many of `actual` happened in child processes
    causes: list[Cause] = field(default_factory=list)  # what makes up the count, for a failure

    @property
    def option(self) -> str:
        return self.budget.option  # e.g. "--max-graph-breaks"

    @property
    def label(self) -> str:
        return self.budget.label

    @property
    def floor(self) -> bool:
        return self.budget.floor

    @property
    def exceeded(self) -> bool:
        return self.actual < self.limit if self.floor else self.actual > self.limit

    @property
    def relation(self) -> str:
        """How a failing count compares with its budget: ">" (a maximum) or "<" (a floor)."""
        return "<" if self.floor else ">"


@dataclass
class CheckResult:
    explanation: Explanation
    warm: dict[str, float]  # the warm run's counts the warm-start budgets were judged on, if any
    verdicts: list[Verdict]
    baseline: str | None = None  # the baseline file compared against, if any
    worse_than_baseline: list[str] = field(default_factory=list)
    # Child processes that compiled where tcx could not record (core/run/observed.py): the gate
    # cannot vouch for them, so the check does not pass.
    not_observed: list[dict[str, Any]] = field(default_factory=list)
    # Lines of the recording or log that could not be read (corrupted, malformed, truncated):
    # whatever they held (a graph break, a recompile) is unknown, so the check does not pass.
    unreadable: list[str] = field(default_factory=list)
    # Settings the run used instead of the program's own (core/model/conditions.py) that the check
    # was not told to accept: its counts may not be the program's, so the check does not pass.
    not_as_program: list[str] = field(default_factory=list)
    failure: Failure | None = None  # the program did not finish: the counts cover only part of it
    # Facts torch logged twice that disagree (core/analysis/log_consistency.py: records taken out of the log,
    # or a log cut in the middle of a compile): what is missing is unknown, so the check does not pass.
    inconsistent: list[str] = field(default_factory=list)
    # The run compiled nothing (core/analysis/empty_run.py): its counts of 0 are "not seen", not "clean",
    # so the check fails (exit 1) unless --allow-empty said an empty run is fine (`empty_allowed`).
    empty: str | None = None
    empty_allowed: bool = False

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.exceeded]

    @property
    def passed(self) -> bool:
        return not (
            self.failed
            or self.worse_than_baseline
            or self.not_observed
            or self.unreadable
            or self.not_as_program
            or self.inconsistent
            or (self.empty and not self.empty_allowed)
        )

    @property
    def exit_code(self) -> int:
        """3 when the program did not finish; 1 when a budget is exceeded or nothing compiled (without
        --allow-empty); else 4 when part of the run was not observed or not readable, or the run did not
        compile as the program does."""
        if self.failure:
            return EXIT_TARGET
        if self.failed or self.worse_than_baseline or (self.empty and not self.empty_allowed):
            return EXIT_BUDGET
        incomplete = self.not_observed or self.unreadable or self.inconsistent
        return EXIT_INPUT if incomplete or self.not_as_program else EXIT_OK


def budgets_from(asked: Mapping[str, float | None], baseline: bool = False) -> dict[str, float]:
    """The budgets asked for, by key (a Budget's, as in BUDGETS: `max_graph_breaks`), from the value
    each was given (None: not asked); the command layer passes these values alone, not its options."""
    budgets = {k: v for k in BUDGETS if (v := asked.get(k)) is not None}
    if not budgets and not baseline:
        raise UsageError(
            "tcx check needs at least one budget (e.g. --max-graph-breaks 0 or --max-recompiles 2) "
            "or a baseline (--baseline FILE, written by --write-baseline FILE)."
        )
    for key, value in budgets.items():
        if value < 0:
            raise UsageError(f"{BUDGETS[key].option} must be 0 or more (got {value}).")
    return budgets


def evaluate(
    ex: Explanation,
    budgets: dict[str, float],
    warm: dict[str, float] | None = None,
    accepted: dict[str, str] | None = None,
    allow_empty: bool = False,
) -> CheckResult:
    """Each budget against the program's count plus its child processes' (core/run/observed.py).

    `warm`: the warm run's `compile_seconds` and `cache_miss_count` (core/views/cache.py), which
    the warm-start budgets (judged_on "warm" in core/budgets.py) are judged on. `accepted`: the settings
    the user chose for this check (`--backend eager`): a run that used them instead of the
    program's own is judged; any other override fails the check (exit 4). A run that compiled nothing
    fails (exit 1) unless `allow_empty`."""
    children = ex.model.status.children
    function = None if ex.selection.whole_run else ex.selection.function
    known = {(str(s.gb_type), str(s.file), str(s.line)) for s in ex.sites}
    verdicts = []
    for key, limit in budgets.items():
        budget = BUDGETS[key]
        count = budget.count
        if warm is not None and count in warm:
            in_children = 0  # counted by core/views/cache.py on the warm run
        elif count == "unique_graph_break_count":
            in_children = children.new_sites(known, function)
        elif count in CHILD_COUNTS:
            in_children = children.total(count, function)
        else:
            in_children = 0
        verdicts.append(
            Verdict(
                budget=budget,
                limit=limit,
                actual=warm[count] if warm and count in warm else run_count(ex, count) + in_children,
                in_children=in_children,
                causes=causes(ex, count),
            )
        )
    conditions = run_conditions(ex.model)
    return CheckResult(
        explanation=ex,
        warm=dict(warm or {}),
        verdicts=verdicts,
        not_observed=children.not_observed,
        unreadable=list(ex.model.problems),
        inconsistent=disagreements(ex.model),
        not_as_program=[o.text for o in conditions.overrides if (accepted or {}).get(o.key) != o.used],
        failure=failure(ex.model),
        empty=empty_run(ex),
        empty_allowed=allow_empty,
    )


def empty_run(ex: Explanation) -> str | None:
    """What check says of a run that compiled nothing (no torch.compile'd frame, no torch.export call):
    the torch.compile calls whose result never ran. None when something compiled."""
    m = ex.model
    if m.exports or m.aoti_compiles or not compiled_nothing(m, ex.selection):
        return None
    return empty_run_text(m)


def causes(ex: Explanation, count: str) -> list[Cause]:
    """What makes up `count` in this run, each at its user line where torch says."""
    if count in ("graph_break_count", "unique_graph_break_count"):
        return [Cause(f"{s.gb_type}  ×{len(s.occurrences)}", s.file, s.line) for s in ex.sites]
    if count == "recompile_count":
        out = []
        for r in ex.recompiles:
            comp = ex.model.compiles.get(r.compile_id or "")
            first = next((ln.strip() for ln in r.reason.splitlines() if ln.strip()), "no reason logged")
            name = comp.display_name if comp and comp.co_name else "?"
            out.append(
                Cause(
                    f"{r.compile_id or '?'} recompiled {name}: {first}",
                    comp.co_filename if comp else None,
                    comp.co_firstlineno if comp else None,
                )
            )
        return out
    if count == "graph_count":
        by_frame: dict[str, list[Compile]] = {}
        for comp in ex.compiles.values():
            if comp.graph_count:
                by_frame.setdefault(comp.display_name, []).append(comp)
        return [
            Cause(
                f"{name}: {sum(c.graph_count for c in comps)} graph(s) in compile(s) "
                + ", ".join(c.compile_id for c in comps),
                comps[0].co_filename,
                comps[0].co_firstlineno,
            )
            for name, comps in by_frame.items()
        ]
    if count == "failed_frame_count":
        return [Cause(f"{f.compile_id} {f.function}: {f.kind}", f.file, f.line) for f in ex.failed_frames]
    if count == "export_issue_count":
        from tcx.core.views.export import build_export

        return [
            Cause(f"{run.label}: {issue.kind}", issue.file, issue.line)
            for run in build_export(ex.model, ex.selection).exports
            for issue in run.issues
        ]
    if count in NUMERICS_COUNTS:  # the first divergence at the user's line, then the other values off
        return numerics_causes(ex)
    if count in ("call_ms", "speedup"):  # what the call's time goes to, most costly first (tcx cost)
        from tcx.core.views.cost import build_cost

        return [
            Cause(f"{f.title}: {f.ms_per_step:.3g} ms per step", f.file, f.line)
            for f in build_cost(ex.model, ex.selection).per_step
        ]
    return []


def run_count(ex: Explanation, count: str) -> float:
    """One of the run's counts: explain's, or the issues of its torch.export calls (core/views/export.py)."""
    if count == "export_issue_count":
        from tcx.core.views.export import build_export

        return build_export(ex.model, ex.selection).export_issue_count
    if count in ("call_ms", "speedup"):
        return cost_count(ex, count)
    if count in NUMERICS_COUNTS:
        return numerics_count(ex, count)
    return int(getattr(ex, count))


NUMERICS_COUNTS = ("numerics_divergent_count", "numerics_max_abs")


def numerics_count(ex: Explanation, count: str) -> float:
    """Divergent values, or the largest |compiled - eager|, of the run's numerics report. A run without
    one, or a program whose eager runs disagree (tcx numerics cannot judge the compiler), is an error,
    never a pass, unless the program failed (then exit 3 says so, and the value is 0)."""
    from tcx.core.errors import InputError
    from tcx.core.views.numerics import build_numerics

    view = build_numerics(ex.model, ex.selection)
    if failure(ex.model) is not None:
        return view.divergent_count if count == "numerics_divergent_count" else view.max_abs or 0.0
    report = view.report
    hint = (
        "Check the program itself (tcx check runs it as `tcx numerics --no-localize` does), or a recording "
    )
    hint += "saved by `tcx numerics PROGRAM --save FILE`."
    if report is None:
        raise InputError(
            f"{ex.model.target}: {view.unavailable}, so the numerics budgets cannot be judged.", hint=hint
        )
    if report.verdict == "nondeterministic":
        raise InputError(
            f"{ex.model.target}: its values differ, and so do two eager runs of it (seeded alike): the "
            "program is not deterministic, so tcx numerics cannot judge the compiler.",
            hint="Make the program repeatable under one seed (no torch.seed(), time or OS randomness).",
        )
    if report.verdict == "not_compared":
        raise InputError(
            f"{ex.model.target}: no compiled call was compared, so the numerics budgets cannot be judged."
        )
    if count == "numerics_divergent_count":
        return view.divergent_count
    return round(view.max_abs or 0.0, 9)


def numerics_causes(ex: Explanation) -> list[Cause]:
    from tcx.core.views.numerics import build_numerics

    report = build_numerics(ex.model, ex.selection).report
    if report is None:
        return []
    out = []
    first = report.first_divergence
    if first is not None:
        where = f" ({first.stage})" if first.stage else ""
        text = f"first divergence: {first.function or first.kind} #{first.index} {first.value or ''}{where}"
        out.append(Cause(text, first.file, first.line))
    for check in report.divergent[:20]:
        worst = check.worst
        detail = f": {worst.note}" if worst and worst.note else ""
        out.append(Cause(f"{check.name} {worst.label if worst else ''}{detail}"))
    return out


def cost_count(ex: Explanation, count: str) -> float:
    """The measured call time or speedup (core/views/cost.py). A run that cannot show it is an error, never
    a pass, unless the program failed (then exit 3 says so, and the value is 0)."""
    from tcx.core.errors import InputError
    from tcx.core.views.cost import build_cost

    cost = build_cost(ex.model, ex.selection)
    value = cost.step_ms if count == "call_ms" else cost.speedup
    if value is not None:
        return round(value, 3)
    if failure(ex.model) is not None:
        return 0.0
    g = cost.primary.group if cost.primary else None
    if count == "call_ms":
        what = (g.time_note if g else None) or "no steady step was measured"
    else:
        what = (g.speedup_note if g else None) or "no eager run was compared with it"
    option = "--max-call-ms" if count == "call_ms" else "--min-speedup"
    raise InputError(
        f"{ex.model.target}: {cost.unavailable or what}, so {option} cannot be judged.",
        hint="Check the program itself (tcx check runs it as `tcx cost` does), or a recording saved by "
        "`tcx cost PROGRAM --save FILE`; a function called only once compiles on that call (nothing steady).",
    )


def write_baseline(path: str, ex: Explanation) -> None:
    """Record this run's facts as the baseline later runs must not be worse than."""
    import json

    from tcx.core import files
    from tcx.core.views.run_facts import BASELINE_SCHEMA, run_facts

    facts = run_facts(ex.model, ex.selection, ex=ex)
    facts.schema = BASELINE_SCHEMA
    files.write_text(
        path, json.dumps(facts.to_json(), indent=2, ensure_ascii=False) + "\n", option="--write-baseline"
    )


def compare_baseline(path: str, ex: Explanation) -> list[str]:
    """What got worse than the baseline: higher counts, and breaks the baseline did not have."""
    import errno
    from pathlib import Path

    from tcx.core.errors import InputError
    from tcx.core.ingest.event_schema import decode_json
    from tcx.core.views.diff import diff
    from tcx.core.views.run_facts import BASELINE_SCHEMA, RunFacts, run_facts

    try:
        doc = decode_json(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENAMETOOLONG, errno.ENOTDIR):
            raise UsageError(
                f"no such baseline: {path!r} ({exc.strerror}; write one with --write-baseline FILE)."
            ) from None
        raise InputError(f"cannot read baseline {path!r}: {exc.strerror or exc}.") from None
    except ValueError as exc:  # not JSON (nested 100,000 deep too), not UTF-8
        raise InputError(f"cannot read baseline {path!r}: {exc}.") from None
    if not isinstance(doc, dict) or doc.get("schema") != BASELINE_SCHEMA:
        raise InputError(f"{path!r} is not a tcx baseline (written by tcx check --write-baseline).")
    base = RunFacts.from_json(doc, f"baseline {path!r}")
    return diff(base, run_facts(ex.model, ex.selection, ex=ex)).regressions
