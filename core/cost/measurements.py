"""What `tcx cost` measured, read in ONE place (`read_measurements`), and the types of its report.

Pure and torch-free. The measurements are the cost capture's events (core/recorder/compat_cost.py).
`measured_break_ms` is here, not in core/views/cost.py, because explain ranks breaks by it: it is built
from the measurements alone and must never call explain (core/views/cost.py does).
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tcx.core.cost.profile import PARTS, CallProfile, Context, attribute, bounded
from tcx.core.selection import Selection, whole_run

if TYPE_CHECKING:
    from tcx.core.model import RunModel

FINDING_SHARE = 0.05  # guards, kernels and extern calls under this share of the call are not findings
KERNEL_SHARE = 0.10


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

    @property
    def compile_ids(self) -> list[str]:
        return [c.rsplit(" ", 1)[-1] for c in self.compiled]

    @property
    def measured(self) -> bool:
        return not (self.warmup or self.raised)


@dataclass
class Measurements:
    """Every cost event of a recording, typed (the only reader of the cost capture's events)."""

    config: dict[str, Any] | None
    calls: list[CallTime]
    eager_calls: list[CallTime]
    eager_run: dict[str, Any] | None
    more: list[dict[str, Any]]  # per function: calls past the listed ones (count, total, min, max)
    profiles: list[dict[str, Any]]
    device: dict[str, Any] | None
    errors: list[str]


def read_measurements(model: RunModel) -> Measurements:
    m = Measurements(None, [], [], None, [], [], None, [])
    for e in _cost_events(model):
        kind = e.get("kind")
        if kind == "cost_config":
            if e.get("profiler_error"):
                m.errors.append(str(e["profiler_error"]))
            elif m.config is None:
                m.config = dict(e)
        elif kind in ("cost_call", "cost_eager_call"):
            if e.get("hook_error"):
                m.errors.append(f"a call could not be recorded: {e['hook_error']}")
                continue
            call = _call_time(e)
            if call is not None:
                (m.calls if kind == "cost_call" else m.eager_calls).append(call)
        elif kind == "cost_eager_run":
            m.eager_run = dict(e)
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
    return m


def _call_time(e: dict[str, Any]) -> CallTime | None:
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
    )


COST_EVENTS = (
    "cost_config",
    "cost_call",
    "cost_eager_call",
    "cost_eager_run",
    "cost_calls_more",
    "cost_profile",
    "cost_device",
)


def _cost_events(model: RunModel) -> list[dict[str, Any]]:
    """The cost capture's events: from the model's captures by kind (or, on a model that keeps the
    recorder's events in one list, from that list)."""
    captures = getattr(model, "captures", None)
    if captures is not None:
        return [e for kind in COST_EVENTS for e in captures.of(kind)]
    return [e for e in getattr(model, "recorder_events", []) if e.get("kind") in COST_EVENTS]


def has_cost(model: RunModel) -> bool:
    captures = getattr(model, "captures", None)
    if captures is not None:
        return captures.first("cost_config") is not None
    return any(e.get("kind") == "cost_config" for e in getattr(model, "recorder_events", []))


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
    """One part of the breakdown: per call, averaged over the profiled calls."""

    part: str
    compile_id: str | None
    name: str
    ms_per_call: float
    share: float
    launches_per_call: float
    own_ms_per_call: float | None = None  # kernels: their own duration (device time on a GPU)
    user_line: dict[str, Any] | None = None
    aten_ops: list[str] = field(default_factory=list)
    detail: list[str] = field(default_factory=list)  # eager: the ops that ran; extern: device kernels
    gpu: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "compile_id": self.compile_id,
            "name": self.name,
            "ms_per_call": self.ms_per_call,
            "share": self.share,
            "launches_per_call": self.launches_per_call,
            "own_ms_per_call": self.own_ms_per_call,
            "user_line": self.user_line,
            "aten_ops": self.aten_ops,
            "detail": self.detail,
            "gpu": self.gpu,
        }


@dataclass
class Finding:
    kind: str  # graph_break, skipped_frame, recompile, guards, kernel, extern, cudagraph_skip
    title: str
    function: str
    file: str | None
    line: int | None
    ms_per_call: float
    share: float | None
    remedy: str | None
    detail: str = ""
    compile_ids: list[str] = field(default_factory=list)
    key: tuple[Any, ...] | None = None  # a graph break's (type, file, line), as explain keys its sites
    recurring: bool = True  # False: a one-time cost of this run (recompiles within the first call)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "title": self.title,
            "function": self.function,
            "site": {"file": self.file, "line": self.line},
            "ms_per_call": self.ms_per_call,
            "share": self.share,
            "remedy": self.remedy,
            "detail": self.detail,
            "compile_ids": self.compile_ids,
            "recurring": self.recurring,
        }


