"""What `tcx cost` measured, read in ONE place (`read_measurements`), and the types of its report.

Pure and torch-free. The measurements are the cost capture's events (core/recorder/compat_cost.py)
of the recorded run, and the timings of the program's other runs (with compilation off, and the
repeats within `--budget`) that tcx appended to the recording. `measured_break_ms` is here, not in
core/views/cost.py, because explain ranks breaks by it: it is built from the measurements alone and
must never call explain (core/views/cost.py does).
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tcx.core.cost.profile import PARTS, CallProfile, Context, attribute
from tcx.core.cost.steps import StepGroup
from tcx.core.cost.timings import (
    CallTime,
    RunTimes,
    bounded,
    call_time,
    compile_mark,
    run_number,
    span_time,
)
from tcx.core.selection import Selection, whole_run

if TYPE_CHECKING:
    from tcx.core.model import RunModel

# The cost document's schema and how its figures are attributed: the view (core/views/cost.py) and
# the Chrome trace it exports (trace.py) name them; they live here, below the view.
SCHEMA = "tcx.cost/1"
ATTRIBUTION = (
    "Each instant of a profiled step goes to one part: on the CPU to the innermost profiler range "
    "running then, on a GPU to the kernels the device ran (its idle time to what the CPU did). A step "
    "is the compiled call, the backward() and optimizer step that follow it and the eager code between, "
    "up to the next call. Time inside a compiled region but outside its graph (the code after a graph "
    "break, up to the resume function) is given to the break that ended the region (torch's "
    "`Torch-Compiled Region` ranges and tcx's range around each graph); a call that entered no region is "
    "given to its frame (skipped by Dynamo, or the recompile limit); in backward(), each compiled "
    "graph's backward (AOTAutograd's CompiledFunctionBackward) to its compile, the rest to autograd."
)
FINDING_SHARE = 0.05  # guards, kernels and extern calls under this share of the step are not findings
KERNEL_SHARE = 0.10


@dataclass
class Measurements:
    """Every cost event of a recording, typed (the only reader of the cost capture's events)."""

    config: dict[str, Any] | None
    runs: list[RunTimes]  # run 0 (recorded) first, then the others by number
    more: list[dict[str, Any]]  # per function: calls past the listed ones (count, total, min, max)
    profiles: list[dict[str, Any]]
    device: dict[str, Any] | None
    errors: list[str]
    step_found: dict[str, Any] | None = None  # `--step FUNC`: what the recorder found

    @property
    def recorded(self) -> RunTimes:
        return self.runs[0]

    @property
    def calls(self) -> list[CallTime]:
        return self.recorded.calls

    @property
    def other_runs(self) -> list[RunTimes]:
        return self.runs[1:]


def read_measurements(model: RunModel) -> Measurements:
    recorded = RunTimes(0, "compiled")
    others: dict[int, RunTimes] = {}
    m = Measurements(None, [recorded], [], [], None, [])

    def other(run: int, stance: str = "compiled") -> RunTimes:
        if run not in others:
            others[run] = RunTimes(run, stance)
        return others[run]

    for e in model.cost_capture.events:
        kind = e.get("kind")
        if kind == "cost_config":
            if e.get("profiler_error"):
                m.errors.append(str(e["profiler_error"]))
            elif m.config is None:
                m.config = dict(e)
        elif kind in ("cost_call", "cost_eager_call", "cost_run_call"):
            if e.get("hook_error"):
                m.errors.append(f"a call could not be recorded: {e['hook_error']}")
                continue
            target = _target(kind, e, recorded, other)
            call = call_time(e, target.run) if target is not None else None
            if target is not None and call is not None:
                target.calls.append(call)
        elif kind in ("cost_span", "cost_run_span"):
            target = recorded if kind == "cost_span" else _other(e, other)
            span = span_time(e, target.run) if target is not None else None
            if target is not None and span is not None:
                target.spans.append(span)
        elif kind in ("cost_compile", "cost_run_compile"):
            target = recorded if kind == "cost_compile" else _other(e, other)
            mark = compile_mark(e, target.run) if target is not None else None
            if target is not None and mark is not None:
                target.compiles.append(mark)
        elif kind in ("cost_eager_run", "cost_run"):
            run = 1 if kind == "cost_eager_run" else run_number(e)
            if run is not None:
                stance = "force_eager" if kind == "cost_eager_run" else str(e.get("stance") or "compiled")
                _describe(other(run, stance), e, stance)
        elif kind == "cost_calls_more":
            if bounded(e.get("count")) is not None:
                m.more.append(dict(e))
        elif kind == "cost_profile":
            if e.get("error"):
                m.errors.append(f"call {e.get('index')}: {e['error']}")
            else:
                m.profiles.append(e)
        elif kind == "cost_device" and m.device is None:
            m.device = dict(e)
        elif kind == "cost_step_found" and m.step_found is None:
            m.step_found = dict(e)
    m.runs += [others[k] for k in sorted(others)]
    return m


def _target(kind: str, e: dict[str, Any], recorded: RunTimes, other: Any) -> RunTimes | None:
    if kind == "cost_call":
        return recorded
    if kind == "cost_eager_call":  # a recording made before the runs were numbered: its one eager run
        return other(1, "force_eager")
    return _other(e, other)


def _other(e: dict[str, Any], other: Any) -> RunTimes | None:
    run = run_number(e)
    return other(run) if run is not None else None


def _describe(run: RunTimes, e: dict[str, Any], stance: str) -> None:
    run.stance = stance
    run.status = e["status"] if isinstance(e.get("status"), str) else None
    run.message = e["message"] if isinstance(e.get("message"), str) else None
    seconds = e.get("seconds")
    run.seconds = float(seconds) if type(seconds) in (int, float) and 0 <= seconds < 10**7 else None


def has_cost(model: RunModel) -> bool:
    return model.cost_capture.configured


@dataclass(frozen=True)
class Spread:
    median_ms: float
    min_ms: float
    max_ms: float
    count: int

    def to_json(self) -> dict[str, Any]:
        return {"median": self.median_ms, "min": self.min_ms, "max": self.max_ms, "calls": self.count}


def spread(values_ns: list[int]) -> Spread | None:
    if not values_ns:
        return None
    ms = [v / 1e6 for v in values_ns]
    return Spread(statistics.median(ms), min(ms), max(ms), len(ms))


@dataclass
class Row:
    """One part of the breakdown: per step, averaged over the profiled steps."""

    part: str
    compile_id: str | None
    name: str
    ms_per_step: float
    share: float
    launches_per_step: float
    phase: str = "call"
    site: str | None = None  # an extern call: the graph node it computes
    own_ms_per_step: float | None = (
        None  # kernels and extern calls: their own duration (device time on a GPU)
    )
    launch_ms_per_step: float | None = None  # on a GPU: the CPU time of the ranges that launched it
    user_line: dict[str, Any] | None = None
    aten_ops: list[str] = field(default_factory=list)
    detail: list[str] = field(default_factory=list)  # eager: the ops that ran; extern: device kernels
    gpu: dict[str, Any] | None = None
    replayed: bool = False  # on a GPU: run from a CUDA-graph replay
    device_kernels: dict[str, dict[str, float]] = field(default_factory=dict)  # name -> ms, launches per step
    per_step_ms: list[float] = field(default_factory=list)  # its ms in each profiled step (the mean's values)

    def to_json(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "phase": self.phase,
            "compile_id": self.compile_id,
            "name": self.name,
            "site": self.site,
            "ms_per_step": self.ms_per_step,
            "share": self.share,
            "launches_per_step": self.launches_per_step,
            "own_ms_per_step": self.own_ms_per_step,
            "launch_ms_per_step": self.launch_ms_per_step,
            "user_line": self.user_line,
            "aten_ops": self.aten_ops,
            "detail": self.detail,
            "gpu": self.gpu,
            "replayed": self.replayed,
            "device_kernels": self.device_kernels,
            "per_step_ms": self.per_step_ms,
        }


@dataclass
class Finding:
    # graph_break, skipped_frame, recompile, compile, guards, kernel, extern, cudagraph_skip, launch_bound
    kind: str
    title: str
    function: str
    file: str | None
    line: int | None
    ms_per_step: float | None  # what it costs every step (None: a one-time cost)
    share: float | None
    remedy: str | None
    detail: str = ""
    compile_ids: list[str] = field(default_factory=list)
    key: tuple[Any, ...] | None = None  # a graph break's (type, file, line), as explain keys its sites
    seconds: float | None = None  # a one-time cost: compile seconds
    expected: str | None = None  # why it is expected (the first compile, grad mode): listed, never ranked
    group: str | None = None  # the step group (function:mode) it was measured in
    per_step_ms: list[float] = field(default_factory=list)  # a per-step finding's ms in each profiled step

    @property
    def per_step(self) -> bool:
        return self.ms_per_step is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "title": self.title,
            "function": self.function,
            "site": {"file": self.file, "line": self.line},
            "unit": "per_step" if self.per_step else "once",
            "ms_per_step": self.ms_per_step,
            "seconds": self.seconds,
            "share": self.share,
            "remedy": self.remedy,
            "detail": self.detail,
            "compile_ids": self.compile_ids,
            "expected": self.expected,
            "group": self.group,
            "per_step_ms": self.per_step_ms,
        }


