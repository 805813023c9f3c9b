"""Multi-rank runs: a summary per rank and the first event where ranks diverge.

Ranks of one job should compile the same frames in the same order with the same guards;
when one rank recompiles, breaks differently or sees other shapes, the others wait in a
collective. Compile ids are comparable across ranks (each rank numbers its frames in
call order), so the first compile id whose facts differ is where the ranks went apart.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from tcx.core.analysis import RunModel, build_model
from tcx.core.codegen_view import count_kernels
from tcx.core.recording import Recording

# Object ids and addresses differ between processes even when the guards mean the same thing.
_PROCESS_SPECIFIC = re.compile(r"\b0x[0-9a-fA-F]+\b|\b\d{6,}\b")


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


def split_by_rank(rec: Recording) -> dict[int, RunModel]:
    """One model per rank (events that name no rank belong to every rank)."""
    ranks = sorted({e["md"].get("rank") for e in rec.events if e.get("kind") == "trace"} - {None})
    models = {}
    for rank in ranks:
        events = [e for e in rec.events if e.get("kind") != "trace" or e["md"].get("rank") in (rank, None)]
        models[rank] = build_model(Recording(header=rec.header, events=events, source=rec.source), "trace")
    return models


def summarize(models: dict[int, RunModel]) -> list[RankSummary]:
    out = []
    for rank, m in models.items():
        kernels = sum(
            count_kernels(ev.payload or "") for ev in m.trace_events if ev.name == "inductor_output_code"
        )
        out.append(
            RankSummary(
                rank=rank,
                compiles=len(m.compiles),
                graphs=m.graph_count,
                graph_breaks=len(m.graph_breaks),
                recompiles=m.recompile_count,
                kernels=kernels,
                failed_frames=len(m.failed_compiles),
                compile_time_s=round(sum(c.compile_time_s or 0.0 for c in m.compiles.values()), 3),
            )
        )
    return out


def first_divergence(models: dict[int, RunModel]) -> Divergence | None:
    if len(models) < 2:
        return None
    facts = {rank: _facts_by_compile(m) for rank, m in models.items()}
    ordered = sorted({cid for per in facts.values() for cid in per}, key=_order)
    divergent: list[tuple[str, dict[int, dict[str, Any] | None]]] = []
    for cid in ordered:
        per_rank = {rank: facts[rank].get(cid) for rank in models}
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


def _order(cid: str) -> tuple:
    parts = re.findall(r"\d+", cid)
    return tuple(int(p) for p in parts) or (10**9,)


def _facts_by_compile(m: RunModel) -> dict[str, dict[str, Any]]:
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
    for ev in m.trace_events:
        f = facts.get(ev.compile_id or "")
        if f is None:
            continue
        if ev.name == "dynamo_output_graph" and isinstance(ev.body, dict):
            f["shapes"] = ev.body.get("sizes")
        elif ev.name == "dynamo_cpp_guards_str" and ev.payload:
            f["guards"] = _guards_fingerprint(ev.payload)
        elif ev.name.startswith("artifact:") and "cache_" in ev.name:
            f["cache"].append(ev.name.split(":", 1)[1])
        elif "collective" in ev.name and ev.payload:  # e.g. Inductor's collective schedule
            f["collectives"] = hashlib.sha1(ev.payload.encode()).hexdigest()[:12]
    return facts


def _guards_fingerprint(tree: str) -> str:
    """Same guards, same fingerprint, across processes: ids, addresses, timings and the order in
    which a process happened to build the tree are left out."""
    lines = sorted(
        _PROCESS_SPECIFIC.sub("#", ln.strip())
        for ln in tree.splitlines()
        if ln.strip() and "Guard latency" not in ln
    )
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()[:12]


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


def multi_rank_report(rec: Recording) -> tuple[list[RankSummary], Divergence | None]:
    models = split_by_rank(rec)
    return summarize(models), first_divergence(models)