@dataclass
class FunctionCost:
    """The calls of one compiled callable."""

    function: str
    file: str | None
    line: int | None
    calls: list[CallTime]
    unlisted_calls: int  # measured calls past the listed ones (counted, not listed)
    call: Spread | None  # the measured calls timed without the profiler (or all measured, if none)
    timed_without_profiler: bool
    profiled: list[CallProfile]
    breakdown: list[Row]
    eager: Spread | None = None
    compiled_compared: Spread | None = None
    compared_calls: list[int] = field(default_factory=list)

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

    @property
    def profiled_ms(self) -> float | None:
        if not self.profiled:
            return None
        return sum(p.call_ns for p in self.profiled) / len(self.profiled) / 1e6

    @property
    def speedup(self) -> float | None:
        if self.eager is None or self.compiled_compared is None or not self.compiled_compared.median_ms:
            return None
        return self.eager.median_ms / self.compiled_compared.median_ms

    @property
    def weight_ms(self) -> float:
        return (self.call.median_ms * (len(self.measured) + self.unlisted_calls)) if self.call else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "wraps": next((c.wraps for c in self.calls if c.wraps), None),
            "file": self.file,
            "line": self.line,
            "calls": self.call_count,
            "measured_calls": len(self.measured) + self.unlisted_calls,
            "profiled_calls": [p.index for p in self.profiled],
            "warmup_calls": [{"index": c.index, "compiled": list(c.compiled)} for c in self.warmup],
            "call_ms": self.call.median_ms if self.call else None,
            "call_ms_spread": self.call.to_json() if self.call else None,
            "timed_without_profiler": self.timed_without_profiler,
            "profiled_call_ms": self.profiled_ms,
            "eager_call_ms": self.eager.median_ms if self.eager else None,
            "eager_call_ms_spread": self.eager.to_json() if self.eager else None,
            "speedup": self.speedup,
            "compared_calls": self.compared_calls,
            "call_times": [
                {"index": c.index, "ms": c.wall_ns / 1e6, "warmup": c.warmup, "profiled": c.profiled}
                for c in self.calls
            ],
            "breakdown": [r.to_json() for r in self.breakdown],
        }


@dataclass
class Cost:
    model: RunModel
    selection: Selection
    functions: list[FunctionCost]
    findings: list[Finding]
    compile_s: dict[str, float | None]  # compile id -> seconds (compilation_metrics)
    recompile_ids: list[str]
    notes: list[str]
    gpu: dict[str, Any] | None  # the device and its peaks (None: no GPU)
    config: dict[str, Any] | None
    eager_run: dict[str, Any] | None
    unavailable: str | None = None

    @property
    def primary(self) -> FunctionCost | None:
        """The function the run spent most measured time in (the headline numbers are its)."""
        return max(self.functions, key=lambda f: f.weight_ms, default=None)

    @property
    def call_ms(self) -> float | None:
        p = self.primary
        return p.call.median_ms if p and p.call else None

    @property
    def speedup(self) -> float | None:
        p = self.primary
        return p.speedup if p else None

    @property
    def total_compile_s(self) -> float | None:
        """None when torch logged no compile time (never 0 s for a time not known)."""
        values = [v for v in self.compile_s.values() if v is not None]
        return sum(values) if values else None

    @property
    def recompile_s(self) -> float:
        return sum(self.compile_s.get(cid) or 0.0 for cid in self.recompile_ids)


def _by_function(calls: list[CallTime], selection: Selection) -> dict[str, list[CallTime]]:
    out: dict[str, list[CallTime]] = {}
    for c in calls:
        if selection.includes_function(c.function):
            out.setdefault(c.function, []).append(c)
    return out


def _context(model: RunModel, failed_frames: list[Any]) -> Context:
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


def measured_break_ms(model: RunModel, selection: Selection | None = None) -> dict[tuple, float]:
    """Each graph-break site's (type, file, line): its measured eager ms per call (explain's and the
    report's ranking). Built from the measurements alone: explain calls it, so it must not call explain."""
    if not has_cost(model):
        return {}
    selection = selection or whole_run(model)
    m = read_measurements(model)
    breaks = {b.compile_id: b.key for b in model.graph_breaks if b.compile_id and not b.frame_skipped}
    ctx = _context(model, [])
    out: dict[tuple, float] = {}
    for name in _by_function(m.calls, selection):
        profiles = [p for e in m.profiles if e.get("function") == name and (p := attribute(e, ctx))]
        for p in profiles:
            for key, piece in p.pieces.items():
                site = breaks.get(key.compile_id or "") if key.part == "eager" else None
                if site is not None:
                    out[site] = out.get(site, 0.0) + piece.ns / len(profiles) / 1e6
    return out


def totals_by_part(f: FunctionCost) -> dict[str, float]:
    """ms per call of each part (kernel, extern, graph_op, eager, guards, other) of one function."""
    out = dict.fromkeys(PARTS, 0.0)
    for row in f.breakdown:
        out[row.part] = out.get(row.part, 0.0) + row.ms_per_call
    return out
