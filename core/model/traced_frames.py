"""Traced instructions per compile: what Dynamo did at each bytecode instruction it traced.

A live run records one `trace_instructions` capture per compile attempt (`tcx trace`): each
instruction with its simulated stack, the FX nodes it created, the guards and shape guards it
added, the branch it decided, a graph break or an exception. The trace view reads them; a log has
none (torch's trace does not carry them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TracedFrame:
    """One compile attempt's traced instructions (`instructions`: as the recorder wrote them)."""

    compile_id: str | None
    attempt: int
    function: str
    file: str | None
    firstlineno: int | None
    instructions: list[dict[str, Any]]
    elided: int  # instructions traced past the capture's limit, not recorded
    unattributed: list[Any]  # FX nodes no instruction created


def read_traced_frames(captures: Iterable[dict[str, Any]]) -> list[TracedFrame]:
    return [
        TracedFrame(
            compile_id=e.get("compile_id"),
            attempt=int(e.get("attempt") or 0),
            function=str(e.get("function") or "?"),
            file=e.get("file"),
            firstlineno=e.get("firstlineno"),
            instructions=list(e.get("instructions") or []),
            elided=int(e.get("elided") or 0),
            unattributed=list(e.get("unattributed_nodes") or []),
        )
        for e in captures
    ]