@dataclass
class FunctionCost:
    """The calls of one compiled callable in the recorded run."""

    function: str
    file: str | None
    line: int | None
    calls: list[CallTime]
    unlisted_calls: int  # measured calls past the listed ones (counted, not listed)
    call: Spread | None  # the steady calls timed without the profiler

    @property
    def label(self) -> str:
        """The function as the program names it: `Model.forward (via wrapped_func)` when Dynamo
        evaluates a decorator's frame around the callable the program compiled."""
        wraps = next((c.wraps for c in self.calls if c.wraps), None)
        return f"{wraps} (via {self.function})" if wraps else self.function

    @property
    def measured(self) -> list[CallTime]:
        return [c for c in self.calls if c.measured]

    @property
    def warmup(self) -> list[CallTime]:
        return [c for c in self.calls if c.warmup]

    @property
    def call_count(self) -> int:
        return len(self.calls) + self.unlisted_calls

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "wraps": next((c.wraps for c in self.calls if c.wraps), None),
            "file": self.file,
            "line": self.line,
            "calls": self.call_count,
            "measured_calls": len(self.measured) + self.unlisted_calls,
            "warmup_calls": [{"index": c.index, "compiled": list(c.compiled)} for c in self.warmup],
            "call_ms_spread": self.call.to_json() if self.call else None,
            "call_times": [
                {
                    "index": c.index,
                    "ms": c.wall_ns / 1e6,
                    "mode": c.mode,
                    "start_ns": c.start_ns,
                    "profiler_ns": c.profiler_ns,
                    "warmup": c.warmup,
                    "profiled": c.profiled,
                }
                for c in self.calls
            ],
        }


