"""`tcx check`: compare the explain counts with budgets; exit 1 naming every budget exceeded."""

from __future__ import annotations

from dataclasses import dataclass
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

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.exceeded]

    @property
    def exit_code(self) -> int:
        return EXIT_BUDGET if self.failed else EXIT_OK


def budgets_from(params: dict[str, Any]) -> dict[str, int]:
    budgets = {k: params[k] for k in BUDGETS if params.get(k) is not None}
    if not budgets:
        raise UsageError(
            "tcx check needs at least one budget, e.g. --max-graph-breaks 0 or --max-recompiles 2."
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
