"""`tcx cost`'s findings: what to fix first, in two lists that are never ranked against each other —
what every step pays (measured ms per step, with its share of the step) and what the run pays once
(compile seconds) — each at its site with the fix the other views give (explain's remedies for
breaks and skipped frames, the recompiles view's for recompiles, torch's own words for CUDA-graph
skips). Expected costs (a frame's first compile, the grad-mode recompile between training and
evaluation) are listed as expected, never as problems.

Pure and torch-free; built from a `Cost` (core/views/cost.py) and explain's facts of the same selection.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from typing import Any

from tcx.core.cost.gpu import Peaks
from tcx.core.cost.measurements import FINDING_SHARE, KERNEL_SHARE, Cost, Finding, Row, StepCost
from tcx.core.cost.stats import seconds_text

KERNELS_LISTED = 3  # without a roofline (the CPU), the largest kernels only: their time is their own work
LAUNCH_REMEDY = (
    'CUDA graphs replay a step\'s kernels in one launch: torch.compile(mode="reduce-overhead") (see `tcx '
    "cudagraphs` for what keeps a graph from being captured); fewer, larger kernels launch less (larger "
    "batches, fewer graph breaks); the kernels' own shapes are not what costs here"
)


def findings(
    cost: Cost, ex: Any, peaks: Peaks | None, recompiles: Any, cudagraphs: Callable[[], Any]
) -> list[Finding]:
    """Every finding of the run: the per-step ones ranked by ms per step, then the one-time ones by
    compile seconds, then the expected ones. The cost view passes the views these read, as cost sits
    below the views: `recompiles` the recompiles view's report of the same selection (None when it
    could not be built), `cudagraphs` builds the CUDA-graphs view (only a step on a device needs it)."""
    per_step: list[Finding] = []
    sites = {(s.gb_type, s.file, s.line): s for s in ex.sites}
    breaks = {b.compile_id: b for b in cost.model.graph_breaks if b.compile_id and not b.frame_skipped}
    for step in cost.steps:
        group = step.group.key
        found = _break_findings(step, sites, breaks, ex, recompiles)
        found += _guard_findings(step, _site(cost, step.group.function))
        found += _optimizer_findings(step)
        launch = _launch_finding(step, _site(cost, step.group.function))
        found += [launch] if launch else []
        found += _kernel_findings(step, peaks, launch_bound=launch is not None)
        found += _cudagraph_findings(step, cudagraphs)
        found += _recurring_recompiles(cost, step, recompiles)
        for f in found:
            f.group = group
        per_step += found
    per_step.sort(key=lambda x: -(x.ms_per_step or 0.0))
    recurring = {cid for f in per_step if f.kind == "recompile" for cid in f.compile_ids}
    once = _compile_findings(cost, recompiles, recurring)
    once.sort(key=lambda x: (x.expected is not None, -(x.seconds or 0.0)))
    return per_step + once


def _share(step: StepCost, ms: float) -> float | None:
    """`ms` as a share of a profiled step, or None when no step was profiled."""
    base = step.profiled_ms
    return ms / base if base else None


def _torch_hint(hints: list[str]) -> str | None:
    """torch's own hint, where tcx has no remedy of its own for the break type."""
    return f"torch: {hints[0]}" if hints else None


def _ops(rows: list[Row]) -> str:
    ops = [d for r in rows for d in r.detail]
    return ", ".join(ops[:5]) or "Python only"


def _break_findings(step: StepCost, sites: dict, breaks: dict, ex: Any, recompiles: Any) -> list[Finding]:
    """Each graph break (and each frame that ran eagerly as a whole) with the eager time it causes."""
    g = step.group
    by_site: dict[tuple, list[Row]] = {}
    for row in step.breakdown:
        if row.part != "eager":
            continue
        b = breaks.get(row.compile_id or "")
        key = b.key if b else ("frame", row.name)
        by_site.setdefault(key, []).append(row)
    out = []
    for key, rows in by_site.items():
        ms = sum(r.ms_per_step for r in rows)
        site = sites.get(key)
        if site is not None:
            out.append(
                Finding(
                    "graph_break",
                    f"graph break: {site.gb_type}",
                    g.function,
                    site.file,
                    site.line,
                    ms,
                    _share(step, ms),
                    site.suggestion or _torch_hint(site.hints),
                    "ran eagerly after the break, until the resume function: " + _ops(rows),
                    [r.compile_id for r in rows if r.compile_id],
                    key,
                    per_step_ms=_summed(rows),
                )
            )
        else:
            out.append(_skipped_frame(step, ms, ex, recompiles, rows))
    return out


