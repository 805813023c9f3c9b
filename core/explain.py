"""The explain view's facts: distinct graph breaks ranked, failed frames, counts, the header.

Everything here is derived from `RunModel`; renderers format it and never recompute it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tcx import __version__
from tcx.core.analysis import Compile, Frame, GraphBreak, RunModel, resume_target
from tcx.core.remedies import LIBRARY_REMEDY, remedy_for

SCHEMA = "tcx.explain/1"


@dataclass
class BreakSite:
    """One distinct graph break: (type, file, line) with every occurrence of it."""

    gb_type: str
    gb_id: str | None
    file: str | None
    line: int | None
    explanation: str
    hints: list[str]
    user_stack: list[Frame]
    occurrences: list[GraphBreak]
    frame_skipped: bool
    caused: list[tuple[str, str | None]]
    suggestion: str | None
    entry_frame: Frame | None  # the user's line that led into library code, when the break is there
    regions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def function(self) -> str | None:
        return self.user_stack[-1].name if self.user_stack else None

    @property
    def in_library(self) -> bool:
        return bool(self.user_stack) and self.user_stack[-1].origin != "user"


@dataclass
class FailedFrame:
    compile_id: str
    function: str
    file: str | None
    line: int | None
    kind: str
    message: str


@dataclass
class Explanation:
    model: RunModel
    sites: list[BreakSite]
    failed_frames: list[FailedFrame]
    frames_compiled: list[str]
    function_filter: str | None = None

    @property
    def graph_break_count(self) -> int:
        return sum(len(s.occurrences) for s in self.sites)


def explain(model: RunModel, function: str | None = None) -> Explanation:
    compiles = model.compiles
    breaks = model.graph_breaks
    if function:
        compiles = _compiles_of(model, function)
        breaks = [b for b in breaks if b.compile_id in compiles or _passes_through(b, function)]
    sites = _sites(breaks, compiles)
    failed = [
        _failed_frame(c, [b for b in breaks if b.compile_id == c.compile_id])
        for c in compiles.values()
        if c.failed
    ]
    names = []
    for c in compiles.values():
        name = c.display_name
        if not c.is_resume and name not in names and not c.failed:
            names.append(name)
    return Explanation(
        model=model, sites=sites, failed_frames=failed, frames_compiled=names, function_filter=function
    )


def _compiles_of(model: RunModel, function: str) -> dict[str, Compile]:
    """Compiles of `function`, of its resume functions, of frames it called, or that broke inside it."""
    via_breaks = {b.compile_id for b in model.graph_breaks if _passes_through(b, function)}
    return {cid: c for cid, c in model.compiles.items() if cid in via_breaks or _belongs_to(c, function)}


def _belongs_to(comp: Compile, function: str) -> bool:
    resumed = resume_target(comp)
    if comp.co_name == function or (resumed and resumed[0] == function):
        return True
    return any(fr.name == function for fr in comp.stack[:-1])


def _passes_through(b: GraphBreak, function: str) -> bool:
    """The break happened while `function` was on the user's stack (in it or below it)."""
    return any(fr.name == function for fr in b.user_stack)


def _sites(breaks: list[GraphBreak], compiles: dict[str, Compile]) -> list[BreakSite]:
    groups: dict[tuple, list[GraphBreak]] = {}
    for b in breaks:
        groups.setdefault(b.key, []).append(b)
    sites = []
    for events in groups.values():
        first = events[0]
        in_library = bool(first.user_stack) and first.user_stack[-1].origin != "user"
        site = BreakSite(
            gb_type=first.gb_type,
            gb_id=first.gb_id,
            file=first.file,
            line=first.line,
            explanation=first.explanation,
            hints=first.hints,
            user_stack=first.user_stack,
            occurrences=events,
            frame_skipped=any(e.frame_skipped for e in events),
            caused=first.caused,
            suggestion=_suggestion(first, in_library),
            entry_frame=_entry_frame(first.user_stack) if in_library else None,
        )
        site.regions = [_region(e, compiles) for e in events]
        sites.append(site)
    order = {id(s): i for i, s in enumerate(sites)}
    sites.sort(key=lambda s: (not s.frame_skipped, -len(s.occurrences), order[id(s)]))
    return sites


