"""`tcx report`: the whole run at a glance, then every view — built from ONE recording.

The overview gives each compiled frame's pipeline in one line (Dynamo → AOTAutograd →
Inductor → runtime), compile time per phase, the top problems ranked by what they cost, and a
guide: what each view's section holds for this run and how long it is (the terminal prints the
overview alone unless --full). The views follow: every view of the registry (core/views/registry.py)
with a report section, built on the same Selection. A view that cannot be built says why instead of
sinking the report.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from tcx.core.analysis.expected import Expected, split_recompiles
from tcx.core.model import RunModel
from tcx.core.model.frame_names import frame_name
from tcx.core.selection import Selection, whole_run
from tcx.core.views.envelope import envelope
from tcx.core.views.explain import Explanation, explain
from tcx.core.views.explain import to_json as explain_json
from tcx.core.views.registry import all_captures, report_views
from tcx.core.views.run_facts import phase_totals

T = TypeVar("T")

if TYPE_CHECKING:
    from tcx.core.views.graphs import CompileGraphs
    from tcx.core.views.recompiles import RecompileReport

SCHEMA = "tcx.report/1"
# Every capture the views use: the report runs the program once with all of them.
CAPTURES = all_captures()
_ATEN_OP = re.compile(r"= torch\.ops\.")


@dataclass
class Problem:
    rank: int  # lower is worse
    kind: str
    title: str
    detail: str
    where: str | None = None
    ms_per_step: float | None = None  # what it costs per step, when `tcx cost` measured the run

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class AotStage:
    """What AOTAutograd made of one compile (None: the graphs view has no graph of it)."""

    forward_ops: int | None = None
    backward_ops: int | None = None
    inference_ops: int | None = None
    saved_bytes: int | None = None
    saved_extra_bytes: int | None = None
    verdict: str | None = None


@dataclass(frozen=True)
class PipelineRow:
    """One compile through the pipeline: Dynamo, AOTAutograd, Inductor, the runtime."""

    compile_id: str
    frame: str
    file: str | None
    line: int | None
    failed: bool
    recompile_reason: str | None
    instructions: int | None  # Dynamo's traced instructions (the trace view's count)
    graph_nodes: int | None
    graph_breaks: int
    aot: AotStage
    kernels: int
    extern_calls: int
    guards: int | None  # torch's guard count (compilation_metrics)
    compile_time_s: float | None

    @property
    def recompiled(self) -> bool:
        return bool(self.recompile_reason)

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "frame": self.frame,
            "file": self.file,
            "line": self.line,
            "failed": self.failed,
            "recompile_reason": self.recompile_reason,
            "dynamo": {
                "instructions": self.instructions,
                "graph_nodes": self.graph_nodes,
                "graph_breaks": self.graph_breaks,
            },
            "aot": dict(vars(self.aot)),
            "inductor": {"kernels": self.kernels, "extern_calls": self.extern_calls},
            "runtime": {"guards": self.guards, "recompiled": self.recompiled},
            "compile_time_s": self.compile_time_s,
        }


@dataclass(frozen=True)
class ViewGuide:
    """What one view's section holds for this run, in a phrase, and about how long it is: the
    overview's map of the report (the sections themselves print with `--full`)."""

    name: str
    title: str
    shows: str
    lines: int | None = None  # estimated printed lines (core/views/index.py); None: not estimated
    empty: bool = False  # nothing to show for this run (an export section of a run that never exports)

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class Report:
    model: RunModel
    selection: Selection
    explanation: Explanation
    views: dict[str, Any]  # view name -> its view object (None when it could not be built)
    pipeline: list[PipelineRow]
    problems: list[Problem]
    compile_time_s: dict[str, float] = field(default_factory=dict)
    # view name -> why it could not be built, serialised or rendered (its section says so)
    failures: dict[str, str] = field(default_factory=dict)
    cost: Any = None  # core/views/cost.Cost when the recording holds a cost measurement (`tcx cost`)
    guide: list[ViewGuide] = field(default_factory=list)  # one per view section, in reading order
    expected: list[Expected] = field(default_factory=list)  # listed apart from the problems, never ranked

    @functools.cached_property
    def docs(self) -> dict[str, dict[str, Any]]:
        """View name -> its JSON document, or {"unavailable": why}. Made when first asked for (the
        JSON report): the text and HTML reports print the views instead, and on a big run the
        documents cost seconds that nobody would read."""
        docs: dict[str, dict[str, Any]] = {"explain": explain_json(self.explanation)}
        for view in report_views():
            if view.name == "explain":
                continue
            if self.views.get(view.name) is not None:
                try:
                    docs[view.name] = view.serializer()(self.views[view.name])
                    continue
                except Exception as exc:  # one view failing must not sink the report
                    self.failed(view.name, "built", exc)
            docs[view.name] = {"unavailable": self.failures[view.name]}
        return docs

    def failed(self, view: str, what: str, exc: Exception) -> str:
        """Record why `view` could not be `what` ("built", "rendered"); the message."""
        why = _failure(view, what, exc)
        self.failures.setdefault(view, why)
        return why


