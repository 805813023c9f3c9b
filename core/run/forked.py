"""Work done in a forked copy of tcx while this process does the rest, on two or more cores.

`tcx diff A B` reads and sums up two runs that do not depend on each other: B is done in a
fork while A is done here. A fork sees everything already imported and loaded, so starting
it costs milliseconds; the result (plain data) comes back pickled through a pipe. The fork only
saves time: when it cannot start or fails, the work is done here, where an error is reported as
usual.

A plain process and a pipe, not a process pool: a pool's manager thread can still be shutting
down when the interpreter exits (then Python prints an `OSError: Bad file descriptor` traceback).
The fork is a daemon: if this process ends first (A was unreadable), it is stopped and waited for
at exit, and `result` waits for it to end.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass
class Forked(Generic[T]):
    """A call running in a fork: its process and the end of the pipe its result comes through."""

    process: BaseProcess
    receiver: Connection


def start(fn: Callable[..., T], *args: Any) -> Forked[T] | None:
    """`fn(*args)` (a module-level function) in a fork; None when a fork cannot help or start."""
    if (os.cpu_count() or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    sys.stdout.flush()  # the fork flushes its copy of unwritten output when it ends
    sys.stderr.flush()
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_run, args=(sender, fn, args), daemon=True)
    try:
        process.start()
    except (OSError, RuntimeError):
        receiver.close()
        sender.close()
        return None
    sender.close()  # the fork holds its own copy; EOF reaches `result` if the fork dies
    return Forked(process, receiver)


def _run(sender: Connection, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """In the fork: send `(True, fn(*args))`, or `(False, None)` when it raised."""
    try:
        outcome: tuple[bool, Any] = (True, fn(*args))
    except BaseException:  # any failure: the parent redoes the work, where errors are reported
        outcome = (False, None)
    try:
        sender.send(outcome)
    except Exception:  # e.g. a result that cannot be pickled: the parent redoes it
        sender.send((False, None))
    finally:
        sender.close()


def result(forked: Forked[T] | None, here: Callable[[], T]) -> T:
    """The fork's result, or `here()` when there was no fork or it failed. The fork has ended when
    this returns."""
    if forked is None:
        return here()
    try:
        ok, value = forked.receiver.recv()
    except (EOFError, OSError):  # the fork died before sending
        ok, value = False, None
    finally:
        forked.receiver.close()
        forked.process.join()
    return value if ok else here()
