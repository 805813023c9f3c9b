"""What each compile attempt logged that says why torch traced the frame again: the Python floats
it traced as symbols, the symbols it then specialized, whether it broke the graph, how many graphs
it produced. Keyed by (compile id, attempt); the restarts analysis (core/analysis/restarts.py)
reads an abandoned attempt's against the next one's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tcx.core.ingest.trace_events import TraceEvent
from tcx.core.torchtext import guards as guard_text

ATTEMPT_EVENTS = (
    "create_symbol",
    "symbolic_shape_specialization",
    "artifact:dynamo_graph_break_reason",
    "dynamo_output_graph",
)


@dataclass
class AttemptLog:
    floats: dict[str, str] = field(default_factory=dict)  # float symbol (torch's `zf` prefix) -> source
    specialized: dict[str, Any] = field(default_factory=dict)  # symbol -> the value torch gave it
    broke: bool = False  # it logged a graph break
    graphs: int = 0  # Dynamo graphs it produced


def read_attempt_logs(events: Iterable[TraceEvent]) -> dict[tuple[str, int], AttemptLog]:
    """`events`: the model's ATTEMPT_EVENTS, in log order (events outside a compile left out)."""
    out: dict[tuple[str, int], AttemptLog] = {}
    for ev in events:
        cid = ev.compile_id
        if not cid:
            continue
        log = out.setdefault((cid, ev.attempt), AttemptLog())
        if ev.name == "create_symbol" and isinstance(ev.body, dict):
            symbol = str(ev.body.get("symbol", ""))
            if symbol.startswith("zf"):  # torch's SymT.FLOAT prefix
                log.floats[symbol] = guard_text.source_name(str(ev.body.get("source", "?")))
        elif ev.name == "symbolic_shape_specialization" and isinstance(ev.body, dict):
            log.specialized[str(ev.body.get("symbol"))] = ev.body.get("value")
        elif ev.name == "artifact:dynamo_graph_break_reason":
            log.broke = True
        elif ev.name == "dynamo_output_graph":
            log.graphs += 1
    return out
