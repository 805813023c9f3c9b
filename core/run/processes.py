"""Supervise a child process tree: forward SIGINT/SIGTERM, wait briefly, kill, leave no orphans.

Used by the live recorder (core/run/driver.py) and `tcx record -- CMD` (core/run/command_run.py).
The child is started in a session of its own (`start_new_session=True`), so its process
group holds the program and the background processes it starts. A launcher such as
torchrun starts each rank in yet another session, so the tree is also followed through
/proc (Linux) to reach every rank.

When tcx receives SIGINT or SIGTERM (Ctrl-C, a CI timeout) while the child runs, the signal
is forwarded to every process group of the tree; whatever is still alive `GRACE_S` later is
killed. tcx itself keeps running: it reports what was recorded, honours `--save`, and exits
with 128 + the signal number (`stop_exit_code`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

GRACE_S = 3.0
POLL_S = 0.25
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_stopped_by: int | None = None  # the first stop signal this tcx process received


def stop_exit_code() -> int | None:
    """128 + the signal that stopped a run of this process (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + _stopped_by if _stopped_by else None


class Supervisor:
    """While active (a `with` block in the main thread), SIGINT/SIGTERM stop the child's tree."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[Any] | None = None
        self.stop_signal: str | None = None  # "SIGINT" / "SIGTERM" when tcx was asked to stop
        self._kill_at: float | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Supervisor:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                previous = signal.getsignal(sig)
                if previous is not signal.SIG_IGN:  # e.g. SIGINT of a `cmd &` job: stays ignored
                    self._previous[sig] = previous
                    signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start the child in a session of its own (a signal that came first is passed on)."""
        self.proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
        if self.stop_signal is not None:
            signal_tree(self.proc.pid, signal.Signals[self.stop_signal])
        return self.proc

    def adopt(self, proc: Any) -> Any:
        """Supervise a child started elsewhere in a session of its own (core/run/warm.py's fork)."""
        self.proc = proc
        if self.stop_signal is not None:
            signal_tree(proc.pid, signal.Signals[self.stop_signal])
        return proc

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        global _stopped_by
        if self.stop_signal is not None:  # asked twice: no more waiting
            if self.proc is not None:
                kill_tree(self.proc.pid)
            return
        self.stop_signal = signal.Signals(signum).name
        _stopped_by = _stopped_by or signum
        self._kill_at = time.monotonic() + GRACE_S
        print(
            f"tcx: {self.stop_signal} received: stopping the program (killed if still running in "
            f"{GRACE_S:g} s); what was recorded so far is still reported.",
            file=sys.stderr,
            flush=True,
        )
        if self.proc is not None:
            signal_tree(self.proc.pid, signum)

    def wait(self, timeout: float | None, on_poll: Callable[[], None] | None = None) -> bool:
        """Wait for the child; return True when it ran past `timeout` (and was killed).

        A KeyboardInterrupt (no handler could be installed) stops the tree like SIGINT."""
        assert self.proc is not None, "popen() first"
        deadline = None if timeout is None else time.monotonic() + timeout
        timed_out = False
        try:
            while True:
                try:
                    self.proc.wait(timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                now = time.monotonic()
                if self._kill_at is not None and now >= self._kill_at:
                    kill_tree(self.proc.pid)
                elif self._kill_at is None and deadline is not None and now >= deadline:
                    timed_out = True
                    kill_tree(self.proc.pid)
                elif on_poll is not None:
                    on_poll()
        except KeyboardInterrupt:
            self.stop_signal = self.stop_signal or "SIGINT"
            kill_tree(self.proc.pid)
            self.proc.wait()
        # The program's background processes (its process group) do not outlive it.
        _signal_group(self.proc.pid, signal.SIGKILL)
        return timed_out


def signal_tree(pid: int, sig: int) -> None:
    """Send `sig` to every process group of `pid`'s tree (its own group and the ranks' groups)."""
    groups = {pid}
    for child in descendants(pid):
        try:
            groups.add(os.getpgid(child))
        except OSError:
            continue
    for group in groups:
        _signal_group(group, sig)


def kill_tree(pid: int) -> None:
    """SIGKILL `pid`, its process group, every descendant and their process groups."""
    tree = descendants(pid)
    signal_tree(pid, signal.SIGKILL)
    for child in tree:  # a descendant that changed groups again
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            continue


def _signal_group(pgid: int, sig: int) -> None:
    if pgid <= 1 or pgid == os.getpgrp():
        return
    with contextlib.suppress(OSError):  # the group is gone (or was never ours)
        os.killpg(pgid, sig)


def descendants(pid: int) -> list[int]:
    """Every living descendant of `pid`, read from /proc (empty where there is no /proc)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": state ppid ...
        if len(fields) > 1 and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
