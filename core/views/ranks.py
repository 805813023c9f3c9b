"""Multi-rank runs: a summary per rank and the first event where ranks diverge.

Ranks of one job should compile the same frames in the same order with the same guards;
when one rank recompiles, breaks differently or sees other shapes, the others wait in a
collective. Compile ids are comparable across ranks (each rank numbers its frames in
call order), so the first compile id whose facts differ is where the ranks went apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tcx.core.model import RunModel
from tcx.core.model.ranks import rank_models


@dataclass
class RankSummary:
    rank: int
    compiles: int
    graphs: int
    graph_breaks: int
    recompiles: int
    kernels: int
    failed_frames: int
    compile_time_s: float

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class Divergence:
    """The first compile id at which the ranks' facts differ, and how."""

    compile_id: str
    cause: str
    groups: list[dict[str, Any]] = field(default_factory=list)  # {"ranks": [...], "facts": {...}}
    later: list[str] = field(default_factory=list)  # other divergent compile ids

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "cause": self.cause,
            "groups": self.groups,
            "divergent_compile_ids": [self.compile_id, *self.later],
        }


def summarize(models: dict[int, RunModel]) -> list[RankSummary]:
    out = []
    for rank, m in models.items():
        out.append(
            RankSummary(
                rank=rank,
                compiles=len(m.compiles),
                graphs=m.graph_count,
                graph_breaks=len(m.graph_breaks),
                recompiles=m.recompile_count,
                kernels=m.generated_code.kernel_count,
                failed_frames=len(m.failed_compiles),
                compile_time_s=round(sum(c.compile_time_s or 0.0 for c in m.compiles.values()), 3),
            )
        )
    return out


def first_divergence(models: dict[int, RunModel]) -> Divergence | None:
    if len(models) < 2:
        return None
    return divergence_of({rank: facts_by_compile(m) for rank, m in models.items()})


def divergence_of(facts: dict[int, dict[str, dict[str, Any]]]) -> Divergence | None:
    """The first divergence from each rank's facts per compile id (core/views/rank_pool.py computes
    those in worker processes)."""
    ordered = sorted({cid for per in facts.values() for cid in per}, key=_order)
    divergent: list[tuple[str, dict[int, dict[str, Any] | None]]] = []
    for cid in ordered:
        per_rank = {rank: facts[rank].get(cid) for rank in facts}
        if len({_fingerprint(f) for f in per_rank.values()}) > 1:
            divergent.append((cid, per_rank))
    if not divergent:
        return None
    cid, per_rank = divergent[0]
    groups: dict[str, dict[str, Any]] = {}
    for rank, f in per_rank.items():
        key = _fingerprint(f)
        groups.setdefault(key, {"ranks": [], "facts": _public(f)})["ranks"].append(rank)
    group_list = sorted(groups.values(), key=lambda g: (-len(g["ranks"]), g["ranks"]))
    return Divergence(
        compile_id=cid, cause=_cause(per_rank), groups=group_list, later=[c for c, _ in divergent[1:]]
    )