def site_label(site: str) -> str:
    """An extern call's site as printed: its node, or Inductor's debug handle when no node is known."""
    return site if ":" in site else f"node {site}"


def _skipped_frame(step: StepCost, ms: float, ex: Any, recompiles: Any, rows: list[Row]) -> Finding:
    function = step.group.function
    failed = next((x for x in ex.failed_frames if x.function == function), None)
    remedy = None
    if recompiles is not None:
        remedy = next((c.remedy for c in recompiles.calls if c.outcome == "eager" and c.remedy), None)
    if remedy is None and failed is not None:
        remedy = next((s.suggestion for s in ex.sites if s.frame_skipped and s.suggestion), None)
    line = rows[0].user_line or {}
    return Finding(
        "skipped_frame",
        rows[0].name,
        function,
        failed.file if failed else line.get("file"),
        failed.line if failed else line.get("line"),
        ms,
        _share(step, ms),
        remedy,
        "the whole call ran eagerly: " + _ops(rows),
        [failed.compile_id] if failed else [],
        per_step_ms=_summed(rows),
    )


def _site(cost: Cost, function: str) -> tuple[str | None, int | None]:
    """Where a compiled function is defined (its first line)."""
    f = next((f for f in cost.functions if f.function == function), None)
    return (f.file, f.line) if f else (None, None)


def _typical(step: StepCost, ms: float, per_step_ms: list[float]) -> float | None:
    """A cost's share of the step in a typical profiled step: the lesser of its mean's share and its
    median's, so one step the machine paused in cannot make a finding."""
    share = _share(step, ms)
    if share is None or not per_step_ms:
        return share
    return min(share, _share(step, statistics.median(per_step_ms)) or 0.0)


def _summed(rows: list[Row]) -> list[float]:
    """The rows' ms in each profiled step, added up step by step."""
    return [sum(values) for values in zip(*(r.per_step_ms for r in rows), strict=True)] if rows else []


def _guard_findings(step: StepCost, site: tuple[str | None, int | None]) -> list[Finding]:
    rows = [r for r in step.breakdown if r.part == "guards"]
    guards = sum(r.ms_per_step for r in rows)
    share = _share(step, guards)
    if (_typical(step, guards, _summed(rows)) or 0.0) < FINDING_SHARE:
        return []
    return [
        Finding(
            "guards",
            "guard evaluation (Dynamo's cache lookup) on every call",
            step.group.function,
            *site,
            guards,
            share,
            "Fewer cache entries to check (fewer recompiles: see the recompile findings), fewer "
            "frames (fewer graph breaks); torch.compiler.set_stance(skip_guard_eval_unsafe=True) "
            "skips guards once every input has been seen (unsafe if an input changes).",
            per_step_ms=_summed(rows),
        )
    ]


OPTIMIZER_REMEDY = (
    "untested here (tcx fix does not try it): compile the step that calls it (a function calling "
    "optimizer.step(), under torch.compile), or on a GPU AdamW(..., fused=True); `tcx cost --step` on "
    "the changed loop measures the difference"
)


def _optimizer_findings(step: StepCost) -> list[Finding]:
    """An optimizer step that runs eagerly and takes a share of every step."""
    out = []
    for row in step.breakdown:
        if row.part != "optimizer" or not row.name.endswith("(eager)"):
            continue
        share = _share(step, row.ms_per_step)
        if share is None or (_typical(step, row.ms_per_step, row.per_step_ms) or 0.0) < KERNEL_SHARE:
            continue
        line = row.user_line or {}
        out.append(
            Finding(
                "optimizer",
                f"the {row.name}",
                "",  # called by the program's loop, not by the compiled function
                line.get("file"),
                line.get("line"),
                row.ms_per_step,
                share,
                OPTIMIZER_REMEDY,
                "its ATen ops, op by op: " + ", ".join(row.detail[:5]),
                per_step_ms=row.per_step_ms,
            )
        )
    return out


