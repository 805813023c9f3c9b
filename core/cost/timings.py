"""The timings of one run of the program under `tcx cost`, typed: its compiled calls, what ran
between them (backward, optimizer steps, the program's step function) and the compiles that
started outside a call.

Pure and torch-free; read from the cost capture's events (core/recorder/compat_cost.py) by
core/cost/measurements.py. Run 0 is the recorded run; the other runs (with compilation off, and the
repeats within `--budget`) are numbered from 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_NS = 10**15  # a duration or offset past this (11 days) is not one: a recording is input from anywhere


def bounded(value: Any, low: int = 0) -> int | None:
    """`value` when it is an integer from `low` to MAX_NS (the schema admits 400-digit integers)."""
    return value if type(value) is int and low <= value <= MAX_NS else None


def _start(value: Any) -> int | None:
    """A start on the monotonic clock (perf_counter_ns: any non-negative integer the clock gives)."""
    return value if type(value) is int and 0 <= value < 2**63 else None


@dataclass(frozen=True)
class CallTime:
    index: int
    function: str
    file: str | None
    line: int | None
    wall_ns: int
    warmup: bool
    profiled: bool
    raised: bool
    compiled: tuple[str, ...] = ()  # what compiled during the call (e.g. "dynamo 0/1")
    wraps: str | None = None  # the callable the program compiled, when Dynamo evaluates a frame around it
    start_ns: int | None = None  # on the run's monotonic clock (None: a recording made before tcx kept it)
    mode: str | None = None  # grad, no_grad, inference_mode (None: not recorded)
    run: int = 0
    profiler_ns: int = 0  # tcx's profiler work just before the call (reading a profile, starting one)
    cpu_ns: int | None = None  # the process's CPU time during the call (None: not recorded)

    @property
    def compile_ids(self) -> list[str]:
        return [c.rsplit(" ", 1)[-1] for c in self.compiled]

    @property
    def measured(self) -> bool:
        return not (self.warmup or self.raised)


@dataclass(frozen=True)
class SpanTime:
    """A backward, an optimizer step, or a call of the program's step function (`--step`)."""

    kind: str  # backward, optimizer, step
    start_ns: int
    wall_ns: int
    name: str | None = None
    index: int | None = None  # step: the call's number (0, the first, ran untimed)
    mode: str | None = None
    warmup: bool = False
    profiled: bool = False
    raised: bool = False
    run: int = 0
    file: str | None = None  # the program's line that made it (the first few of each kind carry it)
    line: int | None = None

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.wall_ns


@dataclass(frozen=True)
class CompileMark:
    """A compile that started outside any compiled call (a lazy backward in loss.backward())."""

    start_ns: int
    what: str
    run: int = 0


@dataclass
class RunTimes:
    """Everything one run timed."""

    run: int
    stance: str  # compiled, force_eager
    status: str | None = None  # how the program ended (the other runs; run 0's is the model's)
    message: str | None = None
    seconds: float | None = None  # the run's wall time, as tcx timed it
    calls: list[CallTime] = field(default_factory=list)
    spans: list[SpanTime] = field(default_factory=list)
    compiles: list[CompileMark] = field(default_factory=list)

    @property
    def eager(self) -> bool:
        return self.stance == "force_eager"


def call_time(e: dict[str, Any], run: int = 0) -> CallTime | None:
    if bounded(e.get("index")) is None or bounded(e.get("wall_ns")) is None:
        return None
    return CallTime(
        index=e["index"],
        function=str(e.get("function") or "?"),
        file=e.get("file") if isinstance(e.get("file"), str) else None,
        line=e.get("line") if isinstance(e.get("line"), int) else None,
        wall_ns=e["wall_ns"],
        warmup=bool(e.get("warmup")),
        profiled=bool(e.get("profiled")),
        raised=bool(e.get("raised")),
        compiled=tuple(str(c) for c in e.get("compiled") or ()),
        wraps=e["wraps"] if isinstance(e.get("wraps"), str) else None,
        start_ns=_start(e.get("start_ns")),
        mode=e["mode"] if isinstance(e.get("mode"), str) else None,
        run=run,
        profiler_ns=bounded(e.get("profiler_ns")) or 0,
        cpu_ns=bounded(e.get("cpu_ns")),
    )


def span_time(e: dict[str, Any], run: int = 0) -> SpanTime | None:
    start, wall = _start(e.get("start_ns")), bounded(e.get("wall_ns"))
    if start is None or wall is None or not isinstance(e.get("span"), str):
        return None
    return SpanTime(
        kind=e["span"],
        start_ns=start,
        wall_ns=wall,
        name=e["name"] if isinstance(e.get("name"), str) else None,
        index=bounded(e.get("index")),
        mode=e["mode"] if isinstance(e.get("mode"), str) else None,
        warmup=bool(e.get("warmup")),
        profiled=bool(e.get("profiled")),
        raised=bool(e.get("raised")),
        run=run,
        file=e["file"] if isinstance(e.get("file"), str) else None,
        line=e["line"] if type(e.get("line")) is int else None,
    )


def compile_mark(e: dict[str, Any], run: int = 0) -> CompileMark | None:
    start = _start(e.get("start_ns"))
    return CompileMark(start, str(e.get("what") or "compile"), run) if start is not None else None


def run_number(e: dict[str, Any]) -> int | None:
    """The `run` of another run's event (1 and up), None when it has none that is valid."""
    run = bounded(e.get("run"), low=1)
    return run if run is not None and run < 10**6 else None
