"""`tcx cost`: what each graph break, recompile, skipped frame and kernel costs per call, measured,
ranked — what to fix first.

Pure and torch-free. The measurements are the cost capture's events (core/recorder/compat_cost.py),
read in ONE place (`read_measurements`); everything else joins them to what the other views know:
the break that ended each compiled region and its fix (core/explain.py, core/remedies.py), the
recompiles and their fixes (core/recompiles.py, core/recompile_remedies.py), the kernels' provenance
(core/codegen_view.py), CUDA-graph decisions (core/cudagraphs_view.py) and compile times
(compilation_metrics). The attribution of one call's time is core/cost_profile.py, the findings
core/cost_findings.py, a GPU's peaks core/cost_gpu.py.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tcx.core.cost_gpu import Peaks, peaks_for, roofline
from tcx.core.cost_profile import PARTS, CallProfile, Context, Key, Piece, attribute, bounded
from tcx.core.envelope import envelope
from tcx.core.selection import Selection, whole_run

if TYPE_CHECKING:
    from tcx.core.model import RunModel

SCHEMA = "tcx.cost/1"
FINDING_SHARE = 0.05  # guards, kernels and extern calls under this share of the call are not findings
KERNEL_SHARE = 0.10
ATTRIBUTION = (
    "Each instant of a profiled call goes to one part: on the CPU to the innermost profiler range "
    "running then, on a GPU to the kernels the device ran (its idle time to what the CPU did). Time "
    "inside a compiled region but outside its graph (the code after a graph break, up to the resume "
    "function) is given to the break that ended the region (torch's `Torch-Compiled Region` ranges and "
    "tcx's range around each graph); a call that entered no region is given to its frame (skipped by "
    "Dynamo, or the recompile limit)."
)
GPU_NOTE = (
    "GPU figures (bytes moved, FLOPs, bandwidth and the share of the device's peak) need a GPU: this "
    "run used none. `tcx codegen TARGET --target cuda:sm_90` shows the Triton code a GPU would get "
    "(the code only)."
)


# ------------------------------------------------------------------ the measurements, read once


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


# ------------------------------------------------------------------ the facts


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
    def total_compile_s(self) -> float:
        return sum(v for v in self.compile_s.values() if v)

    @property
    def recompile_s(self) -> float:
        return sum(self.compile_s.get(cid) or 0.0 for cid in self.recompile_ids)


def build_cost(model: RunModel, selection: Selection | None = None) -> Cost:
    selection = selection or whole_run(model)
    m = read_measurements(model)
    compile_s = {cid: c.compile_time_s for cid, c in model.compiles.items() if selection.includes(cid)}
    recompile_ids = [
        r.compile_id for r in model.recompiles if r.compile_id and selection.includes(r.compile_id)
    ]
    if m.config is None:
        why = (
            "a TORCH_TRACE log holds no call timings: run the program with `tcx cost PROGRAM`"
            if model.source_kind == "trace"
            else "this run was not measured: `tcx cost PROGRAM` times and profiles its calls"
        )
        return Cost(model, selection, [], [], compile_s, recompile_ids, [], None, None, None, why)
    from tcx.core.explain import explain

    ex = explain(model, selection)
    ctx = _context(model, ex.failed_frames)
    provenance = _provenance(model, selection)
    peaks = peaks_for(m.device)
    tf32 = bool(m.device and m.device.get("float32_matmul_precision") in ("high", "medium"))
    functions = [
        _function_cost(name, calls, m, ctx, provenance, peaks, tf32)
        for name, calls in _by_function(m.calls, selection).items()
    ]
    functions.sort(key=lambda f: -f.weight_ms)
    _eager_lines(model, ex.failed_frames, functions)
    cost = Cost(
        model=model,
        selection=selection,
        functions=functions,
        findings=[],
        compile_s=compile_s,
        recompile_ids=recompile_ids,
        notes=[],
        gpu=_gpu_json(m.device, peaks),
        config=m.config,
        eager_run=m.eager_run,
    )
    from tcx.core.cost_findings import findings

    cost.findings = findings(cost, ex, peaks)
    cost.notes = _notes(cost, m)
    return cost


def _eager_lines(model: RunModel, failed_frames: list[Any], functions: list[FunctionCost]) -> None:
    """Each eager row's user line: the break that ended its region, or the frame that ran eagerly."""
    breaks = {b.compile_id: b for b in model.graph_breaks if b.compile_id and not b.frame_skipped}
    for f in functions:
        failed = next((x for x in failed_frames if x.function == f.function), None)
        for row in f.breakdown:
            b = breaks.get(row.compile_id or "") if row.part == "eager" else None
            if b is not None:
                last = b.user_stack[-1] if b.user_stack else None
                row.user_line = {
                    "file": b.file,
                    "line": b.line,
                    "function": last.name if last else None,
                    "code": last.code if last else None,
                }
            elif row.part == "eager" and failed is not None:
                row.user_line = {"file": failed.file, "line": failed.line, "function": failed.function}


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


