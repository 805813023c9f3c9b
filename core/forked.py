"""Work done in a forked copy of tcx while this process does the rest, on two or more cores.

`tcx diff A B` reads and sums up two runs that do not depend on each other: B is done in a
fork while A is done here. A fork sees everything already imported and loaded, so starting
it costs milliseconds; the result (plain data) comes back pickled. The fork only saves time:
when it cannot start or fails, the work is done here, where an error is reported as usual.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def start(fn: Callable[..., T], *args: Any) -> Future[T] | None:
    """`fn(*args)` (a module-level function) in a fork; None when a fork cannot help or start."""
    if (os.cpu_count() or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    try:
        pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
        future = pool.submit(fn, *args)
    except (OSError, RuntimeError):
        return None
    pool.shutdown(wait=False)
    return future


def result(future: Future[T] | None, here: Callable[[], T]) -> T:
    """The fork's result, or `here()` when there was no fork or it failed."""
    if future is not None:
        try:
            return future.result()
        except Exception:  # any failure of the fork: redo it here, where errors are reported
            pass
    return here()