def _launch_finding(step: StepCost, site: tuple[str | None, int | None]) -> Finding | None:
    """On a GPU whose device is idle most of the step: the step is launch-bound; the idle time is
    what the CPU spent issuing work."""
    facts = step.launch_bound
    if not facts or not facts.get("launch_bound") or not step.profiled_ms:
        return None
    busy = float(facts["device_busy_share"])
    idle_ms = step.profiled_ms * (1 - busy)
    return Finding(
        "launch_bound",
        f"launch-bound: the GPU is busy {busy:.0%} of the step",
        step.group.function,
        *site,
        idle_ms,
        1 - busy,
        LAUNCH_REMEDY,
        f"the device idles {idle_ms:.3g} ms of a {step.profiled_ms:.3g} ms step (mean of {facts['steps']} "
        "profiled steps) while the CPU launches kernels and runs Python",
    )


def _kernel_findings(step: StepCost, peaks: Peaks | None, launch_bound: bool) -> list[Finding]:
    """On a GPU, each kernel far below its roof (not when the run is launch-bound: launching, not the
    kernel, is the cost then); on the CPU, the few largest kernels and extern calls."""
    out = []
    for row in step.breakdown:
        if row.part not in ("kernel", "extern"):
            continue
        s = _typical(step, row.ms_per_step, row.per_step_ms)
        gpu = row.gpu or {}
        if gpu.get("far_below_roof") and s is not None and s >= FINDING_SHARE and not launch_bound:
            peak = gpu.get("share_of_peak") or 0.0
            detail = f"{gpu.get('bound')}-bound, {peak:.0%} of the device's peak ({gpu.get('peak_source')})"
            remedy = (
                f"far below its roof: `tcx codegen TARGET --kernel {row.name}` shows its code and fused ops"
                if row.part == "kernel"
                else "an extern call far below its roof: check its shapes and dtype (bf16 uses tensor cores)"
            )
        elif s is not None and s >= KERNEL_SHARE and peaks is None:
            detail = f"{row.launches_per_step:g} launch(es) per step, {row.phase}"
            remedy = (
                f"the kernel's own work: `tcx codegen TARGET --kernel {row.name}` shows its code, fused ops "
                "and your lines"
                if row.part == "kernel"
                else "an extern call (vendor library): its time is the op's own"
            )
        else:
            continue
        line = row.user_line or {}
        name = f"{row.name} ({site_label(row.site)})" if row.site else row.name
        out.append(
            Finding(
                row.part,
                f"{row.part} {name}",
                step.group.function,
                line.get("file"),
                line.get("line"),
                row.ms_per_step,
                s,
                remedy,
                detail,
                [row.compile_id] if row.compile_id else [],
                per_step_ms=row.per_step_ms,
            )
        )
    return out if peaks is not None else out[:KERNELS_LISTED]


def _cudagraph_findings(step: StepCost, cudagraphs: Callable[[], Any]) -> list[Finding]:
    """Each graph CUDA graphs skipped: what its kernel launches cost per step (what a replay would save)."""
    if not step.profiled or not any(p.on_device for p in step.profiled):
        return []
    try:
        view = cudagraphs()
    except Exception:
        return []
    launch: Counter = Counter()
    for p in step.profiled:
        launch.update(p.launch_ns)
    out = []
    for graph in view.graphs:
        if graph.status not in ("skipped", "partly") or graph.compile_id not in launch:
            continue
        ms = launch[graph.compile_id] / len(step.profiled) / 1e6
        reason = graph.reasons[0] if graph.reasons else None
        where = getattr(reason, "user_line", None) or {}
        out.append(
            Finding(
                "cudagraph_skip",
                f"CUDA graphs skipped graph {graph.compile_id}",
                step.group.function,
                where.get("file") if isinstance(where, dict) else None,
                where.get("line") if isinstance(where, dict) else None,
                ms,
                _share(step, ms),
                f"torch: {reason.text}" if reason else "see `tcx cudagraphs`",
                "CPU time in kernel launches of this graph per step (a CUDA-graph replay launches once)",
                [graph.compile_id],
            )
        )
    return out


