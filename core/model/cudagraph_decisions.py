"""CUDA-graph decisions per graph, as the recorder captured them (`tcx cudagraphs`).

Per compiled graph: how Inductor partitioned it for CUDA graphs (`partitions`, each node's reason),
what it decided (`decided`: fail reasons, mutated inputs), whether the graph was wrapped
(`cudagraphified`), how many times it was captured, and each `skip` torch logged with its reason.
The cudagraphs view judges them; the same decisions come from a GPU run or the CUDA preview.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

_PER_GRAPH = ("partitions", "decided", "cudagraphified", "captured", "skip")


@dataclass
class GraphDecisions:
    """One graph's CUDA-graph events (the first `partitions` and `decided` of each, as recorded)."""

    compile_id: str | None
    graph: str | None  # forward, backward, inference
    partitions: dict[str, Any] | None = None
    decided: dict[str, Any] | None = None
    wrapped: bool = False
    captured: int = 0
    skips: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Cudagraphs:
    graphs: list[GraphDecisions]  # in the order their first event was recorded
    compile_ids: list[str | None]  # the compile of every cudagraph event, in order


def read_cudagraphs(captures: Iterable[dict[str, Any]]) -> Cudagraphs:
    graphs: dict[tuple[Any, Any], GraphDecisions] = {}
    compile_ids: list[str | None] = []
    for e in captures:
        compile_ids.append(e.get("compile_id"))
        event = e.get("event")
        if event not in _PER_GRAPH:
            continue
        key = (e.get("compile_id"), e.get("graph"))
        g = graphs.setdefault(key, GraphDecisions(*key))
        if event == "partitions" and g.partitions is None:
            g.partitions = e
        elif event == "decided" and g.decided is None:
            g.decided = e
        elif event == "cudagraphified":
            g.wrapped = True
        elif event == "captured":
            g.captured += 1
        elif event == "skip":
            g.skips.append(e)
    return Cudagraphs(list(graphs.values()), compile_ids)
