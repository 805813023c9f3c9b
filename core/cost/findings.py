"""`tcx cost`'s findings: what to fix first, each at its site with its measured ms per call, its share
of the call and the fix the other views give (explain's remedies for breaks and skipped frames, the
recompiles view's for recompiles, torch's own words for CUDA-graph skips).

Pure and torch-free; built from a `Cost` (core/views/cost.py) and explain's facts of the same selection.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

from tcx.core.cost.gpu import Peaks
from tcx.core.cost.measurements import FINDING_SHARE, KERNEL_SHARE, Cost, Finding, FunctionCost, Row


def findings(cost: Cost, ex: Any, peaks: Peaks | None) -> list[Finding]:
    """Every finding of the run, ranked: what costs every call by measured ms per call, then the
    one-time costs (recompiles within a function's first call)."""
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
    out.sort(key=lambda x: (not x.recurring, -x.ms_per_call))
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
    from tcx.core.views.recompiles import analyze

    try:
        return analyze(cost.model, cost.selection)
    except Exception:  # the remedies are a bonus; the recompile counts come from the model
        return None


def _recompile_findings(cost: Cost, f: FunctionCost, report: Any) -> list[Finding]:
    """The recompiles that happened during the function's calls, their compile time spread over its
    calls: those in later calls recur (each frame's, with how often); those within its first call are
    one-time warm-up (listed after the findings that cost every call)."""
    recompiled = set(cost.recompile_ids)
    first = min((c.index for c in f.calls), default=0)
    recurring: dict[str, list[str]] = {}
    once: list[str] = []
    for call in f.calls:
        for cid in call.compile_ids:
            if cid not in recompiled:
                continue
            if call.index == first:
                once.append(cid)
            else:
                comp = cost.model.compiles.get(cid)
                recurring.setdefault(comp.display_name if comp else cid, []).append(cid)
    calls = max(f.call_count, 1)
    out = []
    for name, cids in recurring.items():
        seconds = sum(cost.compile_s.get(c) or 0.0 for c in cids)
        calls_of = [
            c for c in (report.calls if report else []) if c.outcome == "recompile" and c.compile_id in cids
        ]
        guard = next((g for c in calls_of for g in c.failed_guards if g.file), None)
        comp = cost.model.compiles.get(cids[0])
        out.append(
            Finding(
                "recompile",
                f"{name} recompiled {len(cids)}× in {f.call_count} calls "
                f"(every {f.call_count / len(cids):.1f} calls)",
                f.function,
                guard.file if guard else (comp.co_filename if comp else f.file),
                guard.line if guard else (comp.co_firstlineno if comp else f.line),
                seconds * 1000 / calls,
                None,
                next((c.remedy for c in calls_of if c.remedy), None),
                f"{seconds:.3f} s of compile time in recompiles ({', '.join(cids)}), spread over "
                f"{f.call_count} calls; each recompile's call is warm-up, left out of the call time",
                cids,
            )
        )
    if once:
        seconds = sum(cost.compile_s.get(c) or 0.0 for c in once)
        calls_of = [
            c for c in (report.calls if report else []) if c.outcome == "recompile" and c.compile_id in once
        ]
        out.append(
            Finding(
                "recompile",
                f"{len(once)} recompile(s) within the first call of {f.label} (one-time)",
                f.function,
                f.file,
                f.line,
                seconds * 1000 / calls,
                None,
                next((c.remedy for c in calls_of if c.remedy), None),
                f"{seconds:.3f} s of compile time ({', '.join(once)}) once, in the first call (warm-up); "
                f"spread over this run's {f.call_count} calls it is the figure shown, and it shrinks as a "
                "longer run makes more calls",
                once,
                recurring=False,
            )
        )
    return out


KERNELS_LISTED = 3  # without a roofline (the CPU), the largest kernels only: their time is their own work


def _kernel_findings(f: FunctionCost, share: Any, peaks: Peaks | None) -> list[Finding]:
    """On a GPU, each kernel far below its roof; on the CPU, the few largest kernels and extern calls."""
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
    return out if peaks is not None else out[:KERNELS_LISTED]


def _cudagraph_findings(cost: Cost, f: FunctionCost, share: Any) -> list[Finding]:
    """Each graph CUDA graphs skipped: what its kernel launches cost per call (what a replay would save)."""
    if not f.profiled or not any(p.on_device for p in f.profiled):
        return []
    from tcx.core.views.cudagraphs import build_cudagraphs

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
