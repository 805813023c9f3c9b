"""The program's step, the unit `tcx cost` measures: for a training loop one iteration — the compiled
forward call, the backward its graphs produced (run in loss.backward()), the optimizer step, and
what runs eagerly between — found from the calls, or named by the user (`--step FUNC`).

Pure and torch-free. Without `--step`, a step is the period from one call of the anchor (the
outermost compiled callable the program calls most) to its next call; a period whose two calls run
in different grad modes (the last train step before an evaluation) is a transition, not a step of
either. With `--step FUNC`, a step is one call of FUNC. Steps are grouped by grad mode (training
with grad, evaluation under no_grad or inference_mode), each group timed and compared apart. A
step during which anything compiled (its forward, a lazy backward, a recompile) is warm-up.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from tcx.core.cost.stats import CONFIDENCE, MIN_STEPS, Estimate, median_estimate, ratio_estimate
from tcx.core.cost.timings import CallTime, RunTimes, SpanTime

UNIT_PERIOD = "period"  # a call's start to the next call's start
UNIT_STEP = "step function"  # a call of the function --step names
UNIT_CALL = "call"  # a recording made before tcx timed what runs between calls: the call alone
MODE_TEXT = {
    "grad": "with grad",
    "no_grad": "under torch.no_grad()",
    "inference_mode": "under torch.inference_mode()",
}


@dataclass(frozen=True)
class Step:
    run: int
    index: int  # the anchor call's index in its run, or the step function's call number
    mode: str
    wall_ns: int
    call_ns: int  # the compiled calls in it
    backward_ns: int
    optimizer_ns: int
    warmup: bool
    profiled: bool
    why: tuple[str, ...] = ()  # what compiled during it
    eager: bool = False  # from a run with compilation off

    @property
    def rest_ns(self) -> int:
        """What ran eagerly between: data, zero_grad, the loop's Python (what no timer covers)."""
        return max(0, self.wall_ns - self.call_ns - self.backward_ns - self.optimizer_ns)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "index": self.index,
            "mode": self.mode,
            "ms": self.wall_ns / 1e6,
            "call_ms": self.call_ns / 1e6,
            "backward_ms": self.backward_ns / 1e6,
            "optimizer_ms": self.optimizer_ns / 1e6,
            "warmup": self.warmup,
            "profiled": self.profiled,
            "compiled": list(self.why),
        }


PHASES = ("call", "backward", "optimizer", "rest")
PHASE_TEXT = {
    "call": "compiled call",
    "backward": "backward",
    "optimizer": "optimizer",
    "rest": "eager between",
}


@dataclass
class StepGroup:
    """The steps of one grad mode: timed, compared with the same steps run eagerly."""

    function: str  # the anchor's name, or the step function's
    mode: str
    unit: str
    steps: list[Step]  # from the compiled runs (the recorded one and the repeats)
    eager_steps: list[Step] = field(default_factory=list)
    eager_runs: int = 0  # runs with compilation off that were compared
    time: Estimate | None = None
    eager: Estimate | None = None
    speedup: Estimate | None = None
    phases: dict[str, float] = field(default_factory=dict)  # median ms per step of each phase
    time_note: str | None = None  # why the step time is not shown
    speedup_note: str | None = None  # why the speedup is not shown
    speedup_caveat: str | None = None  # what the interval cannot include (one run each way)

    @property
    def label(self) -> str:
        what = "training steps" if self.backward_ran else "steps"
        if self.mode != "grad":
            what = "evaluation steps" if self.mode in ("no_grad", "inference_mode") else what
        return f"{what} {MODE_TEXT.get(self.mode, self.mode)}"

    @property
    def key(self) -> str:
        return f"{self.function}:{self.mode}"

    @property
    def backward_ran(self) -> bool:
        return any(s.backward_ns for s in self.steps)

    @property
    def steady(self) -> list[Step]:
        return [s for s in self.steps if not s.warmup]

    @property
    def timed(self) -> list[Step]:
        """The steady steps timed without the profiler: the ones the figures come from."""
        return [s for s in self.steady if not s.profiled]

    @property
    def warmup(self) -> list[Step]:
        return [s for s in self.steps if s.warmup]

    @property
    def runs(self) -> int:
        return len({s.run for s in self.steps})

    @property
    def time_shown(self) -> bool:
        return self.time is not None and self.time_note is None

    @property
    def speedup_shown(self) -> bool:
        return self.speedup is not None and self.speedup_note is None

    @property
    def enough_to_compare(self) -> bool:
        """Enough steady steps on both sides for a speedup (its interval may still cover 1.0)."""
        return min(len(self.timed), len(self.eager_steps)) >= MIN_STEPS and self.speedup is not None

    @property
    def weight_ms(self) -> float:
        return sum(s.wall_ns for s in self.steady) / 1e6

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "function": self.function,
            "mode": self.mode,
            "label": self.label,
            "unit": self.unit,
            "steps": len(self.steps),
            "steady_steps": len(self.steady),
            "timed_steps": len(self.timed),
            "warmup_steps": len(self.warmup),
            "runs": self.runs,
            "step_ms": self.time.value if self.time_shown and self.time else None,
            "step_ms_interval": self.time.to_json() if self.time else None,
            "step_ms_note": self.time_note,
            "phases_ms": self.phases,
            "eager_step_ms": self.eager.value if self.eager and self.eager.count >= MIN_STEPS else None,
            "eager_step_ms_interval": self.eager.to_json() if self.eager else None,
            "eager_runs": self.eager_runs,
            "speedup": self.speedup.value if self.speedup_shown and self.speedup else None,
            "speedup_interval": self.speedup.to_json() if self.speedup else None,
            "speedup_note": self.speedup_note,
            "speedup_caveat": self.speedup_caveat,
            "step_times": [s.to_json() for s in self.steps],
            "eager_step_times": [s.to_json() for s in self.eager_steps],
        }


