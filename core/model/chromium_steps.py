"""The steps torch timed during each compile (`dynamo_timed`: a `chromium_event` pair, "B" then
"E", `ts` in µs), per compile id: read once for core/analysis/compile_phases.py, which gives each
moment to a phase.

Only what a phase needs of a step is kept, not the whole event (a 1 GB log has ~10^6 of them).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, NamedTuple, TypeGuard

from tcx.core.ingest.trace_events import TraceEvent

STEP_EVENT = "chromium_event"


class Step(NamedTuple):
    """What a phase needs of one chromium step."""

    ts: float
    ph: str  # B (begin) or E (end)
    name: str
    cache_state: Any = None  # an `inductor_compile` end's args
    is_backward: Any = None


def read_steps(events: list[TraceEvent]) -> dict[str, list[Step]]:
    """compile id -> its well-formed steps, in log order (a step outside a compile is left out)."""
    steps: dict[str, list[Step]] = {}
    for ev in events:
        if ev.compile_id is not None:
            step = _step(ev.payload)
            if step is not None:
                steps.setdefault(ev.compile_id, []).append(step)
    return steps


def _step(payload: str | None) -> Step | None:
    try:
        step = json.loads(payload or "")
    except ValueError:
        return None
    if not isinstance(step, dict) or step.get("ph") not in ("B", "E"):
        return None
    name, ts = step.get("name"), step.get("ts")
    if not isinstance(name, str) or not _timestamp(ts):
        return None
    args = step.get("args") if name == "inductor_compile" and step["ph"] == "E" else None
    if isinstance(args, dict):
        return Step(float(ts), step["ph"], sys.intern(name), args.get("cache_state"), args.get("is_backward"))
    return Step(float(ts), step["ph"], sys.intern(name))


# A chromium step's `ts` is a point in time (µs since the epoch), not a duration: any finite,
# non-negative number below this (year 2286) is one; a 300-digit integer or NaN is not.
MAX_TIMESTAMP_US = 1e19


def _timestamp(value: Any) -> TypeGuard[float]:
    if type(value) not in (int, float):
        return False
    try:
        return math.isfinite(value) and 0 <= value < MAX_TIMESTAMP_US
    except OverflowError:
        return False
