"""`tcx cost`: what each graph break, recompile, skipped frame and kernel costs per call, measured,
ranked — what to fix first.

Pure and torch-free. The measurements are the cost capture's events (core/recorder/compat_cost.py),
read in ONE place (`read_measurements`); everything else joins them to what the other views know:
the break that ended each compiled region and its fix (core/explain.py, core/remedies.py), the
recompiles and their fixes (core/recompiles.py, core/recompile_remedies.py), the kernels' provenance
(core/codegen_view.py), CUDA-graph decisions (core/cudagraphs_view.py) and compile times
(compilation_metrics). The attribution of one call's time is core/cost_profile.py.
"""

from __future__ import annotations

import functools
import os
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tcx.core.analysis import RunModel, resume_target
from tcx.core.cost_gpu import Peaks, peaks_for, roofline
from tcx.core.cost_profile import PARTS, CallProfile, Context, Key, Piece, attribute, bounded
from tcx.core.envelope import envelope
from tcx.core.selection import Selection, whole_run

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
    compiled: tuple[str, ...] = ()

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
    for e in model.recorder_events:
        kind = e.get("kind")
        if kind == "cost_config":
            if e.get("profiler_error"):
                m.errors.append(f"the profiler could not start: {e['profiler_error']}")
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
    )


def has_cost(model: RunModel) -> bool:
    return any(e.get("kind") == "cost_config" for e in model.recorder_events)


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
    cost.findings = _findings(cost, ex, peaks)
    cost.notes = _notes(cost, m)
    return cost


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


# ------------------------------------------------------------------ findings


def _findings(cost: Cost, ex: Any, peaks: Peaks | None) -> list[Finding]:
    out: list[Finding] = []
    sites = {(s.gb_type, s.file, s.line): s for s in ex.sites}
    breaks = {b.compile_id: b for b in cost.model.graph_breaks if b.compile_id and not b.frame_skipped}
    recompiles = _recompile_report(cost)
    for f in cost.functions:
        share = functools.partial(_share, f.profiled_ms)
        by_site: dict[tuple, list[Row]] = {}
        for row in f.breakdown:
            if row.part != "eager":
                continue
            b = breaks.get(row.compile_id or "")
            key = b.key if b else ("frame", f.function)
            by_site.setdefault(key, []).append(row)
        for key, rows in by_site.items():
            ms = sum(r.ms_per_call for r in rows)
            site = sites.get(key)
            if site is not None:
                out.append(
                    Finding(
                        "graph_break",
                        f"graph break: {site.gb_type}",
                        f.function,
                        site.file,
                        site.line,
                        ms,
                        share(ms),
                        site.suggestion or _torch_hint(site.hints),
                        "ran eagerly after the break, until the resume function: " + _ops(rows),
                        [r.compile_id for r in rows if r.compile_id],
                        key,
                    )
                )
            else:
                out.append(_skipped_frame(f, ms, share(ms), ex, recompiles, rows))
        out += _recompile_findings(cost, f, recompiles)
        guards = sum(r.ms_per_call for r in f.breakdown if r.part == "guards")
        if (share(guards) or 0.0) >= FINDING_SHARE:
            out.append(
                Finding(
                    "guards",
                    "guard evaluation (Dynamo's cache lookup) on every call",
                    f.function,
                    f.file,
                    f.line,
                    guards,
                    share(guards),
                    "Fewer cache entries to check (fewer recompiles: see the recompile findings), fewer "
                    "frames (fewer graph breaks); torch.compiler.set_stance(skip_guard_eval_unsafe=True) "
                    "skips guards once every input has been seen (unsafe if an input changes).",
                )
            )
        out += _kernel_findings(f, share, peaks)
        out += _cudagraph_findings(cost, f, share)
    out.sort(key=lambda x: -x.ms_per_call)
    return out


def _share(base: float | None, ms: float) -> float | None:
    """`ms` as a share of a call of `base` ms (the profiled calls' mean), or None when unknown."""
    return ms / base if base else None


def _torch_hint(hints: list[str]) -> str | None:
    """torch's own hint, where tcx has no remedy of its own for the break type."""
    return f"torch: {hints[0]}" if hints else None


def _ops(rows: list[Row]) -> str:
    ops = [d for r in rows for d in r.detail]
    return ", ".join(ops[:5]) or "Python only"


def _skipped_frame(
    f: FunctionCost, ms: float, share: float | None, ex: Any, recompiles: Any, rows: list[Row]
) -> Finding:
    failed = next((x for x in ex.failed_frames if x.function == f.function), None)
    remedy = None
    if recompiles is not None:
        remedy = next((c.remedy for c in recompiles.calls if c.outcome == "eager" and c.remedy), None)
    if remedy is None and failed is not None:
        remedy = next((s.suggestion for s in ex.sites if s.frame_skipped and s.suggestion), None)
    return Finding(
        "skipped_frame",
        rows[0].name,
        f.function,
        failed.file if failed else f.file,
        failed.line if failed else f.line,
        ms,
        share,
        remedy,
        "the whole call ran eagerly: " + _ops(rows),
        [failed.compile_id] if failed else [],
    )


