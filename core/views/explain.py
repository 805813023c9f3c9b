"""The explain view's facts: distinct graph breaks ranked, failed frames, counts, the header.

Everything here is derived from `RunModel`; renderers format it and never recompute it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tcx.core.analysis.library_branch import head_suggestions
from tcx.core.analysis.remedies import LIBRARY_REMEDY, remedy_for, structural_remedy
from tcx.core.analysis.restarts import Restart, restarts
from tcx.core.model import Compile, Frame, GraphBreak, Recompile, RunModel, resume_target
from tcx.core.model.frame_names import decorated_names, frame_name
from tcx.core.selection import Selection, whole_run
from tcx.core.torchtext.names import parse_resume, resume_name
from tcx.core.views.envelope import envelope

if TYPE_CHECKING:
    from tcx.core.views.ranks import Divergence, RankSummary

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
    measured_ms: float | None = None  # eager ms per step this break causes, when `tcx cost` measured it

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
    selection: Selection
    compiles: dict[str, Compile]  # the selected compiles
    sites: list[BreakSite]
    failed_frames: list[FailedFrame]
    frames_compiled: list[str]
    restarts: list[Restart] = field(default_factory=list)  # attempts torch threw away, with torch's reason
    # compile id -> the method a decorator's frame wraps, from its guards (core/views/frame_names.py)
    frame_names: dict[str, str] = field(default_factory=dict)

    def frame_name(self, compile_id: str | None, fallback: str = "?") -> str:
        """A compile's frame as the user knows it: the method its decorator wraps, when known."""
        comp = self.model.compiles.get(compile_id or "")
        return frame_name(comp, self.frame_names, fallback)

    @property
    def graph_count(self) -> int:
        return sum(c.graph_count for c in self.compiles.values())

    @property
    def graph_break_count(self) -> int:
        return sum(len(s.occurrences) for s in self.sites)

    @property
    def unique_graph_break_count(self) -> int:
        return len(self.sites)

    @property
    def compile_count(self) -> int:
        return len(self.compiles)

    @property
    def recompile_count(self) -> int:
        return len(self.recompiles)

    @property
    def recompiles(self) -> list[Recompile]:
        return [r for r in self.model.recompiles if self.selection.includes(r.compile_id)]

    @property
    def failed_frame_count(self) -> int:
        return len(self.failed_frames)

    @functools.cached_property
    def ranks(self) -> tuple[list[RankSummary], Divergence | None] | None:
        """Per-rank summaries and the first divergence, for input from several ranks (built once)."""
        m = self.model
        if len(m.ranks) < 2:
            return None
        from tcx.core.views.rank_pool import rank_report

        return rank_report(m)

    @property
    def rank_divergence_count(self) -> int:
        divergence = self.ranks[1] if self.ranks else None
        return 1 + len(divergence.later) if divergence else 0


def explain(model: RunModel, selection: Selection | None = None) -> Explanation:
    selection = selection or whole_run(model)
    compiles = {cid: c for cid, c in model.compiles.items() if selection.includes(cid)}
    breaks = [
        b for b in model.graph_breaks if selection.includes(b.compile_id) and selection.shows_site(b.key)
    ]
    sites = _sites(breaks, model.compiles)  # a region names its resume compile, selected or not
    head_suggestions(model, sites)  # a library branch a setting of the compiled module removes
    _rank_by_measured_cost(model, selection, sites)
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
        model=model,
        selection=selection,
        compiles=compiles,
        sites=sites,
        failed_frames=failed,
        frames_compiled=names,
        restarts=[r for r in restarts(model) if r.compile_id in compiles],
        frame_names=decorated_names(model),
    )


def _sites(breaks: list[GraphBreak], compiles: dict[str, Compile]) -> list[BreakSite]:
    resumes = _ResumeCompiles(compiles)
    groups: dict[tuple[Any, ...], list[GraphBreak]] = {}
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
        site.regions = [_region(e, compiles, resumes) for e in events]
        sites.append(site)
    order = {id(s): i for i, s in enumerate(sites)}
    sites.sort(key=lambda s: (not s.frame_skipped, -len(s.occurrences), order[id(s)]))
    return sites


def _rank_by_measured_cost(model: RunModel, selection: Selection, sites: list[BreakSite]) -> None:
    """Worst first by what each break costs per step when the run was measured (`tcx cost`); the
    order above breaks ties and ranks what was not measured."""
    from tcx.core.cost.measurements import measured_break_ms

    measured = measured_break_ms(model, selection)
    if not measured:
        return
    for s in sites:
        s.measured_ms = measured.get((s.gb_type, s.file, s.line))
    sites.sort(key=lambda s: -(s.measured_ms or 0.0))