def _failure(view: str, what: str, exc: Exception) -> str:
    return f"{view} view could not be {what}: {type(exc).__name__}: {exc}"


def build_report(model: RunModel, selection: Selection | None = None) -> Report:
    selection = selection or whole_run(model)
    ex = explain(model, selection)
    views: dict[str, Any] = {}
    failures: dict[str, str] = {}
    for view in report_views():
        if view.name == "explain":
            continue
        try:
            views[view.name] = view.builder()(model, selection)
        except Exception as exc:  # one view failing must not sink the report
            views[view.name] = None
            failures[view.name] = _failure(view.name, "built", exc)
    cost = _cost(model, selection, failures)
    problems = _problems(ex, views.get("recompiles"))
    if cost is not None:
        _rank_by_measured_cost(problems, cost)
    pipeline = _pipeline(model, selection, views, failures, ex.frame_names)
    return Report(
        model=model,
        selection=selection,
        explanation=ex,
        views=views,
        failures=failures,
        pipeline=pipeline,
        problems=problems,
        compile_time_s=phase_totals(model, selection),
        cost=cost,
        guide=_guide(model, selection, ex, views, failures, pipeline),
        expected=split_recompiles(ex.recompile_count, getattr(views.get("recompiles"), "calls", [])).expected,
    )


