"""Which process a recording is of: a child process of the user's program (fork, spawn, a
subprocess) records its own recording, whose header names it (pid, how it started, argv).
The parent's summary of its children (core/run/observed.py) reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ChildIdentity:
    pid: int | None
    how: str  # fork, spawn, subprocess, ... ("unknown" when the recording does not say)
    argv: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "how": self.how, "argv": self.argv}


def child_identity(info: Any) -> ChildIdentity:
    """From a recording header's `child` (or a child's own report of itself); anything else: unknown."""
    info = info if isinstance(info, dict) else {}
    argv = info.get("argv")
    return ChildIdentity(
        pid=info.get("pid") if isinstance(info.get("pid"), int) else None,
        how=str(info.get("how") or "unknown"),
        argv=[str(a) for a in argv] if isinstance(argv, list) else [],
    )
