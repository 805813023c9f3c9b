"""`tcx cost --trace FILE`: one profiled step as a Chrome trace (Perfetto and chrome://tracing open it).

Pure and torch-free: the spans are the profiler's ranges of that step, named the way `tcx cost`
attributes them (the call, compiled regions, graphs, kernels and extern calls, Dynamo's guard
evaluation, the eager stretches after each graph break, labelled with the break, the backward and
its graphs, the optimizer step), plus the device's kernels per stream.
"""

from __future__ import annotations

from typing import Any

from tcx import __version__
from tcx.core.cost.measurements import ATTRIBUTION, SCHEMA, Cost
from tcx.core.cost.profile import CallProfile

PID = 1


def representative(cost: Cost) -> CallProfile | None:
    """The profiled step of the headline step group whose time is the median of its profiled steps."""
    s = cost.primary
    if s is None or not s.profiled:
        return None
    calls = sorted(s.profiled, key=lambda p: p.call_ns)
    return calls[(len(calls) - 1) // 2]


def chrome_trace(cost: Cost) -> dict[str, Any] | None:
    """The trace, or None when no step was profiled (nothing to draw)."""
    call = representative(cost)
    if call is None:
        return None
    tracks = {"cpu": 0}
    for span in call.spans:
        tracks.setdefault(span.track, len(tracks))
    events: list[dict[str, Any]] = [
        _meta("process_name", 0, {"name": f"tcx cost: {call.function} step #{call.index}"}),
        *(_meta("thread_name", tid, {"name": _track_name(track)}) for track, tid in tracks.items()),
    ]
    ordered = sorted(call.spans, key=lambda s: (tracks[s.track], s.start_ns, -s.dur_ns))
    for span in ordered:
        events.append(
            {
                "name": span.name,
                "cat": span.part,
                "ph": "X",
                "ts": span.start_ns / 1000,
                "dur": span.dur_ns / 1000,
                "pid": PID,
                "tid": tracks[span.track],
                "args": {"part": span.part, "compile_id": span.compile_id},
            }
        )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "producer": f"tcx {__version__} ({SCHEMA})",
            "target": cost.model.target,
            "function": call.function,
            "call_index": call.index,
            "step_ms": call.call_ns / 1e6,
            "whole_step": call.whole_step,
            "how_attributed": ATTRIBUTION,
        },
    }


def _meta(name: str, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": PID, "tid": tid, "args": args}


def _track_name(track: str) -> str:
    if track == "cpu":
        return "CPU: the step's thread"
    return f"GPU stream {track.split(' ', 1)[1]}" if track.startswith("device ") else track
