"""How big a logged payload is, from its reference alone: nothing is parsed or read from disk.

The index a big run prints first (core/views/index.py) estimates a view's length from these.
"""

from __future__ import annotations

from dataclasses import dataclass

from tcx.core.ingest.trace_events import TraceEvent


@dataclass(frozen=True)
class PayloadSize:
    compile_id: str | None
    lines: int | None = None  # a text kept in memory: its lines
    compressed_bytes: int = 0  # a payload kept compressed (zlib): its size so
    disk_bytes: int = 0  # a payload left on disk (core/ingest/trace_lazy.py): its size there


def payload_size(ev: TraceEvent) -> PayloadSize:
    packed = ev.packed
    if packed is None:
        return PayloadSize(ev.compile_id)
    if isinstance(packed, str):
        return PayloadSize(ev.compile_id, lines=packed.count("\n") + 1)
    if isinstance(packed, bytes):
        return PayloadSize(ev.compile_id, compressed_bytes=len(packed))
    return PayloadSize(ev.compile_id, disk_bytes=len(packed))