def _provenance(model: RunModel, selection: Selection) -> dict[tuple[str | None, str], Any]:
    """(compile id, kernel name) -> the kernel (its ATen ops and user lines), from the output code."""
    from tcx.core.codegen_view import build_codegen

    try:
        view = build_codegen(model, selection)
        return {(k.compile_id, k.name): k for k in view.kernels}
    except Exception:  # provenance is a bonus: a payload its parser cannot read leaves rows without it
        return {}


def _function_cost(
    name: str,
    calls: list[CallTime],
    m: Measurements,
    ctx: Context,
    provenance: dict[tuple[str | None, str], Any],
    peaks: Peaks | None,
    tf32: bool,
) -> FunctionCost:
    measured = [c for c in calls if c.measured]
    plain = [c for c in measured if not c.profiled]
    timed = plain or measured
    more = [x for x in m.more if x.get("function") == name]
    unlisted = sum(int(x.get("count") or 0) for x in more)
    profiles = [
        p
        for e in m.profiles
        if e.get("function") == name and (p := attribute(e, ctx)) is not None and p.call_ns > 0
    ]
    f = FunctionCost(
        function=name,
        file=calls[0].file,
        line=calls[0].line,
        calls=calls,
        unlisted_calls=unlisted,
        call=spread([c.wall_ns for c in timed]),
        timed_without_profiler=bool(plain),
        profiled=profiles,
        breakdown=_breakdown(profiles, provenance, peaks, tf32),
    )
    eager = {c.index: c for c in m.eager_calls if c.function == name and not c.raised}
    compared = [c for c in timed if c.index in eager]
    if compared:
        f.compared_calls = [c.index for c in compared]
        f.eager = spread([eager[c.index].wall_ns for c in compared])
        f.compiled_compared = spread([c.wall_ns for c in compared])
    return f


def _breakdown(
    profiles: list[CallProfile],
    provenance: dict[tuple[str | None, str], Any],
    peaks: Peaks | None,
    tf32: bool,
) -> list[Row]:
    if not profiles:
        return []
    total: dict[Key, Piece] = {}
    for p in profiles:
        for key, piece in p.pieces.items():
            if key not in total:
                total[key] = Piece(key)
            total[key].add(piece)
    n = len(profiles)
    call_ns = sum(p.call_ns for p in profiles)
    rows = []
    for key, piece in total.items():
        if piece.ns <= 0 and piece.own_ns <= 0:
            continue
        row = Row(
            part=key.part,
            compile_id=key.compile_id,
            name=key.name,
            ms_per_call=piece.ns / n / 1e6,
            share=piece.ns / call_ns if call_ns else 0.0,
            launches_per_call=piece.launches / n,
            own_ms_per_call=piece.own_ns / n / 1e6 if key.part in ("kernel", "extern", "graph_op") else None,
        )
        kernel = provenance.get((key.compile_id, key.name))
        if kernel is not None:
            lines = kernel.origins.get("user_lines") or []
            row.user_line = lines[0] if lines else None
            row.aten_ops = list(kernel.origins.get("aten_ops") or [])
        if key.part == "eager":
            row.detail = [f"{op} ×{count / n:g}" for op, count in piece.ops.most_common(6)]
        elif piece.device_kernels:
            row.detail = [name for name, _ in piece.device_kernels.most_common(4)]
        if peaks is not None and key.part in ("kernel", "extern", "graph_op") and piece.own_ns > 0:
            nbytes = piece.inductor_gb * 1e9 if piece.inductor_gb else piece.bytes
            flops = piece.flops or piece.inductor_flop
            row.gpu = roofline(
                piece.own_ns / n / 1e9,
                nbytes / n if nbytes else None,
                flops / n if flops else None,
                piece.dtype,
                peaks,
                tf32,
            )
            row.gpu["bytes_from"] = (
                "Inductor's estimate (kernel_num_gb)" if piece.inductor_gb else "arguments"
            )
        rows.append(row)
    order = {p: i for i, p in enumerate(PARTS)}
    rows.sort(key=lambda r: (-r.ms_per_call, order.get(r.part, 9)))
    return rows