def _suggestion(b: GraphBreak, in_library: bool) -> str | None:
    found = [remedy_for(b.gb_type, b.explanation + "\n" + b.debug_context, in_library)]
    found += [remedy_for(t, "", False) for t, _ in b.caused]
    if in_library:  # the user cannot edit the library's line: say how to fence it off
        found.append(LIBRARY_REMEDY)
    unique = list(dict.fromkeys(f for f in found if f))
    return " ".join(unique) or None


def _entry_frame(stack: list[Frame]) -> Frame | None:
    for fr in reversed(stack):
        if fr.origin == "user":
            return fr
    return None


def _region(b: GraphBreak, compiles: dict[str, Compile]) -> dict[str, Any]:
    """Which compiled region ended at this break, and where execution resumed."""
    comp = compiles.get(b.compile_id or "")
    frame_name = comp.co_name if comp else b.frame
    region: dict[str, Any] = {
        "compile_id": b.compile_id,
        "frame": comp.display_name if comp and comp.co_name else (frame_name or "an unnamed frame"),
        "graph_ops": comp.graph_op_count if comp else None,
        "graphs": comp.graph_count if comp else 0,
        "resumed_in": None,
    }
    if b.frame_skipped:
        region["resumed_in"] = "eager"
        return region
    line = _line_in_frame(b, frame_name)
    if frame_name and line is not None:
        # A resume function's own resume function is named after the original function.
        base = resume_target(comp)[0] if comp and comp.is_resume else frame_name
        name = f"torch_dynamo_resume_in_{base}_at_{line}"
        region["resume_function"] = name
        hits = [c.compile_id for c in compiles.values() if c.co_name == name]
        region["resumed_in"] = hits[0] if hits else None
    return region


def _line_in_frame(b: GraphBreak, frame_name: str | None) -> int | None:
    m = resume_target(Compile(compile_id="", co_name=frame_name))
    names = {frame_name, m[0]} if m else {frame_name}
    for fr in reversed(b.user_stack):
        if fr.name in names:
            return fr.line
    return b.line


def _failed_frame(c: Compile, breaks: list[GraphBreak]) -> FailedFrame:
    reason = c.fail_reason or c.fail_type or ""
    head = reason.strip().splitlines()[0] if reason.strip() else (c.fail_type or "")
    skipped = next((b for b in breaks if b.frame_skipped), None)
    if "recompile limit" in reason or "cache_size_limit" in reason:
        kind = "recompile limit reached"
    elif "graph break in loop" in reason or "for/while loop" in reason:
        kind = "graph break inside a loop"
    elif "generator" in reason.lower():
        kind = "graph break inside a generator"
    elif skipped is not None:
        kind = (
            f"Dynamo cannot resume after the graph break at line {skipped.line} "
            f"({skipped.gb_type}): it is inside a try/with block or similar"
        )
    else:
        kind = head
    last = c.stack[-1] if c.stack else None
    return FailedFrame(
        compile_id=c.compile_id,
        function=c.display_name,
        file=c.co_filename or (last.file if last else None),
        line=c.co_firstlineno or (last.line if last else None),
        kind=kind,
        message=reason.strip(),
    )