def anchor_of(calls: list[CallTime], named: str | None) -> str | None:
    """The compiled callable whose calls delimit the steps: the one `--step` named, else the one the
    program calls most (ties: the one called first)."""
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for c in calls:
        counts[c.function] = counts.get(c.function, 0) + 1
        first.setdefault(c.function, c.index)
    if named and named in counts:
        return named
    return min(counts, key=lambda f: (-counts[f], first[f]), default=None)


def steps_of(run: RunTimes, anchor: str | None, explicit: bool) -> tuple[list[Step], str]:
    """The steps of one run and their unit."""
    if explicit:
        marks = sorted((s for s in run.spans if s.kind == "step"), key=lambda s: s.start_ns)
        steps = [_step(run, s.start_ns, s.end_ns, s.index or 0, s.mode or "grad", s) for s in marks]
        return steps, UNIT_STEP
    calls = sorted((c for c in run.calls if c.function == anchor), key=lambda c: c.index)
    if any(c.start_ns is None for c in calls):
        return [_call_step(run, c) for c in calls], UNIT_CALL
    steps = []
    for a, b in pairwise(calls):
        assert a.start_ns is not None and b.start_ns is not None
        if a.mode != b.mode or b.start_ns <= a.start_ns:
            continue  # a transition (train -> eval): a step of neither
        # the profiler's work before b (tcx's, not the program's) is left out of the step
        steps.append(_step(run, a.start_ns, b.start_ns, a.index, a.mode or "grad", None, b.profiler_ns))
    return steps, UNIT_PERIOD


def _call_step(run: RunTimes, c: CallTime) -> Step:
    return Step(
        run.run,
        c.index,
        c.mode or "grad",
        c.wall_ns,
        c.wall_ns,
        0,
        0,
        c.warmup or c.raised,
        c.profiled,
        c.compiled,
        run.eager,
    )


def _step(
    run: RunTimes, start: int, end: int, index: int, mode: str, mark: SpanTime | None, overhead: int = 0
) -> Step:
    calls = _within(run.calls, start, end)
    spans = [s for s in _within(run.spans, start, end) if s.kind != "step"]
    compiles = [c for c in run.compiles if start <= c.start_ns < end]
    why = tuple(w for c in calls for w in c.compiled) + tuple(c.what for c in compiles)
    warmup = bool(why) or any(c.warmup or c.raised for c in calls) or any(s.raised for s in spans)
    profiled = any(c.profiled for c in calls)
    if mark is not None:
        warmup = warmup or mark.warmup or mark.raised
        profiled = profiled or mark.profiled
    return Step(
        run=run.run,
        index=index,
        mode=mode,
        wall_ns=max(0, end - start - overhead),
        call_ns=sum(c.wall_ns for c in calls),
        backward_ns=sum(s.wall_ns for s in spans if s.kind == "backward"),
        optimizer_ns=sum(s.wall_ns for s in spans if s.kind == "optimizer"),
        warmup=warmup,
        profiled=profiled,
        why=why,
        eager=run.eager,
    )