def _order(cid: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", cid)
    return tuple(int(p) for p in parts) or (10**9,)


def facts_by_compile(m: RunModel) -> dict[str, dict[str, Any]]:
    facts: dict[str, dict[str, Any]] = {}
    for cid, c in m.compiles.items():
        facts[cid] = {
            "frame": f"{c.co_name} ({c.co_filename}:{c.co_firstlineno})" if c.co_name else None,
            "outcome": "failed" if c.failed else ("graph" if c.graph_count else "no graph"),
            "recompile_reason": c.recompile_reason,
            "graph_ops": c.graph_op_count,
            "graph_breaks": sorted(
                f"{b.gb_type} at line {b.line}" for b in m.graph_breaks if b.compile_id == cid
            ),
            "shapes": None,
            "guards": None,
            "cache": [],
            "collectives": None,
        }
    for tree in m.guard_sets.trees:
        f = facts.get(tree.compile_id or "")
        if f is not None and tree.text:
            f["guards"] = tree.fingerprint
    for cid, traces in m.compile_traces.items():
        f = facts.get(cid)
        if f is not None:
            f["shapes"], f["cache"], f["collectives"] = traces.shapes, list(traces.cache), traces.collectives
    return facts


def _fingerprint(f: dict[str, Any] | None) -> str:
    if f is None:
        return "absent"
    return repr(sorted((k, repr(v)) for k, v in f.items()))


def _public(f: dict[str, Any] | None) -> dict[str, Any]:
    return {"compiled": False} if f is None else {"compiled": True, **f}


def _cause(per_rank: dict[int, dict[str, Any] | None]) -> str:
    present = [r for r, f in per_rank.items() if f is not None]
    absent = [r for r, f in per_rank.items() if f is None]
    if absent:
        sample = per_rank[present[0]] or {}
        why = f" ({sample['recompile_reason']})" if sample.get("recompile_reason") else ""
        return (
            f"ranks {present} compiled this frame but ranks {absent} did not{why}: "
            "the ranks no longer run the same compiled code"
        )
    values = [f for f in per_rank.values() if f is not None]
    checks = [
        ("frame", "different functions compiled"),
        ("recompile_reason", "a recompile on some ranks only"),
        ("shapes", "different input shapes"),
        ("graph_breaks", "different graph breaks"),
        ("outcome", "different compile outcome"),
        ("cache", "cache hit on some ranks, miss on others"),
        ("collectives", "a different collective sequence"),
        ("graph_ops", "different graphs"),
        ("guards", "different guards"),
    ]
    for key, label in checks:
        seen = {repr(v.get(key)) for v in values}
        if len(seen) > 1:
            detail = "; ".join(f"rank {r}: {(per_rank[r] or {}).get(key)}" for r in per_rank)
            return f"{label} — {detail}"
    return "the ranks' compile facts differ"


def multi_rank_report(model: RunModel) -> tuple[list[RankSummary], Divergence | None]:
    models = rank_models(model)
    return summarize(models), first_divergence(models)


# --- a hung job: where each rank was when it stopped logging -------------------------------------

# Trace events that say nothing about where the rank is (timing and bookkeeping records).
_EVENT_WORDS = {
    "dynamo_start": "started tracing",
    "dynamo_output_graph": "traced the graph of",
    "compilation_metrics": "finished",
    "dynamo_cpp_guards_str": "built the guards of",
    "inductor_output_code": "generated the code of",
}


@dataclass
class RankLastEvent:
    """The last compile event a rank logged, and what it means for where the rank was."""

    rank: int
    compile_id: str | None
    event: str | None  # the trace event's name
    frame: str | None  # function (file:line)
    finished: bool  # the compile had finished (the rank went on to run code)
    events: int  # events the rank logged in all

    @property
    def description(self) -> str:
        if self.compile_id is None:
            return "logged no compile: it never reached torch.compile (or stopped before it)"
        what = f"compile {self.compile_id} of {self.frame or 'an unknown frame'}"
        if self.finished:
            return (
                f"last logged: {what} finished; after it the rank ran compiled code or other Python "
                "(a collective, data loading ...) and logged nothing more"
            )
        doing = _EVENT_WORDS.get(self.event or "", f"logged {self.event} for")
        return f"last logged: {doing} {what}; it was stopped inside this compile"

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "description": self.description}


@dataclass
class HangReport:
    """A multi-rank job stopped before it finished (tcx's timeout, SIGTERM or SIGINT)."""

    stopped_by: str  # "timeout (120 s)", "SIGTERM", "SIGINT"
    last_events: list[RankLastEvent]
    divergence: Divergence | None

    @property
    def summary(self) -> str:
        places: dict[str, list[int]] = {}
        for r in self.last_events:
            key = f"after compile {r.compile_id}" if r.finished else f"inside compile {r.compile_id}"
            places.setdefault(key if r.compile_id else "before any compile", []).append(r.rank)
        where = "; ".join(f"ranks {ranks} {place}" for place, ranks in places.items())
        head = f"The job was hung: stopped by {self.stopped_by} while its ranks were still running. "
        if len(places) > 1:
            return head + f"The ranks stopped logging at different places: {where}."
        return (
            head
            + f"Every rank stopped logging at the same place ({where}): they wait in code tcx cannot see."
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "hung": True,
            "stopped_by": self.stopped_by,
            "summary": self.summary,
            "last_events": [r.to_json() for r in self.last_events],
            "divergence": self.divergence.to_json() if self.divergence else None,
        }


def last_events(models: dict[int, RunModel]) -> list[RankLastEvent]:
    out = []
    for rank, m in models.items():
        progress = m.rank_progress(rank)
        cid = progress.last_compile_id
        comp = m.compiles.get(cid or "")
        frame = None
        if comp is not None and comp.co_name:
            frame = f"{comp.co_name} ({comp.co_filename}:{comp.co_firstlineno})"
        finished = bool(comp is not None and comp.compile_time_s is not None)
        out.append(RankLastEvent(rank, cid, progress.last_name, frame, finished, progress.events))
    return out


def hang_report(model: RunModel, stopped_by: str) -> HangReport | None:
    """Where each rank of a stopped job was: None for input from fewer than two ranks."""
    models = rank_models(model)
    if len(models) < 2:
        return None
    return HangReport(stopped_by, last_events(models), first_divergence(models))
