"""When `tcx cost` runs the program again: the headline figures need more steady steps than the runs
so far gave, or their interval is too wide to say anything, and `--budget` leaves time for another
pair of runs (one with compilation off, one compiled, timed only). Pure and torch-free.
"""

from __future__ import annotations

from tcx.core.cost.stats import MIN_STEPS
from tcx.core.cost.steps import groups_of
from tcx.core.cost.timings import RunTimes

DEFAULT_BUDGET_S = 120.0  # seconds tcx cost may spend running the program, all runs together
WIDE = 0.10  # a speedup interval wider than ±10% of its value is worth narrowing (a narrower one that
# covers 1.0 is an answer: no measurable difference)


def more_needed(runs: list[RunTimes], named: str | None, explicit: bool, compare: bool) -> str | None:
    """Why another pair of runs would help the headline figures (None: they are good enough)."""
    groups = groups_of(runs, named, explicit)
    if not groups:
        return None
    g = groups[0]
    if len(g.timed) < MIN_STEPS:
        return f"{len(g.timed)} steady steps timed, {MIN_STEPS} needed"
    if not compare:
        return None
    if len(g.eager_steps) < MIN_STEPS:
        return f"{len(g.eager_steps)} eager steps timed, {MIN_STEPS} needed"
    s = g.speedup
    if s is None:
        return None
    if (s.high - s.low) / 2 > WIDE * s.value:
        return f"the speedup's interval {s.low:.2f}–{s.high:.2f}× is wide"
    if g.speedup_caveat and not s.covers(1.0):
        return "one run each way: a second pair puts the drift between runs into the interval"
    return None


def fits(elapsed_s: float, next_pair_s: float, budget_s: float) -> bool:
    """Does one more pair of runs, expected to take `next_pair_s`, fit in the budget?"""
    return elapsed_s + next_pair_s <= budget_s