def to_json(ex: Explanation) -> dict[str, Any]:
    m = ex.model
    compile_ids = list({c for c in _filtered_compiles(ex)})
    return {
        "schema": SCHEMA,
        "tcx_version": __version__,
        "torch_version": m.torch_version,
        "target": m.target,
        "function": ex.function_filter,
        "backend": backend_info(m),
        "graph_count": sum(c.graph_count for c in _filtered_compiles(ex).values()),
        "graph_break_count": ex.graph_break_count,
        "unique_graph_break_count": len(ex.sites),
        "compile_count": len(compile_ids),
        "recompile_count": _recompile_count(ex),
        "failed_frame_count": len(ex.failed_frames),
        "frames_compiled": ex.frames_compiled,
        "graph_breaks": [_site_json(s) for s in ex.sites],
        "failed_frames": [vars(f) for f in ex.failed_frames],
        "program": program_status(m),
        "problems": m.problems,
        "unknown_events": dict(m.unknown_events),
        **multi_rank_json(m),
    }


def multi_rank_json(m: RunModel) -> dict[str, Any]:
    """`ranks[]` and `divergence` for input from several ranks (absent for one process)."""
    if len(m.ranks) < 2 or m.recording is None:
        return {}
    from tcx.core.ranks import multi_rank_report

    summaries, divergence = multi_rank_report(m.recording)
    return {
        "ranks": [r.to_json() for r in summaries],
        "divergence": divergence.to_json() if divergence else None,
        "rank_divergence_count": len(divergence.to_json()["divergent_compile_ids"]) if divergence else 0,
    }


def _filtered_compiles(ex: Explanation) -> dict[str, Compile]:
    if not ex.function_filter:
        return ex.model.compiles
    return _compiles_of(ex.model, ex.function_filter)


def _recompile_count(ex: Explanation) -> int:
    if not ex.function_filter:
        return ex.model.recompile_count
    return sum(1 for c in _filtered_compiles(ex).values() if c.recompile_reason)


def _site_json(s: BreakSite) -> dict[str, Any]:
    return {
        "type": s.gb_type,
        "gb_id": s.gb_id,
        "file": s.file,
        "line": s.line,
        "function": s.function,
        "occurrences": len(s.occurrences),
        "explanation": s.explanation,
        "hints": s.hints,
        "suggestion": s.suggestion,
        "frame_skipped": s.frame_skipped,
        "caused": [{"type": t, "gb_id": g} for t, g in s.caused],
        "in_library": s.in_library,
        "entered_from": s.entry_frame.to_json() if s.entry_frame else None,
        "user_stack": [f.to_json() for f in s.user_stack],
        "compile_ids": [e.compile_id for e in s.occurrences],
        "regions": s.regions,
    }


def envelope(schema: str, m: RunModel) -> dict[str, Any]:
    """The keys every view's JSON starts with (the contract in the README)."""
    return {
        "schema": schema,
        "tcx_version": __version__,
        "torch_version": m.torch_version,
        "target": m.target,
        "source_kind": m.source_kind,
        "backend": backend_info(m),
        "program": program_status(m),
    }


def backend_info(m: RunModel) -> dict[str, Any]:
    rs = m.run_start or {}
    asked = sorted({str(c.get("asked", {}).get("backend", "inductor")) for c in m.compile_calls})
    return {"name": rs.get("backend"), "reason": rs.get("backend_reason"), "program_asked": asked}


def program_status(m: RunModel) -> dict[str, Any]:
    """How the target ended: ok, exception, exit, crash, timeout (what the parent and child saw)."""
    pe = m.program_exit or {}
    oc = m.outcome or {}
    status = pe.get("status")
    if oc.get("timed_out"):
        status = "timeout"
    elif status is None and oc:
        status = "crashed" if oc.get("signal") else "died"
    elif status is None:
        status = "unknown" if m.source_kind != "trace" else "not recorded"
    return {
        "status": status,
        "exit_code": pe.get("exit_code", oc.get("returncode")),
        "exc_type": pe.get("exc_type"),
        "message": pe.get("message"),
        "traceback": pe.get("traceback"),
        "signal": oc.get("signal"),
        "timeout_s": oc.get("timeout_s"),
        "output_tail": oc.get("output_tail"),
    }