@dataclass
class StepCost:
    """One step group (a grad mode) with where its profiled steps' time went."""

    group: StepGroup
    profiled: list[CallProfile]  # whole steps
    breakdown: list[Row]
    launch_bound: dict[str, Any] | None = None  # on a GPU: the device's busy share, when low

    @property
    def profiled_ms(self) -> float | None:
        if not self.profiled:
            return None
        return sum(p.call_ns for p in self.profiled) / len(self.profiled) / 1e6

    def to_json(self) -> dict[str, Any]:
        return {
            **self.group.to_json(),
            "profiled_steps": [p.index for p in self.profiled],
            "profiled_step_ms": self.profiled_ms,
            "parts": totals_by_part(self),
            "breakdown": [r.to_json() for r in self.breakdown],
            "launch_bound": self.launch_bound,
        }


@dataclass
class Cost:
    model: RunModel
    selection: Selection
    steps: list[StepCost]  # one per grad mode, the most steady time first
    functions: list[FunctionCost]
    findings: list[Finding]
    compile_s: dict[str, float | None]  # compile id -> seconds (compilation_metrics)
    recompile_ids: list[str]
    notes: list[str]
    gpu: dict[str, Any] | None  # the device and its peaks (None: no GPU)
    config: dict[str, Any] | None
    runs: list[dict[str, Any]] = field(default_factory=list)  # the other runs: stance, status, seconds
    unit: str | None = None  # period, step function, call (core/cost/steps.py)
    unavailable: str | None = None
    warnings: list[str] = field(default_factory=list)  # an option that could not be honoured

    @property
    def primary(self) -> StepCost | None:
        """The step group the run spent most steady time in (the headline numbers are its)."""
        return self.steps[0] if self.steps else None

    @property
    def step_ms(self) -> float | None:
        """The headline step time, when enough steady steps support it."""
        p = self.primary
        return p.group.time.value if p and p.group.time_shown and p.group.time else None

    @property
    def speedup(self) -> float | None:
        """The headline speedup (eager step / compiled step), when enough steps of each support it
        (its interval may still cover 1.0: `check --min-speedup` judges the figure itself)."""
        p = self.primary
        return p.group.speedup.value if p and p.group.speedup and p.group.enough_to_compare else None

    @property
    def total_compile_s(self) -> float | None:
        """None when torch logged no compile time (never 0 s for a time not known)."""
        values = [v for v in self.compile_s.values() if v is not None]
        return sum(values) if values else None

    @property
    def recompile_s(self) -> float:
        return sum(self.compile_s.get(cid) or 0.0 for cid in self.recompile_ids)

    @property
    def per_step(self) -> list[Finding]:
        return [f for f in self.findings if f.per_step]

    @property
    def once(self) -> list[Finding]:
        return [f for f in self.findings if not f.per_step and not f.expected]

    @property
    def expected(self) -> list[Finding]:
        return [f for f in self.findings if not f.per_step and f.expected]


