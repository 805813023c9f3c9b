"""The budgets `tcx check` enforces: option name -> Budget (the count it limits, its label, its type,
the run it is judged on).

Kept apart from core/views/check.py (which imports the explain model) so the CLI can declare one
`--max-*` option per row without importing anything at `tcx --help` time.
"""

from __future__ import annotations

from dataclasses import dataclass

# The run's counts, as DESIGN.md's JSON contract defines them: what `diff` and baselines compare
# and what a child process adds to the parent's budgets.
COUNT_KEYS = (
    "graph_count",
    "graph_break_count",
    "unique_graph_break_count",
    "compile_count",
    "recompile_count",
    "failed_frame_count",
)


@dataclass(frozen=True)
class Budget:
    """One budget `tcx check` enforces, one value from its option to its SARIF rule: `key` is the
    option's name in Python (`max_graph_breaks`, the click destination and `run.check()`'s keyword),
    `count` the count it limits, `judged_on` the run that shows that count."""

    key: str
    count: str
    label: str
    type: type[int] | type[float] = int
    floor: bool = False  # a minimum: the check fails when the run is under it (--min-speedup)
    # "run": the run itself; "warm": a warm start (for a program, `tcx check` runs it cold then warm with
    # the compile caches on, as `tcx cache` does; a recording or log is judged itself); "cost": a run as
    # `tcx cost` measures it; "numerics": runs as `tcx numerics --no-localize` compares them (a recording
    # must hold the measurement or the report)
    judged_on: str = "run"

    @property
    def option(self) -> str:
        return "--" + self.key.replace("_", "-")

    @property
    def rule_id(self) -> str:
        """Its SARIF rule: `tcx/budget/graph-breaks` for --max-graph-breaks, `tcx/budget/min-speedup`."""
        return "tcx/budget/" + self.option.removeprefix("--max-").removeprefix("--")


BUDGETS: dict[str, Budget] = {
    b.key: b
    for b in (
        Budget("max_graph_breaks", "graph_break_count", "graph breaks"),
        Budget("max_unique_graph_breaks", "unique_graph_break_count", "distinct graph breaks"),
        Budget("max_recompiles", "recompile_count", "recompiles"),
        Budget("max_graphs", "graph_count", "graphs"),
        Budget("max_failed_frames", "failed_frame_count", "failed frames"),
        Budget("max_rank_divergence", "rank_divergence_count", "compile ids where ranks diverge"),
        Budget(
            "max_compile_seconds",
            "compile_seconds",
            "seconds of compile time (warm run)",
            float,
            judged_on="warm",
        ),
        Budget(
            "max_cache_misses",
            "cache_miss_count",
            "cache lookups that missed or were bypassed (warm run)",
            judged_on="warm",
        ),
        Budget("max_export_issues", "export_issue_count", "torch.export issues (failures, draft reports)"),
        Budget(
            "max_call_ms", "call_ms", "ms per step (median, measured by tcx cost)", float, judged_on="cost"
        ),
        Budget(
            "min_speedup",
            "speedup",
            "speedup over eager (measured by tcx cost)",
            float,
            floor=True,
            judged_on="cost",
        ),
        Budget(
            "max_numerics_divergences",
            "numerics_divergent_count",
            "values where compiled diverges from eager beyond rounding (judged by tcx numerics)",
            judged_on="numerics",
        ),
        Budget(
            "max_numerics_error",
            "numerics_max_abs",
            "largest |compiled - eager| of any value (tcx numerics)",
            float,
            judged_on="numerics",
        ),
    )
}
