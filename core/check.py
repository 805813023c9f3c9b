"""`tcx check`: compare the explain counts with budgets; exit 1 naming every budget exceeded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tcx.core.errors import EXIT_BUDGET, EXIT_OK, UsageError
from tcx.core.explain import Explanation, to_json

BUDGETS = {
    "max_graph_breaks": ("graph_break_count", "graph breaks"),
    "max_unique_graph_breaks": ("unique_graph_break_count", "distinct graph breaks"),
    "max_recompiles": ("recompile_count", "recompiles"),
    "max_graphs": ("graph_count", "graphs"),
    "max_failed_frames": ("failed_frame_count", "failed frames"),
    "max_rank_divergence": ("rank_divergence_count", "compile ids where ranks diverge"),
}


@dataclass
class Verdict:
    option: str  # e.g. "--max-graph-breaks"
    label: str
    limit: int
    actual: int

    @property
    def exceeded(self) -> bool:
        return self.actual > self.limit


@dataclass
class CheckResult:
    explanation: Explanation
    summary: dict[str, Any]
    verdicts: list[Verdict]
    baseline: str | None = None  # the baseline file compared against, if any
    worse_than_baseline: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.exceeded]

    @property
    def passed(self) -> bool:
        return not self.failed and not self.worse_than_baseline

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.passed else EXIT_BUDGET


def budgets_from(params: dict[str, Any], baseline: bool = False) -> dict[str, int]:
    budgets = {k: params[k] for k in BUDGETS if params.get(k) is not None}
    if not budgets and not baseline:
        raise UsageError(
            "tcx check needs at least one budget (e.g. --max-graph-breaks 0 or --max-recompiles 2) "
            "or a baseline (--baseline FILE, written by --write-baseline FILE)."
        )
    for key, value in budgets.items():
        if value < 0:
            raise UsageError(f"--{key.replace('_', '-')} must be 0 or more (got {value}).")
    return budgets


def evaluate(ex: Explanation, budgets: dict[str, int]) -> CheckResult:
    summary = to_json(ex)
    verdicts = [
        Verdict(
            option="--" + key.replace("_", "-"),
            label=BUDGETS[key][1],
            limit=limit,
            actual=int(summary.get(BUDGETS[key][0], 0)),
        )
        for key, limit in budgets.items()
    ]
    return CheckResult(explanation=ex, summary=summary, verdicts=verdicts)


BASELINE_SCHEMA = "tcx.baseline/1"


def write_baseline(path: str, ex: Explanation) -> None:
    """Record this run's facts as the baseline later runs must not be worse than."""
    import json
    from pathlib import Path

    from tcx.core.run_facts import run_facts

    facts = run_facts(ex.model, ex)
    facts["schema"] = BASELINE_SCHEMA
    Path(path).write_text(json.dumps(facts, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def compare_baseline(path: str, ex: Explanation) -> list[str]:
    """What got worse than the baseline: higher counts, and breaks the baseline did not have."""
    import json
    from pathlib import Path

    from tcx.core.diff import diff
    from tcx.core.errors import InputError
    from tcx.core.run_facts import run_facts

    try:
        base = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"no such baseline: {path!r} (write one with --write-baseline {path}).") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read baseline {path!r}: {exc}.") from None
    if not isinstance(base, dict) or base.get("schema") != BASELINE_SCHEMA:
        raise InputError(f"{path!r} is not a tcx baseline (written by tcx check --write-baseline).")
    return diff(base, run_facts(ex.model, ex)).regressions