def _suggestion(b: GraphBreak, in_library: bool) -> str | None:
    structural = structural_remedy(b.gb_type, b.user_stack)  # backward()/step()/zero_grad() compiled
    if structural:
        return structural
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


class _ResumeCompiles:
    """Which compile of a resume function a break resumed in: the first one after the compile that
    broke (a recompile of the function resumes in the resume function's own recompile)."""

    def __init__(self, compiles: dict[str, Compile]) -> None:
        self.order = {cid: i for i, cid in enumerate(compiles)}
        self.by_name: dict[str, list[str]] = {}
        for cid, comp in compiles.items():
            if comp.co_name:
                self.by_name.setdefault(comp.co_name, []).append(cid)

    def of(self, name: str, broke_in: str | None) -> str | None:
        found = self.by_name.get(name, [])
        after = self.order.get(broke_in or "", -1)
        return next((cid for cid in found if self.order[cid] > after), found[0] if found else None)


def _region(b: GraphBreak, compiles: dict[str, Compile], resumes: _ResumeCompiles) -> dict[str, Any]:
    """Which compiled region ended at this break, and where execution resumed (`compiles`: every
    compile of the run, so a selection of one compile still names the compile it resumed in)."""
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
        target = resume_target(comp) if comp and comp.is_resume else None
        base = target[0] if target else frame_name
        name = resume_name(base, line)
        region["resume_function"] = name
        region["resumed_in"] = resumes.of(name, b.compile_id)
    return region


def _line_in_frame(b: GraphBreak, frame_name: str | None) -> int | None:
    m = parse_resume(frame_name)
    names = {frame_name, m[0]} if m else {frame_name}
    for fr in reversed(b.user_stack):
        if fr.name in names:
            return fr.line
    return b.line


def _failed_frame(c: Compile, breaks: list[GraphBreak]) -> FailedFrame:
    reason = c.fail_reason or c.fail_type or ""
    lines = [ln.strip() for ln in reason.splitlines() if ln.strip()]
    # "backend='x' raised:" says what comes next: the first line alone would end in a colon.
    head = " ".join(lines[:2]) if lines[:1] and lines[0].endswith(":") else (lines[0] if lines else "")
    head = head or c.fail_type or ""
    skipped = next((b for b in breaks if b.frame_skipped), None)
    if "recompile limit" in reason or "cache_size_limit" in reason:
        kind = "recompile limit reached"
    elif "graph break in loop" in reason or "for/while loop" in reason:
        kind = "graph break inside a loop"
    elif "generator" in reason.lower():
        kind = "graph break inside a generator"
    elif skipped is not None and skipped.gb_type == "Backend compiler exception":
        kind = f"the backend failed on the graph ending at line {skipped.line}; torch falls back to eager"
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
    return {
        **envelope(SCHEMA, m, ex.selection),
        "graph_count": ex.graph_count,
        "graph_break_count": ex.graph_break_count,
        "unique_graph_break_count": ex.unique_graph_break_count,
        "compile_count": ex.compile_count,
        "recompile_count": ex.recompile_count,
        "failed_frame_count": ex.failed_frame_count,
        "frames_compiled": ex.frames_compiled,
        "frame_names": ex.frame_names,
        "restarts": [r.to_json() for r in ex.restarts],
        "graph_breaks": [_site_json(s) for s in ex.sites],
        "failed_frames": [vars(f) for f in ex.failed_frames],
        "problems": m.problems,
        "unknown_events": dict(m.unknown_events),
        **multi_rank_json(ex),
    }


def multi_rank_json(ex: Explanation) -> dict[str, Any]:
    """`ranks[]` and `divergence` for input from several ranks (absent for one process)."""
    if ex.ranks is None:
        return {}
    summaries, divergence = ex.ranks
    return {
        "ranks": [r.to_json() for r in summaries],
        "divergence": divergence.to_json() if divergence else None,
        "rank_divergence_count": ex.rank_divergence_count,
    }


def site_brief(s: BreakSite) -> dict[str, Any]:
    """A break site in a few keys: what a child process's summary keeps of each."""
    return {
        "type": s.gb_type,
        "gb_id": s.gb_id,
        "file": s.file,
        "line": s.line,
        "function": s.function,
        "occurrences": len(s.occurrences),
    }


def _site_json(s: BreakSite) -> dict[str, Any]:
    return {
        **site_brief(s),
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
        "measured_ms_per_step": s.measured_ms,
    }