# ------------------------------------------------------------------ notes, GPU, JSON


def _notes(cost: Cost, m: Measurements) -> list[str]:
    notes = []
    for f in cost.functions:
        warm = f.warmup
        if warm:
            notes.append(
                f"{f.function}: {len(warm)} warm-up call(s) left out (they compiled: "
                + "; ".join(f"#{c.index} {', '.join(c.compiled) or 'asked with --warmup'}" for c in warm[:4])
                + (" …" if len(warm) > 4 else "")
                + ")"
            )
        if f.call is not None and not f.timed_without_profiler:
            notes.append(
                f"{f.function}: every measured call was profiled; its call time includes the profiler's cost"
            )
        if f.profiled and f.call is not None and f.profiled_ms:
            notes.append(
                f"{f.function}: the breakdown is the mean of {len(f.profiled)} profiled call(s), "
                f"{f.profiled_ms:.3f} ms each with the profiler on "
                f"(the timed calls: {f.call.median_ms:.3f} ms median)"
            )
        if f.unlisted_calls:
            notes.append(
                f"{f.function}: {f.unlisted_calls} measured calls past the listed ones are timed in "
                "totals only"
            )
        if not f.profiled and f.measured:
            notes.append(f"{f.function}: no call was profiled (see --profile-calls)")
        if any(p.truncated for p in f.profiled):
            notes.append(
                f"{f.function}: a profiled call had more ranges than tcx keeps; the rest is in 'other'"
            )
    if cost.eager_run is None:
        notes.append(
            "no eager run: the speedup needs one (`tcx cost` runs the program again with compilation off)"
        )
    elif cost.eager_run.get("status") not in (None, "ok"):
        notes.append(
            f"the eager run ended: {cost.eager_run.get('status')} "
            f"{cost.eager_run.get('message') or ''}".strip()
        )
    config = m.config or {}
    for name in ("kernel_profile", "graph_marks", "compile_signal", "profiler"):
        if config.get(name):
            notes.append(str(config[name]))
    notes += m.errors
    if cost.gpu is None:
        notes.append(GPU_NOTE)
    notes.append("How time is attributed: " + ATTRIBUTION)
    return notes


def _gpu_json(device: dict[str, Any] | None, peaks: Peaks | None) -> dict[str, Any] | None:
    if device is None:
        return None
    return {
        "device": device.get("name"),
        "capability": device.get("capability"),
        "float32_matmul_precision": device.get("float32_matmul_precision"),
        "peak_memory_bytes_s": peaks.memory_bytes_s if peaks else None,
        "peak_flops_s": peaks.flops_s if peaks else {},
        "peak_source": peaks.source if peaks else None,
    }


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


def to_json(cost: Cost) -> dict[str, Any]:
    p = cost.primary
    return {
        **envelope(SCHEMA, cost.model, cost.selection),
        "unavailable": cost.unavailable,
        "measured_function": p.function if p else None,
        "calls": p.call_count if p else 0,
        "measured_calls": (len(p.measured) + p.unlisted_calls) if p else 0,
        "call_ms": cost.call_ms,
        "call_ms_spread": p.call.to_json() if p and p.call else None,
        "eager_call_ms": p.eager.median_ms if p and p.eager else None,
        "speedup": cost.speedup,
        "compared_calls": p.compared_calls if p else [],
        "compile_s": cost.total_compile_s,
        "recompile_compile_s": cost.recompile_s,
        "recompile_share": cost.recompile_s / cost.total_compile_s if cost.total_compile_s else None,
        "compiles": [
            {"compile_id": cid, "seconds": s, "recompile": cid in cost.recompile_ids}
            for cid, s in cost.compile_s.items()
        ],
        "parts": totals_by_part(p) if p else {},
        "breakdown": [r.to_json() for r in p.breakdown] if p else [],
        "findings": [f.to_json() for f in cost.findings],
        "functions": [f.to_json() for f in cost.functions],
        "gpu": cost.gpu,
        "eager_run": cost.eager_run,
        "notes": cost.notes,
    }