def _recompile_report(cost: Cost) -> Any:
    from tcx.core.recompiles import analyze

    try:
        return analyze(cost.model, cost.selection)
    except Exception:  # the remedies are a bonus; the recompile counts come from the model
        return None


def _recompile_findings(cost: Cost, f: FunctionCost, report: Any) -> list[Finding]:
    """Each frame that recompiled: the compile time of its recompiles, spread over the function's calls."""
    frames: dict[str, list[str]] = {}
    for cid in cost.recompile_ids:
        comp = cost.model.compiles.get(cid)
        resumed = resume_target(comp) if comp is not None else None
        if comp is not None and f.function in (comp.co_name, resumed[0] if resumed else None):
            frames.setdefault(comp.display_name, []).append(cid)
    out = []
    calls = max(f.call_count, 1)
    for name, cids in frames.items():
        seconds = sum(cost.compile_s.get(c) or 0.0 for c in cids)
        calls_of = [
            c for c in (report.calls if report else []) if c.outcome == "recompile" and c.compile_id in cids
        ]
        remedy = next((c.remedy for c in calls_of if c.remedy), None)
        guard = next((g for c in calls_of for g in c.failed_guards if g.file), None)
        comp = cost.model.compiles[cids[0]]
        out.append(
            Finding(
                "recompile",
                f"{name} recompiled {len(cids)}× in {f.call_count} calls "
                f"(every {f.call_count / len(cids):.1f} calls)",
                f.function,
                guard.file if guard else comp.co_filename,
                guard.line if guard else comp.co_firstlineno,
                seconds * 1000 / calls,
                None,
                remedy,
                f"{seconds:.3f} s of compile time in recompiles ({', '.join(cids)}), spread over "
                f"{f.call_count} calls; each recompile's call is warm-up, left out of the call time",
                cids,
            )
        )
    return out


def _kernel_findings(f: FunctionCost, share: Any, peaks: Peaks | None) -> list[Finding]:
    out = []
    for row in f.breakdown:
        if row.part not in ("kernel", "extern"):
            continue
        s = share(row.ms_per_call)
        gpu = row.gpu or {}
        if gpu.get("far_below_roof") and s is not None and s >= FINDING_SHARE:
            peak = gpu.get("share_of_peak") or 0.0
            detail = f"{gpu.get('bound')}-bound, {peak:.0%} of the device's peak ({gpu.get('peak_source')})"
            remedy = (
                f"far below its roof: `tcx codegen TARGET --kernel {row.name}` shows its code and fused ops"
                if row.part == "kernel"
                else "an extern call far below its roof: check its shapes and dtype (bf16 uses tensor cores)"
            )
        elif s is not None and s >= KERNEL_SHARE and peaks is None:
            detail = f"{row.launches_per_call:g} launch(es) per call"
            remedy = (
                f"the kernel's own work: `tcx codegen TARGET --kernel {row.name}` shows its code, fused ops "
                "and your lines"
                if row.part == "kernel"
                else "an extern call (vendor library): its time is the op's own"
            )
        else:
            continue
        line = row.user_line or {}
        out.append(
            Finding(
                row.part,
                f"{row.part} {row.name}",
                f.function,
                line.get("file"),
                line.get("line"),
                row.ms_per_call,
                s,
                remedy,
                detail,
                [row.compile_id] if row.compile_id else [],
            )
        )
    return out


def _cudagraph_findings(cost: Cost, f: FunctionCost, share: Any) -> list[Finding]:
    """Each graph CUDA graphs skipped: what its kernel launches cost per call (what a replay would save)."""
    if not f.profiled or not any(p.on_device for p in f.profiled):
        return []
    from tcx.core.cudagraphs_view import build_cudagraphs

    try:
        view = build_cudagraphs(cost.model, cost.selection)
    except Exception:
        return []
    launch: Counter = Counter()
    for p in f.profiled:
        launch.update(p.launch_ns)
    out = []
    for g in view.graphs:
        if g.status not in ("skipped", "partly") or g.compile_id not in launch:
            continue
        ms = launch[g.compile_id] / len(f.profiled) / 1e6
        reason = g.reasons[0] if g.reasons else None
        where = getattr(reason, "user_line", None) or {}
        out.append(
            Finding(
                "cudagraph_skip",
                f"CUDA graphs skipped graph {g.compile_id}",
                f.function,
                where.get("file") if isinstance(where, dict) else None,
                where.get("line") if isinstance(where, dict) else None,
                ms,
                share(ms),
                f"torch: {reason.text}" if reason else "see `tcx cudagraphs`",
                "CPU time in kernel launches of this graph per call (a CUDA-graph replay launches once)",
                [g.compile_id],
            )
        )
    return out


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