def _guide(
    model: RunModel,
    selection: Selection,
    ex: Explanation,
    views: dict[str, Any],
    failures: dict[str, str],
    pipeline: list[PipelineRow],
) -> list[ViewGuide]:
    """Each section's phrase, from the counts already made (nothing is parsed for it)."""
    from tcx.core.views import index as run_index

    kernels = sum(r.kernels for r in pipeline)
    externs = sum(r.extern_calls for r in pipeline)
    aot = sum(1 for r in pipeline if r.aot.forward_ops is not None or r.aot.inference_ops is not None)
    guards = sum(r.guards or 0 for r in pipeline)
    traced = [r.instructions for r in pipeline if r.instructions is not None]
    no_inductor = "no Inductor output in this run (its backend is not Inductor, or nothing compiled)"
    n_sites, n_recompiles = ex.unique_graph_break_count, ex.recompile_count
    shows: dict[str, tuple[str, bool]] = {
        "explain": (
            (
                f"{_n(n_sites, 'distinct graph break')} ({ex.graph_break_count} events), each at your line"
                if n_sites
                else "no graph breaks"
            )
            + (f"; {_n(ex.failed_frame_count, 'frame')} Dynamo gave up on" if ex.failed_frames else ""),
            False,
        ),
        "recompiles": (
            f"{_n(n_recompiles, 'recompile')}: which call recompiled and the guard that failed"
            if n_recompiles
            else "no recompiles: the cache entry of each frame served every later call",
            False,
        ),
        "guards": (f"{_n(guards, 'guard')} (torch's count) over {_n(len(pipeline), 'compile')}", False),
        "trace": (f"the {sum(traced):,} instructions Dynamo traced in {_n(len(traced), 'compile')}", False),
        "bytecode": ("the bytecode Dynamo rewrote each frame into", False),
        "graphs": (
            f"{_n(ex.graph_count, 'Dynamo graph')}; AOTAutograd's graphs of {_n(aot, 'compile')}",
            False,
        ),
        "fusion": (f"how Inductor fused nodes into its {kernels} kernels" if kernels else no_inductor, False),
        "codegen": (
            f"{_n(kernels, 'kernel')}, {_n(externs, 'extern call')}" if kernels else no_inductor,
            False,
        ),
        "cache": ("compile time per phase and the compile caches' lookups", False),
    }
    export = views.get("export")
    if export is not None:
        n_exports = export.export_count
        shows["export"] = (
            f"{_n(n_exports, 'torch.export call')}, {export.failed_export_count} failed"
            if n_exports or export.aoti
            else "no torch.export call in this run",
            not (n_exports or export.aoti or export.unavailable),
        )
    out = []
    for view in report_views():
        phrase, empty = shows.get(view.name, ("", False))
        unavailable = getattr(views.get(view.name), "unavailable", None)
        if view.name in failures:
            phrase, empty = failures[view.name], False
        elif unavailable and view.name != "export":
            phrase = f"not available: {unavailable}"
        lines = (
            run_index.estimated_lines(view.name, model, selection)
            if view.name in run_index.SHOWN_EVENTS
            else None
        )
        if lines is not None and lines <= run_index.LINES_PER_COMPILE * len(selection.compile_ids):
            lines = None  # titles and notes only: the view has no payload to show

        out.append(ViewGuide(view.name, str(view.report_title), phrase, lines, empty))
    return out


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _cost(model: RunModel, selection: Selection, failures: dict[str, str]) -> Any:
    """The run's cost measurement, when it has one (a `tcx cost` recording)."""
    from tcx.core.cost.measurements import has_cost
    from tcx.core.views.cost import build_cost

    if not has_cost(model):
        return None
    try:
        return build_cost(model, selection)
    except Exception as exc:  # one view failing must not sink the report
        failures["cost"] = _failure("cost", "built", exc)
        return None


def _rank_by_measured_cost(problems: list[Problem], cost: Any) -> None:
    """Top problems ranked by measured ms per step: each break at its site, the skipped frames, the
    recompiles that recur in steady state (a one-time compile is not a per-step cost); the program's
    own failure stays first and what was not measured keeps its order after what was."""
    by_where: dict[str, float] = {}
    by_kind: dict[str, float] = {}
    for f in cost.per_step:
        where = f"{f.file}:{f.line}"
        if f.kind == "graph_break":
            by_where[where] = by_where.get(where, 0.0) + f.ms_per_step
        elif f.kind in ("recompile", "skipped_frame"):
            kind = "recompiles" if f.kind == "recompile" else "failed frame"
            by_kind[kind] = by_kind.get(kind, 0.0) + f.ms_per_step
    for p in problems:
        if p.kind == "graph break":
            p.ms_per_step = by_where.get(p.where or "")
        elif p.kind in by_kind:
            p.ms_per_step = by_kind[p.kind]
    problems.sort(key=lambda p: (p.kind != "program", p.ms_per_step is None, -(p.ms_per_step or 0.0), p.rank))


def _pipeline(
    model: RunModel,
    selection: Selection,
    views: dict[str, Any],
    failures: dict[str, str],
    names: dict[str, str],
) -> list[PipelineRow]:
    """One line per compile: what each stage made of it (a view that could not be built: None).
    Views parse their payloads when first read, so a payload that breaks a parser does so here:
    that view's section then says why (`_summed`), and the rest of the line stands."""
    instructions: dict[str, int] = _summed(
        "trace",
        views,
        failures,
        lambda: {
            c.frame.compile_id: len(c.instructions) for c in views["trace"].compiles if not c.frame.attempt
        },
        {},
    )
    aot: dict[str, AotStage] = _summed(
        "graphs", views, failures, lambda: {c.compile_id: _aot(c) for c in views["graphs"].compiles}, {}
    )
    counted: tuple[Counter[str | None], Counter[str | None]] = _summed(
        "codegen", views, failures, lambda: views["codegen"].counts_by_compile(), (Counter(), Counter())
    )
    kernels, externs = counted
    breaks = Counter(b.compile_id or "?" for b in model.graph_breaks)
    rows = []
    for cid, comp in model.compiles.items():
        if not selection.includes(cid):
            continue
        rows.append(
            PipelineRow(
                compile_id=cid,
                frame=frame_name(comp, names),
                file=comp.co_filename,
                line=comp.co_firstlineno,
                failed=comp.failed,
                recompile_reason=comp.recompile_reason,
                instructions=instructions.get(cid),
                graph_nodes=comp.graph_op_count,
                graph_breaks=breaks.get(cid, 0),
                aot=aot.get(cid) or AotStage(),
                kernels=kernels.get(cid, 0),
                extern_calls=externs.get(cid, 0),
                guards=comp.guard_count,
                compile_time_s=comp.compile_time_s,
            )
        )
    return rows


