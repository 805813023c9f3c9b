"""Build the run model in one pass over a recording's (or a log's) events.

As tlparse's parsers do, each consumer declares the events it takes (trace events by name,
recorder events by kind) and one loop hands each event to the consumers that declared it; at the
end each consumer writes its facts. The names tcx understands (`KNOWN_EVENTS`) are the consumers'
together with the document kinds the views read (core/model/run.py DOCUMENT_KINDS): what is
neither is counted as shown raw.

Pure and torch-free: the same build serves a live run, a saved recording and a TORCH_TRACE log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Protocol

from tcx.core.ingest.recording import Recording
from tcx.core.ingest.source_roots import recorded_roots
from tcx.core.ingest.trace_events import TraceEvent, normalize, qualified, ranks_of
from tcx.core.ingest.trace_lazy import LogRecord
from tcx.core.model.consumers import CONSUMERS, Facts
from tcx.core.model.run import DOCUMENT_KINDS, Captures, Documents, RunModel


class Consumer(Protocol):
    """One fact family's builder: the events it takes, and what it makes of them."""

    TRACE: frozenset[str]  # trace event names ("artifact:NAME" for artifacts)
    RECORDER: frozenset[str]  # recorder event kinds

    def take_trace(self, ev: TraceEvent) -> None: ...

    def take_recorder(self, event: dict[str, Any]) -> None: ...

    def finish(self, facts: Facts) -> None: ...


KNOWN_EVENTS = frozenset(
    {name.split(":", 1)[0] for c in CONSUMERS for name in c.TRACE}
    | DOCUMENT_KINDS
    # Events torch writes that say nothing a view shows (a graph dump's name, links to files,
    # graph execution markers): known, so they are not listed as unknown.
    | {"str", "compilation_metrics_runtime", "optimize_ddp_split_graph"}
    | {"optimize_ddp_split_child", "compiled_autograd_graph", "dynamo_error", "graph_execution", "link"}
    | {"dump_file", "stack", "restart_reasons"}
)


def build_model(rec: Recording, source_kind: str = "recording") -> RunModel:
    ranks = ranks_of(rec.events)
    multi_rank = len(ranks) > 1
    consumers: list[Consumer] = [cls() for cls in CONSUMERS]
    by_name: dict[str, list[Consumer]] = {}
    by_kind: dict[str, list[Consumer]] = {}
    for c in consumers:
        for name in c.TRACE:
            by_name.setdefault(name, []).append(c)
        for recorder_kind in c.RECORDER:
            by_kind.setdefault(recorder_kind, []).append(c)
    documents, captures, unknown = Documents(), Captures(), Counter[str]()
    attempts: dict[str, set[int]] = {}
    # A log read from several files: consumers that read a file as one stream are told where each
    # begins (draft_export's own log follows the log it took torch's trace from).
    starts = set(_ints(rec.header.get("file_starts"))[1:])
    file_readers = [c for c in consumers if hasattr(c, "take_log_file")]
    for index, event in enumerate(rec.events):
        if index in starts:
            for reader in file_readers:
                reader.take_log_file()
        kind: Any = event.get("kind") if isinstance(event, (dict, LogRecord)) else None
        if not isinstance(kind, str):
            continue  # the loaders report malformed events; a model built in memory skips them too
        if kind != "trace" and not isinstance(event, LogRecord):  # a log's records are all "trace"
            captures.add(event)
            for c in by_kind.get(kind, ()):
                c.take_recorder(event)
            continue
        ev = _trace_event(event, multi_rank)
        if ev is None:
            continue
        documents.add(ev)
        if ev.attempt and ev.compile_id:  # a restarted compile: its events carry the attempt
            attempts.setdefault(ev.compile_id, set()).add(ev.attempt)
        if ev.name.split(":", 1)[0] not in KNOWN_EVENTS:
            unknown[ev.name] += 1
        for c in by_name.get(ev.name, ()):
            c.take_trace(ev)
    facts = Facts(sources_roots=recorded_roots(rec.header), live=source_kind == "live")
    for c in consumers:
        c.finish(facts)
    for cid, seen in attempts.items():
        if cid in facts.compiles:
            comp = facts.compiles[cid]
            comp.attempts = max(comp.attempts, max(seen) + 1)
            comp.seen_attempts = comp.seen_attempts | seen
    return RunModel(
        source_kind=source_kind,
        source=rec.source,
        target=str(rec.header.get("target") or rec.source),
        header=rec.header,
        compiles=facts.compiles,
        graph_breaks=facts.graph_breaks,
        graph_count=facts.graph_count,
        recompiles=facts.recompiles,
        sources=facts.sources,
        unknown_events=unknown,
        problems=list(rec.problems),
        _documents=documents,
        _captures=captures,
        interner=facts.interner,
        exports=facts.exports,
        aoti_compiles=facts.aoti_compiles,
        milestones=facts.milestones,
        preview=facts.preview,
        ranks=ranks,
        _recording=rec,
    )


def _ints(value: Any) -> list[int]:
    return [v for v in value if isinstance(v, int)] if isinstance(value, list) else []


def _trace_event(event: Any, multi_rank: bool) -> TraceEvent | None:
    if isinstance(event, LogRecord):  # a log's record is its own TraceEvent
        if not event.name:  # a record of context keys only (the eager reader's normalize drops it too)
            return None
        return qualified(event) if multi_rank else event
    return normalize(event.get("md") or {}, event.get("payload"), qualify_rank=multi_rank)


def consumed_recorder_kinds() -> Iterable[str]:
    """Every recorder event kind a consumer takes (tests hold the schema's table against it)."""
    return {kind for c in CONSUMERS for kind in c.RECORDER}
