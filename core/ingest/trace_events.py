"""Structured-trace events, normalised: the one representation live runs and TORCH_TRACE logs share.

torch's `trace_structured` record has a metadata dict whose one non-context key names the
event (`dynamo_start`, `artifact`, `compilation_metrics`, ...); context keys say which
compile it belongs to. File names in stacks are interned through earlier `str` events.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tcx.core.ingest.trace_lazy import LazyMetadata, PayloadRef

CONTEXT_KEYS = frozenset(
    {
        "frame_id",
        "frame_compile_id",
        "attempt",
        "compiled_autograd_id",
        "rank",
        "has_payload",
        "stack",
        "subgraph_name",
        "timestamp",
        "pathname",
        "lineno",
        "thread",
    }
)


class TraceEvent:
    """One structured-trace event with its compile context resolved.

    `md` is the record's metadata. A log's bulky, rarely read records keep theirs on disk
    (core/ingest/trace_lazy.LazyMetadata) and read it again each time `md` or `body` is asked for."""

    __slots__ = ("_md", "attempt", "compile_id", "name", "packed", "rank")

    def __init__(
        self,
        name: str,  # e.g. "dynamo_start" or "artifact:dynamo_graph_break_reason"
        md: dict[str, Any] | LazyMetadata,
        # the payload: text, zlib-compressed bytes (see pack), or a PayloadRef read on demand
        packed: str | bytes | PayloadRef | None,
        compile_id: str | None,  # "frame/compile", "!ca/frame/compile" under compiled autograd
        attempt: int,
        rank: int | None,
    ) -> None:
        self.name, self._md, self.packed = name, md, packed
        self.compile_id, self.attempt, self.rank = compile_id, attempt, rank

    @property
    def md(self) -> dict[str, Any]:
        md = self._md
        return md if isinstance(md, dict) else md.load()

    @property
    def body(self) -> Any:
        """The value under the event's key (`artifact` for every `artifact:NAME`)."""
        return self.md.get("artifact" if self.name.startswith("artifact:") else self.name)

    def body_field(self, key: str) -> Any:
        """`body[key]` (None when the body is not an object or lacks it); a record whose metadata
        is on disk answers the fields it kept (core/ingest/trace_lazy.KEPT_FIELDS) without reading it."""
        md = self._md
        if not isinstance(md, dict) and key in md.kept:
            return md.kept[key]
        body = self.body
        return body.get(key) if isinstance(body, dict) else None

    @property
    def payload(self) -> str | None:
        return unpack(self.packed)

    @property
    def frame_id(self) -> int | None:
        return self.md.get("frame_id")

    def with_compile_id(self, compile_id: str | None) -> TraceEvent:
        return TraceEvent(self.name, self._md, self.packed, compile_id, self.attempt, self.rank)

    def __repr__(self) -> str:
        return f"TraceEvent({self.name!r}, compile_id={self.compile_id!r}, attempt={self.attempt})"


# Payloads above this size are kept compressed in memory while a log is loaded: graphs and
# output code compress about tenfold, so a large log costs a fraction of its size.
PACK_ABOVE = 4096


def pack(text: str) -> str | bytes:
    return zlib.compress(text.encode("utf-8"), 1) if len(text) > PACK_ABOVE else text


def unpack(packed: str | bytes | PayloadRef | None) -> str | None:
    if isinstance(packed, bytes):
        return zlib.decompress(packed).decode("utf-8")
    if packed is None or isinstance(packed, str):
        return packed
    return packed.read()  # a payload left on disk by the lazy reader (core/ingest/trace_lazy.py)


def event_key(md: dict[str, Any]) -> str | None:
    for key in md:
        if key not in CONTEXT_KEYS:
            return key
    return None


def compile_id_of(md: dict[str, Any]) -> str | None:
    frame, comp = md.get("frame_id"), md.get("frame_compile_id")
    if frame is None or comp is None:
        return None
    prefix = f"!{md['compiled_autograd_id']}/" if md.get("compiled_autograd_id") is not None else ""
    text = f"{prefix}{frame}/{comp}"
    return _IDS.setdefault(text, text)  # one string per compile id, not one per event


# Compile ids and artifact names seen so far, one string each: a large log has hundreds of
# thousands of events and a few thousand of these.
_IDS: dict[str, str] = {}


class Interner:
    """The `str` event table: stack frames name files by index (one table per rank's log)."""

    def __init__(self) -> None:
        self.table: dict[tuple[Any, int], str] = {}

    def add(self, body: Any, rank: Any = None) -> None:
        if isinstance(body, list) and len(body) == 2 and isinstance(body[1], int):
            self.table[(rank, body[1])] = str(body[0])

    def file(self, value: Any, rank: Any = None) -> str:
        if isinstance(value, int):
            return self.table.get((rank, value), f"<interned file #{value}>")
        return str(value) if value is not None else "?"


def normalize(
    md: dict[str, Any], payload: str | bytes | PayloadRef | None, qualify_rank: bool = False
) -> TraceEvent | None:
    """One raw trace record as a TraceEvent; `qualify_rank` prefixes compile ids with the rank
    (`rank1:0/0`) so several ranks' compiles can live in one model without colliding."""
    if not isinstance(md, dict):
        return None
    name = event_name(md)
    if name is None:
        return None
    attempt = md.get("attempt")
    return TraceEvent(
        name=name,
        md=md,
        packed=payload,
        compile_id=_qualified(compile_id_of(md), md.get("rank") if qualify_rank else None),
        attempt=attempt if isinstance(attempt, int) else 0,
        rank=md.get("rank"),
    )


def event_name(md: dict[str, Any]) -> str | None:
    """The event's key, or `artifact:NAME` for an artifact with a name."""
    key = event_key(md)
    if key == "artifact":
        body = md[key]
        if isinstance(body, dict) and body.get("name"):
            return _IDS.setdefault(f"artifact:{body['name']}", f"artifact:{body['name']}")
    return key


def qualified(ev: TraceEvent) -> TraceEvent:
    """The event with its rank in its compile id (see normalize's `qualify_rank`)."""
    return ev.with_compile_id(_qualified(ev.compile_id, ev.rank))


def _qualified(compile_id: str | None, rank: Any) -> str | None:
    if compile_id is None or rank is None:
        return compile_id
    text = f"rank{rank}:{compile_id}"
    return _IDS.setdefault(text, text)


def event_rank(event: Any) -> Any:
    """The rank a recording's event names: a trace event's `md.rank`, else None. A log's record
    answers from its TraceEvent, without reading metadata it keeps on disk."""
    if isinstance(event, TraceEvent):
        return event.rank
    md = event.get("md") if event.get("kind") == "trace" else None
    return md.get("rank") if isinstance(md, dict) else None


def ranks_of(events: list[Any]) -> list[int]:
    """The distinct ranks named by trace events (empty for a single-process run)."""
    ranks = {
        rank
        for e in events
        for rank in [event_rank(e)]
        if isinstance(rank, int) and not isinstance(rank, bool)
    }
    return sorted(ranks)
