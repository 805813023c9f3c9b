"""`tcx cost`: what each graph break, recompile, skipped frame and kernel costs per call, measured,
ranked — what to fix first.

Pure and torch-free. The measurements are the cost capture's events (core/recorder/compat_cost.py),
read in ONE place (`read_measurements`); everything else joins them to what the other views know:
the break that ended each compiled region and its fix (core/views/explain.py,
core/analysis/remedies.py), the recompiles and their fixes (core/views/recompiles.py,
core/analysis/recompile_remedies.py), the kernels' provenance (core/views/codegen.py), CUDA-graph
decisions (core/views/cudagraphs.py) and compile times (compilation_metrics). The attribution of one
call's time is core/cost/profile.py, the findings core/cost/findings.py, a GPU's peaks
core/cost/gpu.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tcx.core.cost.gpu import Peaks, peaks_for, roofline
from tcx.core.cost.measurements import (
    CallTime,
    Cost,
    FunctionCost,
    Measurements,
    Row,
    _by_function,
    _context,
    read_measurements,
    spread,
    totals_by_part,
)
from tcx.core.cost.profile import PARTS, CallProfile, Context, Key, Piece, attribute
from tcx.core.selection import Selection, whole_run
from tcx.core.views.envelope import envelope

if TYPE_CHECKING:
    from tcx.core.model import RunModel

SCHEMA = "tcx.cost/1"
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


# ------------------------------------------------------------------ the facts


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
    from tcx.core.views.explain import explain

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
    from tcx.core.cost.findings import findings

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


def _provenance(model: RunModel, selection: Selection) -> dict[tuple[str | None, str], Any]:
    """(compile id, kernel name) -> the kernel (its ATen ops and user lines), from the output code."""
    from tcx.core.views.codegen import build_codegen

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
