"""What the recompiles capture of a live run recorded (core/recorder/compat_recompiles.py), per
kind: each call of a compiled callable with the outcome Dynamo's cache gave it, the failing guards
of each cache miss, the recompile limits, the hits counted but not listed, and the `--what-if`
inputs checked against every entry.

Each record is kept as the recorder wrote it (a JSON object of a versioned schema); the recompiles
view (core/views/recompiles.py) turns them into calls and entries. A call or check whose hook
failed (`hook_error`) is left out here, once. A TORCH_TRACE log has none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CALL_KINDS = ("frame_call", "guard_check", "recompile_config", "frame_calls_dropped", "what_if")


@dataclass(frozen=True)
class CallCaptures:
    frame_calls: list[dict[str, Any]] = field(default_factory=list)
    guard_checks: list[dict[str, Any]] = field(default_factory=list)
    configs: list[dict[str, Any]] = field(default_factory=list)  # recompile_config
    dropped: list[dict[str, Any]] = field(default_factory=list)  # frame_calls_dropped: hits not listed
    what_ifs: list[dict[str, Any]] = field(default_factory=list)


def read_call_captures(
    frame_calls: list[dict[str, Any]],
    guard_checks: list[dict[str, Any]],
    configs: list[dict[str, Any]],
    dropped: list[dict[str, Any]],
    what_ifs: list[dict[str, Any]],
) -> CallCaptures:
    return CallCaptures(
        frame_calls=[e for e in frame_calls if "hook_error" not in e],
        guard_checks=[e for e in guard_checks if "hook_error" not in e],
        configs=configs,
        dropped=dropped,
        what_ifs=what_ifs,
    )