def _within(items: list[Any], start: int, end: int) -> list[Any]:
    """The items (sorted by start, with a start_ns) that start in [start, end)."""
    starts = [i.start_ns for i in items]
    return items[bisect.bisect_left(starts, start) : bisect.bisect_left(starts, end)]


def groups_of(runs: list[RunTimes], named: str | None, explicit: bool) -> list[StepGroup]:
    """The step groups of a measurement (one per grad mode), each timed and compared; the group
    with the most steady time first."""
    for run in runs:
        run.calls.sort(key=lambda c: (c.start_ns or 0, c.index))
        run.spans.sort(key=lambda s: s.start_ns)
    recorded = next((r for r in runs if r.run == 0), None)
    if recorded is None:
        return []
    anchor = anchor_of(recorded.calls, named)
    if anchor is None and not explicit:
        return []
    by_mode: dict[str, StepGroup] = {}
    eager: list[Step] = []
    eager_runs: set[int] = set()
    for run in runs:
        steps, unit = steps_of(run, anchor, explicit)
        if run.eager:
            eager += steps
            eager_runs.add(run.run)
            continue
        for s in steps:
            group = by_mode.get(s.mode)
            if group is None:
                name = named if explicit and named else anchor or "step"
                group = by_mode[s.mode] = StepGroup(name, s.mode, unit, [])
            group.steps.append(s)
    groups = sorted(by_mode.values(), key=lambda g: -g.weight_ms)
    for g in groups:
        steady = {s.index for s in g.steady}
        g.eager_steps = [s for s in eager if s.mode == g.mode and s.index in steady]
        g.eager_runs = len({s.run for s in g.eager_steps})
        _estimate(g, has_eager=bool(eager_runs))
    return groups


def _by_run(steps: list[Step]) -> list[list[float]]:
    """The steps' ms, one list per run of the program."""
    runs: dict[int, list[float]] = {}
    for s in steps:
        runs.setdefault(s.run, []).append(s.wall_ns / 1e6)
    return list(runs.values())


def _estimate(g: StepGroup, has_eager: bool) -> None:
    timed = g.timed
    g.time = median_estimate(_by_run(timed))
    if timed:
        g.phases = {
            "call": statistics.median(s.call_ns for s in timed) / 1e6,
            "backward": statistics.median(s.backward_ns for s in timed) / 1e6,
            "optimizer": statistics.median(s.optimizer_ns for s in timed) / 1e6,
            "rest": statistics.median(s.rest_ns for s in timed) / 1e6,
        }
    if len(timed) < MIN_STEPS:
        g.time_note = (
            f"{len(timed)} steady step(s) timed without the profiler ({len(g.warmup)} warm-up, "
            f"{len(g.steady) - len(timed)} profiled): a step time needs {MIN_STEPS}. Run more steps, or let "
            "tcx repeat the run (--budget SECONDS)"
        )
    g.eager = median_estimate(_by_run(g.eager_steps))
    if not has_eager:
        g.speedup_note = "no run with compilation off to compare with (--no-eager, or it did not run)"
        return
    g.speedup = ratio_estimate(_by_run(g.eager_steps), _by_run(timed))
    n_eager = len(g.eager_steps)
    if len(timed) < MIN_STEPS or n_eager < MIN_STEPS:
        g.speedup_note = (
            f"too few steps to compare: {len(timed)} compiled and {n_eager} eager steady step(s); a speedup "
            f"needs {MIN_STEPS} of each"
        )
    elif g.speedup is not None and g.speedup.covers(1.0):
        g.speedup_note = (
            f"no measurable difference: the {CONFIDENCE:.0%} interval {g.speedup.low:.2f}×–"
            f"{g.speedup.high:.2f}× covers 1.0× ({len(timed)} compiled, {n_eager} eager steps)"
        )
    if g.speedup is not None and g.eager_runs < 2 and g.runs < 2:
        g.speedup_caveat = (
            "one run each way: a change in the machine's load between the two runs is not in the "
            "interval (--budget repeats the runs and pools them)"
        )
