"""The budgets `tcx check` enforces: option name -> (the count it limits, a label).

Kept apart from core/views/check.py (which imports the explain model) so the CLI can declare one
`--max-*` option per row without importing anything at `tcx --help` time.
"""

from __future__ import annotations

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

BUDGETS: dict[str, tuple[str, str]] = {
    "max_graph_breaks": ("graph_break_count", "graph breaks"),
    "max_unique_graph_breaks": ("unique_graph_break_count", "distinct graph breaks"),
    "max_recompiles": ("recompile_count", "recompiles"),
    "max_graphs": ("graph_count", "graphs"),
    "max_failed_frames": ("failed_frame_count", "failed frames"),
    "max_rank_divergence": ("rank_divergence_count", "compile ids where ranks diverge"),
    "max_compile_seconds": ("compile_seconds", "seconds of compile time (warm run)"),
    "max_cache_misses": ("cache_miss_count", "cache lookups that missed or were bypassed (warm run)"),
    "max_export_issues": ("export_issue_count", "torch.export issues (failures, draft reports)"),
    "max_call_ms": ("call_ms", "ms per step (median, measured by tcx cost)"),
    "min_speedup": ("speedup", "speedup over eager (measured by tcx cost)"),
    "max_numerics_divergences": (
        "numerics_divergent_count",
        "values where compiled diverges from eager beyond rounding (judged by tcx numerics)",
    ),
    "max_numerics_error": ("numerics_max_abs", "largest |compiled - eager| of any value (tcx numerics)"),
}
# Budgets on a warm start: for a program, `tcx check` runs it cold then warm with the compile
# caches on (as `tcx cache` does) and judges the warm run; a recording or log is judged itself.
WARM_RUN_BUDGETS = ("max_compile_seconds", "max_cache_misses")
# Budgets `tcx cost` measures: a program runs as `tcx cost` runs it; a recording must hold the measurement.
COST_BUDGETS = ("max_call_ms", "min_speedup")
# Budgets `tcx numerics` judges: a program runs as `tcx numerics --no-localize` runs it (eager with its
# float64 twins, then compiled); a recording must hold its report.
NUMERICS_BUDGETS = ("max_numerics_divergences", "max_numerics_error")
# Budgets that are a floor: the check fails when the run is under the limit.
FLOOR_BUDGETS = ("min_speedup",)
# Budgets whose option is not an int.
BUDGET_TYPES: dict[str, type] = {
    "max_compile_seconds": float,
    "max_call_ms": float,
    "min_speedup": float,
    "max_numerics_error": float,
}