def _summed(name: str, views: dict[str, Any], failures: dict[str, str], sums: Callable[[], T], empty: T) -> T:
    """`sums()` over view `name`; `empty` when the view is missing or breaks (it is then reported)."""
    if views.get(name) is None:
        return empty
    try:
        return sums()
    except Exception as exc:  # one view failing must not sink the report
        views[name] = None
        failures[name] = _failure(name, "built", exc)
        return empty


def _aot(g: CompileGraphs) -> AotStage:
    texts = g.graphs
    return AotStage(
        forward_ops=_ops(texts.get("forward")),
        backward_ops=_ops(texts.get("backward")),
        inference_ops=_ops(texts.get("inference")),
        saved_bytes=g.saved_bytes,
        saved_extra_bytes=g.saved_extra_bytes,
        verdict=g.verdict(),
    )


def _ops(text: str | None) -> int | None:
    return len(_ATEN_OP.findall(text)) if text else None


def _problems(ex: Explanation, recompiles: RecompileReport | None) -> list[Problem]:
    out: list[Problem] = []
    for f in ex.failed_frames:
        out.append(
            Problem(
                0,
                "failed frame",
                f"{ex.frame_name(f.compile_id, f.function)} runs in eager Python",
                f.kind,
                f"{f.file}:{f.line}",
            )
        )
    limit = recompiles.limit if recompiles else {}
    if limit.get("hit"):
        out.append(
            Problem(
                0,
                "recompile limit",
                f"{limit.get('config')} ({limit.get('limit')}) reached",
                "later calls of that frame run in eager Python; see the recompiles view",
            )
        )
    for s in ex.sites:
        rank = 1 if s.frame_skipped else 2
        out.append(
            Problem(
                rank,
                "graph break",
                f"{s.gb_type} ×{len(s.occurrences)}",
                s.suggestion or s.explanation,
                f"{s.file}:{s.line}",
            )
        )
    split = split_recompiles(ex.recompile_count, recompiles.calls if recompiles else [])
    if split.count:  # expected recompiles (grad mode: train and eval) are Report.expected, never ranked
        causes = [c.rstrip(". ") for c in split.causes]  # sentences joined: one period, at the end
        detail = "; ".join(causes) + "." if causes else "see the recompiles view"
        out.append(Problem(3, "recompiles", f"{split.count} recompile(s)", detail))
    status = ex.model.status.program
    if status.failed:
        out.append(Problem(0, "program", f"the program ended: {status.status}", str(status.message or "")))
    out.sort(key=lambda p: p.rank)
    return out


def to_json(report: Report) -> dict[str, Any]:
    return {
        **envelope(SCHEMA, report.model, report.selection),
        "pipeline": [row.to_json() for row in report.pipeline],
        "compile_time_s": report.compile_time_s,
        "problems": [p.to_json() for p in report.problems],
        "guide": [g.to_json() for g in report.guide],
        "expected": [e.to_json() for e in report.expected],
        "views": report.docs,
        "cost": _cost_json(report),
    }


def _cost_json(report: Report) -> dict[str, Any] | None:
    if report.cost is None:
        return None
    from tcx.core.views.cost import to_json as cost_json

    return cost_json(report.cost)
