"""`tcx cost`: what the program's step costs, and what each graph break, recompile, skipped frame and
kernel costs per step — measured, ranked: what to fix first; compile time apart, once.

Pure and torch-free. The measurements are the cost capture's events (core/recorder/compat_cost.py),
read in ONE place (core/cost/measurements.py); the steps are core/cost/steps.py, their statistics
core/cost/stats.py; everything else joins them to what the other views know: the break that ended
each compiled region and its fix (core/views/explain.py, core/analysis/remedies.py), the recompiles
and their fixes (core/views/recompiles.py, core/analysis/recompile_remedies.py), the kernels' and
extern calls' provenance (core/views/codegen.py), CUDA-graph decisions (core/views/cudagraphs.py)
and compile times (compilation_metrics). The attribution of one step's time is core/cost/profile.py,
the findings core/cost/findings.py, a GPU's peaks core/cost/gpu.py.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tcx.core.cost.gpu import Peaks, peaks_for, roofline
from tcx.core.cost.measurements import (
    ATTRIBUTION,
    SCHEMA,
    Cost,
    FunctionCost,
    Measurements,
    Row,
    StepCost,
    by_function,
    context,
    profiles_of,
    read_measurements,
    spread,
    step_unit,
    totals_by_part,
)
from tcx.core.cost.profile import PARTS, CallProfile, Key, Piece
from tcx.core.cost.stats import MIN_STEPS
from tcx.core.cost.steps import UNIT_CALL, UNIT_PERIOD, UNIT_STEP, groups_of
from tcx.core.cost.timings import CallTime
from tcx.core.selection import Selection, whole_run
from tcx.core.views.envelope import envelope

if TYPE_CHECKING:
    from tcx.core.model import RunModel

LAUNCH_BOUND = 0.5  # the device busy under this share of a step: the run is launch-bound
UNIT_TEXT = {
    UNIT_PERIOD: "a step is one call of {function} to its next call (the backward, the optimizer step and "
    "the code between included)",
    UNIT_STEP: "a step is one call of {function} (--step)",
    UNIT_CALL: "a step is one call of {function} alone (a recording made before tcx timed what runs "
    "between calls: backward and optimizer are not in it)",
}
GPU_NOTE = (
    "GPU figures (device time apart from launch cost, bytes moved, FLOPs, bandwidth and the share of the "
    "device's peak) need a GPU: this run used none. `tcx codegen TARGET --target cuda:sm_90` shows the "
    "Triton code a GPU would get (the code only)."
)


@dataclass
class CodeFacts:
    """What the output code says about the kernels and extern calls a profile names (core/views/codegen)."""

    kernels: dict[tuple[str | None, bool, str], Any] = field(default_factory=dict)  # (cid, bwd, name)
    externs: dict[tuple[str | None, bool], list[Any]] = field(default_factory=dict)  # (cid, bwd) -> in order
    backward_kernels: dict[str, frozenset[str]] = field(default_factory=dict)  # cid -> its backward's kernels

    def extern(self, cid: str | None, backward: bool, site: str | None) -> Any:
        return next((e for e in self.externs.get((cid, backward), []) if e.site == site), None)

    def kernel(self, cid: str | None, backward: bool, name: str) -> Any:
        return self.kernels.get((cid, backward, name)) or self.kernels.get((cid, not backward, name))

    def extern_site(self, cid: str, backward: bool, op: str, k: int) -> str | None:
        same = [e for e in self.externs.get((cid, backward), []) if e.op == op]
        return same[k].site if k < len(same) else None

    def module(self, cid: str, backward: bool) -> tuple[frozenset[str], list[tuple[str, str | None]]]:
        names = frozenset(name for (c, b, name) in self.kernels if c == cid and b == backward)
        return names, [(e.op, e.site) for e in self.externs.get((cid, backward), [])]

    def backward_graph(self, kernels: frozenset[str], forwards: tuple[str, ...], seen: int) -> str | None:
        """The compile whose backward ran these kernels: the one whose backward module defines them
        all (among the step's forward graphs first); without kernels (a backend that generates none),
        the forward graphs' backwards run in reverse order."""
        if kernels:
            owners = [cid for cid, names in self.backward_kernels.items() if kernels <= names]
            preferred = [cid for cid in owners if cid in forwards] or owners
            return preferred[0] if len(preferred) == 1 else None
        order = list(reversed(forwards))
        return order[seen] if seen < len(order) else None


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
        return Cost(model, selection, [], [], [], compile_s, recompile_ids, [], None, None, unavailable=why)
    from tcx.core.views.explain import explain

    ex = explain(model, selection)
    ctx = context(model, ex.failed_frames)
    code = _code_facts(model, selection)
    ctx.backward_graph, ctx.extern_site, ctx.module = code.backward_graph, code.extern_site, code.module
    peaks = peaks_for(m.device)
    tf32 = bool(m.device and m.device.get("float32_matmul_precision") in ("high", "medium"))
    named, explicit = step_unit(m)
    if named is None and selection.function:
        named = selection.function.rsplit(".", 1)[-1]
    groups = groups_of(m.runs, named, explicit)
    steps = []
    for g in groups:
        profiled = profiles_of(m, g, ctx)
        step = StepCost(g, profiled, _breakdown(profiled, code, peaks, tf32))
        step.launch_bound = _launch_bound(profiled)
        steps.append(step)
    functions = [_function_cost(name, calls, m) for name, calls in by_function(m.calls, selection).items()]
    functions.sort(key=lambda f: -sum(c.wall_ns for c in f.measured))
    cost = Cost(
        model=model,
        selection=selection,
        steps=steps,
        functions=functions,
        findings=[],
        compile_s=compile_s,
        recompile_ids=recompile_ids,
        notes=[],
        gpu=_gpu_json(m.device, peaks),
        config=m.config,
        runs=[_run_json(r) for r in m.other_runs],
        unit=groups[0].unit if groups else None,
    )
    _eager_lines(model, ex.failed_frames, cost)
    _span_lines(m, cost)
    if not steps:
        cost.warnings.append(_why_no_steps(m, functions))
    from tcx.core.cost.findings import findings
    from tcx.core.views.cudagraphs import build_cudagraphs

    cudagraphs = functools.partial(build_cudagraphs, model, selection)
    cost.findings = findings(cost, ex, peaks, _recompile_report(model, selection), cudagraphs)
    cost.notes = _notes(cost, m)
    return cost


def _recompile_report(model: RunModel, selection: Selection) -> Any:
    from tcx.core.views.recompiles import analyze

    try:
        return analyze(model, selection)
    except Exception:  # the remedies are a bonus; the recompile counts come from the model
        return None


def _why_no_steps(m: Measurements, functions: list[FunctionCost]) -> str:
    """Why nothing could be timed: every figure needs a step, from one call to the next."""
    if not functions:
        return "no call of a compiled function was recorded: nothing to time"
    calls = ", ".join(f"{f.label} {f.call_count}×" for f in functions[:4])
    config = m.config or {}
    if config.get("step") and not (m.step_found or {}).get("compiled"):
        return f"--step {config['step']}: no call of it was timed after its first ({calls} compiled calls)"
    return (
        f"no step to time: a step runs from one call of the compiled function to its next, in the same grad "
        f"mode, and this run called {calls}. Call it more (a loop), or name the loop's function with --step"
    )


def _run_json(run: Any) -> dict[str, Any]:
    return {
        "run": run.run,
        "stance": run.stance,
        "status": run.status,
        "message": run.message,
        "seconds": run.seconds,
        "calls": len(run.calls),
    }


def _eager_lines(model: RunModel, failed_frames: list[Any], cost: Cost) -> None:
    """Each eager row's user line: the break that ended its region, or the frame that ran eagerly."""
    breaks = {b.compile_id: b for b in model.graph_breaks if b.compile_id and not b.frame_skipped}
    for s in cost.steps:
        failed = next((x for x in failed_frames if x.function == s.group.function), None)
        for row in s.breakdown:
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


def _span_lines(m: Measurements, cost: Cost) -> None:
    """The optimizer's and autograd's rows at the program's line that ran them (optimizer.step(),
    loss.backward()), as the recorder saw it."""
    sites: dict[str, dict[str, Any]] = {}
    for span in m.recorded.spans:
        if span.file and span.kind not in sites:
            sites[span.kind] = {"file": span.file, "line": span.line}
    for s in cost.steps:
        for row in s.breakdown:
            site = sites.get({"optimizer": "optimizer", "autograd": "backward"}.get(row.part, ""))
            if site and row.user_line is None:
                row.user_line = dict(site)


def _code_facts(model: RunModel, selection: Selection) -> CodeFacts:
    """The kernels and extern calls of the run's output code, by compile, forward or backward."""
    from tcx.core.views.codegen import build_codegen

    facts = CodeFacts()
    try:
        view = build_codegen(model, selection)
        for section in view.sections:
            backward = section.wrapper.graph == "backward"
            cid = section.wrapper.compile_id
            for k in section.kernels:
                facts.kernels[(cid, backward, k.name)] = k
            facts.externs[(cid, backward)] = list(section.extern_calls)
            if backward and cid is not None:
                facts.backward_kernels[cid] = frozenset(k.name for k in section.kernels)
    except Exception:  # provenance is a bonus: a payload its parser cannot read leaves rows without it
        return CodeFacts()
    return facts


def _function_cost(name: str, calls: list[CallTime], m: Measurements) -> FunctionCost:
    measured = [c for c in calls if c.measured]
    plain = [c for c in measured if not c.profiled]
    unlisted = sum(int(x.get("count") or 0) for x in m.more if x.get("function") == name)
    return FunctionCost(
        function=name,
        file=calls[0].file,
        line=calls[0].line,
        calls=calls,
        unlisted_calls=unlisted,
        call=spread([c.wall_ns for c in plain]),
    )


def _breakdown(profiles: list[CallProfile], code: CodeFacts, peaks: Peaks | None, tf32: bool) -> list[Row]:
    if not profiles:
        return []
    total: dict[Key, Piece] = {}
    each: dict[Key, list[int]] = {}  # the key's time in each profiled step (0 where it did not run)
    for i, p in enumerate(profiles):
        for key, piece in p.pieces.items():
            if key not in total:
                total[key] = Piece(key)
                each[key] = [0] * len(profiles)
            total[key].add(piece)
            each[key][i] = piece.ns
    n = len(profiles)
    step_ns = sum(p.call_ns for p in profiles)
    on_device = any(p.on_device for p in profiles)
    rows = []
    for key, piece in total.items():
        if piece.ns <= 0 and piece.own_ns <= 0:
            continue
        launched = key.part in ("kernel", "extern", "graph_op")
        row = Row(
            part=key.part,
            compile_id=key.compile_id,
            name=key.name,
            ms_per_step=piece.ns / n / 1e6,
            share=piece.ns / step_ns if step_ns else 0.0,
            launches_per_step=piece.launches / n,
            phase=key.phase,
            site=key.site,
            own_ms_per_step=piece.own_ns / n / 1e6 if launched else None,
            launch_ms_per_step=piece.cpu_own_ns / n / 1e6 if launched and on_device else None,
            replayed=bool(piece.replayed),
            per_step_ms=[ns / 1e6 for ns in each[key]],
        )
        _place(row, key, code)
        if key.part in ("eager", "autograd", "optimizer", "between"):
            row.detail = [f"{op} ×{count / n:g}" for op, count in piece.ops.most_common(6)]
        elif piece.device_kernels:
            row.detail = [name for name, _ in piece.device_kernels.most_common(4)]
        row.device_kernels = {
            name: {"ms_per_step": ns / n / 1e6, "launches_per_step": piece.device_kernels[name] / n}
            for name, ns in piece.device_kernel_ns.items()
        }
        if peaks is not None and launched and piece.own_ns > 0:
            row.gpu = _roofline(row, piece, n, code, key, peaks, tf32)
        rows.append(row)
    order = {p: i for i, p in enumerate(PARTS)}
    rows.sort(key=lambda r: (-r.ms_per_step, order.get(r.part, 9)))
    return rows


def _place(row: Row, key: Key, code: CodeFacts) -> None:
    """The row's user line and ops: a kernel's from its provenance, an extern call's from the node it
    computes (its own line, not its inputs'); where torch gives no line, the node is named."""
    backward = key.phase == "backward"
    if key.part == "kernel":
        kernel = code.kernel(key.compile_id, backward, key.name)
        if kernel is not None:
            lines = kernel.origins.get("user_lines") or []
            row.user_line = lines[0] if lines else None
            row.aten_ops = list(kernel.origins.get("aten_ops") or [])
    elif key.part == "extern" and key.site is not None:
        call = code.extern(key.compile_id, backward, key.site)
        if call is not None:
            row.user_line = call.user_line


def _roofline(
    row: Row, piece: Piece, n: int, code: CodeFacts, key: Key, peaks: Peaks, tf32: bool
) -> dict[str, Any]:
    nbytes = piece.inductor_gb * 1e9 if piece.inductor_gb else piece.bytes
    flops: float | None = piece.flops or piece.inductor_flop
    flops_from = "the profiler" if piece.flops else ("Inductor's estimate" if piece.inductor_flop else None)
    dtype = piece.dtype
    if not flops and key.part == "extern" and key.site is not None:
        call = code.extern(key.compile_id, key.phase == "backward", key.site)
        if call is not None and call.flops:  # a CUDA-graph replay has no op range: FLOPs from its node
            flops, flops_from = call.flops * piece.launches, f"the shapes of node {call.node}"
            dtype = dtype or call.dtype
    gpu = roofline(
        piece.own_ns / n / 1e9,
        nbytes / n if nbytes else None,
        flops / n if flops else None,
        dtype,
        peaks,
        tf32,
    )
    gpu["bytes_from"] = "Inductor's estimate (kernel_num_gb)" if piece.inductor_gb else "arguments"
    gpu["flops_from"] = flops_from
    return gpu


def _launch_bound(profiles: list[CallProfile]) -> dict[str, Any] | None:
    """On a GPU: how much of a step the device was busy; under LAUNCH_BOUND the step is launch-bound
    (the CPU issuing work is what takes the time)."""
    on_device = [p for p in profiles if p.on_device]
    if not on_device:
        return None
    busy = sum(p.device_busy_ns for p in on_device) / sum(p.call_ns for p in on_device)
    return {"device_busy_share": busy, "launch_bound": busy < LAUNCH_BOUND, "steps": len(on_device)}


# ------------------------------------------------------------------ notes, GPU, JSON


def _notes(cost: Cost, m: Measurements) -> list[str]:
    notes = []
    if cost.unit and cost.steps:
        notes.append(UNIT_TEXT[cost.unit].format(function=cost.steps[0].group.function))
    found = m.step_found or {}
    config = m.config or {}
    if config.get("step") and not found:
        notes.append(f"--step {config['step']}: the program never called a function of that name")
    if found.get("error"):
        notes.append(f"--step {config.get('step')}: {found['error']}")
    for s in cost.steps:
        g = s.group
        warm = g.warmup
        if warm:
            whys = [f"#{x.index} {', '.join(x.why) or 'asked with --warmup'}" for x in warm[:4] if x.run == 0]
            notes.append(
                f"{g.label}: {len(warm)} warm-up step(s) left out (something compiled during them: "
                + "; ".join(whys)
                + (" …" if len(warm) > 4 else "")
                + ")"
            )
        if s.profiled and s.profiled_ms:
            notes.append(
                f"{g.label}: the breakdown is the mean of {len(s.profiled)} profiled step(s), "
                f"{s.profiled_ms:.3g} ms each with the profiler on"
            )
        if not s.profiled and g.steady:
            notes.append(f"{g.label}: no whole step was profiled (see --profile-calls)")
        if any(p.truncated for p in s.profiled):
            notes.append(f"{g.label}: a profiled step had more ranges than tcx keeps; the rest is in 'other'")
    for f in cost.functions:
        if f.unlisted_calls:
            notes.append(
                f"{f.function}: {f.unlisted_calls} calls past the listed ones are timed in totals only"
            )
    eager_runs = [r for r in cost.runs if r["stance"] == "force_eager"]
    if not eager_runs:
        notes.append(
            "no eager run: the speedup needs one (`tcx cost` runs the program again with compilation off)"
        )
    for r in cost.runs:
        if r.get("status") not in (None, "ok"):
            what = "eager run" if r["stance"] == "force_eager" else "repeat run"
            notes.append(f"the {what} #{r['run']} ended: {r.get('status')} {r.get('message') or ''}".strip())
    repeats = [r for r in cost.runs if r["stance"] != "force_eager"]
    if repeats:
        notes.append(
            f"the program ran {len(repeats) + 1} times compiled and {len(eager_runs)} times eagerly "
            f"(--budget): the figures pool their steady steps"
        )
    for name in ("kernel_profile", "graph_marks", "compile_signal", "profiler", "backward", "optimizer"):
        if config.get(name):
            notes.append(str(config[name]))
    notes += m.errors
    if cost.gpu is None:
        notes.append(GPU_NOTE)
    notes.append(
        f"Figures need {MIN_STEPS} steady steps; intervals are 95% bootstrap intervals of the median."
    )
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
    g = p.group if p else None
    return {
        **envelope(SCHEMA, cost.model, cost.selection),
        "unavailable": cost.unavailable,
        "warnings": cost.warnings,
        "unit": cost.unit,
        "step_function": g.function if g else None,
        "step_group": g.key if g else None,
        "step_ms": cost.step_ms,
        "step_ms_interval": g.time.to_json() if g and g.time else None,
        "step_ms_note": g.time_note if g else None,
        "steady_steps": len(g.timed) if g else 0,
        "eager_step_ms": g.eager.value if g and g.eager else None,
        "speedup": cost.speedup if g and g.speedup_shown else None,
        "speedup_interval": g.speedup.to_json() if g and g.speedup else None,
        "speedup_note": g.speedup_note if g else None,
        "speedup_caveat": g.speedup_caveat if g else None,
        "compile_s": cost.total_compile_s,
        "recompile_compile_s": cost.recompile_s,
        "recompile_share": cost.recompile_s / cost.total_compile_s if cost.total_compile_s else None,
        "compiles": [
            {"compile_id": cid, "seconds": s, "recompile": cid in cost.recompile_ids}
            for cid, s in cost.compile_s.items()
        ],
        "parts": totals_by_part(p) if p else {},
        "breakdown": [r.to_json() for r in p.breakdown] if p else [],
        "steps": [s.to_json() for s in cost.steps],
        "findings": [f.to_json() for f in cost.findings],
        "functions": [f.to_json() for f in cost.functions],
        "runs": cost.runs,
        "gpu": cost.gpu,
        "notes": cost.notes,
    }
