"""The graphs each compile logged, by stage: Dynamo's FX graph, AOTAutograd's joint, forward,
backward or inference graph, Inductor's post-grad graphs; and the partitioner's log lines.

A run's graphs are most of its log: the model keeps each graph's payload reference and a view reads
the text when it asks for it (a log's payloads stay on disk, core/ingest/trace_lazy.py). The graphs
view (saved for backward, recomputed ops) and the TUI's stages read the same graphs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tcx.core.ingest.trace_events import TraceEvent

GRAPH_EVENTS = {
    "dynamo_output_graph": "dynamo",
    "aot_joint_graph": "joint",
    "aot_forward_graph": "forward",
    "aot_backward_graph": "backward",
    "aot_inference_graph": "inference",
    "artifact:inductor_post_grad_graph": "post_grad",
}


class GraphTexts(Mapping[str, str]):
    """Kind (dynamo, joint, forward, backward, inference, post_grad_*) -> the graph's text, read
    from its event when asked for (a view over many compiles needs one compile's at a time)."""

    def __init__(self) -> None:
        self._events: dict[str, TraceEvent] = {}

    def add(self, kind: str, ev: TraceEvent) -> None:
        self._events.setdefault(kind, ev)

    def __getitem__(self, kind: str) -> str:
        return self._events[kind].payload or ""

    def __iter__(self) -> Iterator[str]:
        return iter(self._events)

    def __len__(self) -> int:
        return len(self._events)


class GraphText:
    """One logged graph's text, read from its event when asked for."""

    def __init__(self, event: TraceEvent) -> None:
        self._event = event

    @property
    def text(self) -> str:
        return self._event.payload or ""


@dataclass
class Graphs:
    """Per compile id ("?" for a graph logged outside a compile), in the order torch logged them."""

    texts: dict[str, GraphTexts] = field(default_factory=dict)  # the graphs with a text
    # every stage that logged a graph (post-grad graphs as "post_grad"), an empty one too
    logged: dict[str | None, set[str]] = field(default_factory=dict)
    partitioner_log: dict[Any, list[str]] = field(default_factory=dict)  # the partitioner's lines
    # every post-grad graph of a compile ("" for none), in log order (forward, then backward), empty
    # ones too: Inductor's output code names their nodes
    post_grad: dict[str, list[GraphText]] = field(default_factory=dict)
    # every graph of a compile (None: logged outside one), as (event name, text), in log order
    every: dict[str | None, list[tuple[str, GraphText]]] = field(default_factory=dict)


def read_graphs(events: Iterable[TraceEvent], partitioner: Iterable[dict[str, Any]]) -> Graphs:
    """`events`: the run's GRAPH_EVENTS in log order; `partitioner`: the recorder's partitioner_log."""
    out = Graphs()
    for ev in events:
        kind = GRAPH_EVENTS[ev.name]
        out.logged.setdefault(ev.compile_id, set()).add(kind)
        out.every.setdefault(ev.compile_id, []).append((ev.name, GraphText(ev)))
        if kind == "post_grad":
            out.post_grad.setdefault(ev.compile_id or "", []).append(GraphText(ev))
        if not ev.packed:
            continue  # (`packed`: an empty payload, without reading one left on disk)
        graphs = out.texts.setdefault(ev.compile_id or "?", GraphTexts())
        if kind == "post_grad":  # a compile's post-grad graphs come forward first, then backward
            kind = "post_grad_backward" if "post_grad_forward" in graphs else "post_grad_forward"
            if "forward" not in graphs and "backward" not in graphs:
                kind = "post_grad_inference"
        graphs.add(kind, ev)
    for logged in partitioner:
        out.partitioner_log.setdefault(logged.get("compile_id"), []).append(str(logged.get("message", "")))
    return out