def _expected(report: Any) -> dict[str, str]:
    """compile id -> why its recompile is expected (the recompiles view decides)."""
    return {c.compile_id: c.expected for c in (report.calls if report else []) if c.expected and c.compile_id}


def _recurring_recompiles(cost: Cost, step: StepCost, report: Any) -> list[Finding]:
    """A frame that keeps recompiling after the steps became steady: what its recompiles add to the
    steps where they happen (each such step's time over the steady median), spread over the steps."""
    g = step.group
    timed = [s.wall_ns for s in g.timed]
    if not timed:
        return []
    median = statistics.median(timed)
    expected = _expected(report)
    recompiled = set(cost.recompile_ids) - set(expected)
    first_steady = min((s.index for s in g.steady if s.run == 0), default=None)
    if first_steady is None:
        return []
    hit: dict[str, list[Any]] = {}
    for s in g.steps:
        ids = [w.rsplit(" ", 1)[-1] for w in s.why]
        late = [cid for cid in ids if cid in recompiled]
        if late and s.index > first_steady:
            comp = cost.model.compiles.get(late[0])
            hit.setdefault(comp.display_name if comp else late[0], []).append((s, late))
    out = []
    runs = max(1, g.runs)
    for name, pairs in hit.items():
        added_ns = sum(max(0, s.wall_ns - median) for s, _ in pairs)
        cids = list(dict.fromkeys(c for _, ids in pairs for c in ids))
        calls = [
            c for c in (report.calls if report else []) if c.outcome == "recompile" and c.compile_id in cids
        ]
        guard = next((gd for c in calls for gd in c.failed_guards if gd.file), None)
        comp = cost.model.compiles.get(cids[0])
        per_run = len(pairs) / runs
        out.append(
            Finding(
                "recompile",
                f"{name} recompiles in steady state: {per_run:g}× per run of {len(g.steps) // runs} steps",
                g.function,
                guard.file if guard else (comp.co_filename if comp else None),
                guard.line if guard else (comp.co_firstlineno if comp else None),
                added_ns / max(1, len(g.steps)) / 1e6,
                None,
                next((c.remedy for c in calls if c.remedy), None),
                f"the {len(pairs)} step(s) where it recompiled ({', '.join(cids[:6])}) took "
                f"{added_ns / 1e6:.3g} ms more than the steady median ({median / 1e6:.3g} ms), spread over "
                f"the {len(g.steps)} steps measured",
                cids,
            )
        )
    return out


def _compile_findings(cost: Cost, report: Any, recurring: set[str]) -> list[Finding]:
    """One-time costs, in compile seconds: each recompile not already costed per step (expected ones
    said why), and each frame's first compile (expected)."""
    expected = _expected(report)
    out = []
    recompiles = set(cost.recompile_ids)
    for cid, seconds in cost.compile_s.items():
        if cid in recurring or seconds is None:
            continue
        comp = cost.model.compiles.get(cid)
        name = comp.display_name if comp else cid
        file, line = (comp.co_filename, comp.co_firstlineno) if comp else (None, None)
        calls = [
            c for c in (report.calls if report else []) if c.compile_id == cid and c.outcome == "recompile"
        ]
        if cid in recompiles:
            why = expected.get(cid)
            title = f"{name} recompiled ({cid})"
            remedy = None if why else next((c.remedy for c in calls if c.remedy), None)
            cause = next((c.cause for c in calls if c.cause), None)
            detail = f"{seconds_text(seconds)} of compile, once" + (f": {cause}" if cause else "")
        else:
            why, title, remedy = f"the first compile of {name}", f"{name} compiled ({cid})", None
            detail = f"{seconds_text(seconds)} of compile, once"
        out.append(
            Finding(
                "compile",
                title,
                name,
                file,
                line,
                None,
                None,
                remedy,
                detail,
                [cid],
                seconds=seconds,
                expected=why,
            )
        )
    return out
