"""What the ranks of a multi-rank job compare: per compile, the facts a trace log holds beyond the
compile's own (its graph's input sizes, the cache artifacts it logged, Inductor's collective
schedule); per rank, how far it logged (a stopped job's ranks wait in different places).

Read from each rank's model (core/model/ranks.py); the ranks view (first divergence, hang report)
compares them across ranks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tcx.core.ingest.trace_events import TraceEvent

COMPARED = ("dynamo_output_graph", "artifact:*cache_*", "artifact:*collective*")
# Events that say nothing of where a rank is in its compiles.
QUIET_EVENTS = frozenset({"chromium_event", "str", "link", "dump_file", "stack"})


@dataclass
class CompileTraces:
    """One compile's logged facts that ranks compare."""

    shapes: Any = None  # Dynamo's graph's input sizes (`sizes` of dynamo_output_graph)
    cache: list[str] = field(default_factory=list)  # the cache artifacts it logged, by name
    collectives: str | None = None  # a digest of Inductor's collective schedule


@dataclass(frozen=True)
class RankProgress:
    """How far one rank logged: its own events, and the last one that names a compile."""

    events: int
    last_name: str | None
    last_compile_id: str | None


def read_compile_traces(events: Iterable[TraceEvent]) -> dict[str, CompileTraces]:
    """`events`: the model's COMPARED documents, in log order (the last of each kind wins)."""
    out: dict[str, CompileTraces] = {}
    for ev in events:
        f = out.setdefault(ev.compile_id or "", CompileTraces())
        if ev.name == "dynamo_output_graph" and isinstance(ev.body, dict):
            f.shapes = ev.body.get("sizes")
        elif ev.name.startswith("artifact:") and "cache_" in ev.name:
            f.cache.append(ev.name.split(":", 1)[1])
        elif "collective" in ev.name and ev.payload:  # e.g. Inductor's collective schedule
            f.collectives = hashlib.sha1(ev.payload.encode()).hexdigest()[:12]
    return out


def rank_progress(events: Iterable[TraceEvent], rank: int) -> RankProgress:
    """`events`: every document of a rank's model (events that name no rank belong to all)."""
    own = [e for e in events if e.rank == rank]
    last = next((e for e in reversed(own) if e.compile_id and e.name not in QUIET_EVENTS), None)
    return RankProgress(len(own), last.name if last else None, last.compile_id if last else None)