def by_function(calls: list[CallTime], selection: Selection) -> dict[str, list[CallTime]]:
    out: dict[str, list[CallTime]] = {}
    for c in calls:
        if selection.includes_function(c.function):
            out.setdefault(c.function, []).append(c)
    return out


def context(model: RunModel, failed_frames: list[Any]) -> Context:
    """Which break ended each compile's region; why a function's call entered no region."""
    last_break: dict[str, Any] = {}
    for b in model.graph_breaks:
        if b.compile_id and not b.frame_skipped:
            last_break[b.compile_id] = b

    def eager_label(cid: str) -> str | None:
        b = last_break.get(cid)
        return break_label(b.gb_type, b.file, b.line) if b else None

    def frame_label(function: str) -> str:
        for f in failed_frames:
            if f.function == function or f.function.endswith(f".{function}"):
                return f"{function} ran eagerly: {f.kind}"
        return f"{function} ran eagerly (the call entered no compiled region)"

    return Context(eager_label, frame_label)


def break_label(gb_type: str, file: str | None, line: int | None) -> str:
    return f"{gb_type} ({os.path.basename(file or '?')}:{line})"


def profiles_of(m: Measurements, group: StepGroup, ctx: Context) -> list[CallProfile]:
    """The group's profiled steps, attributed: whole steps only (a window that was not one step is
    left out of the breakdown: its figures would be of another unit)."""
    out = []
    for e in m.profiles:
        if e.get("function") != group.function or (e.get("mode") or "grad") != group.mode:
            continue
        p = attribute(e, ctx)
        if p is not None and p.call_ns > 0 and (p.whole_step or group.unit == "call"):
            out.append(p)
    return out


def measured_break_ms(model: RunModel, selection: Selection | None = None) -> dict[tuple, float]:
    """Each graph-break site's (type, file, line): its measured eager ms per step (explain's and the
    report's ranking; the headline step group's). Built from the measurements alone: explain calls
    it, so it must not call explain."""
    if not has_cost(model):
        return {}
    from tcx.core.cost.steps import groups_of

    selection = selection or whole_run(model)
    m = read_measurements(model)
    groups = groups_of(m.runs, *step_unit(m))
    if not groups:
        return {}
    breaks = {b.compile_id: b.key for b in model.graph_breaks if b.compile_id and not b.frame_skipped}
    ctx = context(model, [])
    out: dict[tuple, float] = {}
    profiles = profiles_of(m, groups[0], ctx)
    for p in profiles:
        for key, piece in p.pieces.items():
            site = breaks.get(key.compile_id or "") if key.part == "eager" else None
            if site is not None and selection.includes(key.compile_id):
                out[site] = out.get(site, 0.0) + piece.ns / len(profiles) / 1e6
    return out


def _named_step(m: Measurements) -> str | None:
    """The step `--step` named: the compiled callable's code name when it was one."""
    found = m.step_found or {}
    if found.get("compiled") and isinstance(found.get("function"), str):
        return str(found["function"])
    config = m.config or {}
    return str(config["step"]) if isinstance(config.get("step"), str) else None


def _step_compiled(m: Measurements) -> bool:
    return bool((m.step_found or {}).get("compiled"))


def step_unit(m: Measurements) -> tuple[str | None, bool]:
    """(the step's name, whether it is a step function's calls) for core/cost/steps.groups_of."""
    config = m.config or {}
    explicit = bool(config.get("step")) and not _step_compiled(m)
    return _named_step(m), explicit


def totals_by_part(s: StepCost) -> dict[str, float]:
    """ms per step of each part (kernel, extern, graph_op, eager, guards, autograd, optimizer, between,
    other) of one step group."""
    out = dict.fromkeys(PARTS, 0.0)
    for row in s.breakdown:
        out[row.part] = out.get(row.part, 0.0) + row.ms_per_step
    return out
