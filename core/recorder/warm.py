"""The warm recorder: a process that imported torch once and forks one recorder child per run.

Starting Python and importing torch, Dynamo and Inductor costs about 5 CPU-seconds on a small
machine, most of a short live run. Where `TCX_WARM_DIR` names a private folder, tcx keeps such a
process there for each environment that asked for it twice (core/run/warm.py, the client side);
a run then starts as a fork of it: the same interpreter, the same environment at import, torch
already imported, and from there on exactly what a cold child does (the recorder's hooks, then
the program). The fork makes a session of its own and takes the run's stdin, stdout and stderr
(passed over the socket) and its folder and environment; this process waits for it and sends
its exit status back. What this process cannot serve (the CUDA preview, which must load before
torch) it answers "cold", and tcx starts the child the usual way.

Run as a script (`python .../recorder/warm_boot.py SOCKET IDLE_S`); it exits after IDLE_S
seconds without a request, or when its socket file is removed (the folder was cleaned up).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from typing import Any

HEADER = struct.Struct("!I")  # the request's length, then the request (JSON)
MAX_REQUEST = 64 * 1024 * 1024
POLL_S = 0.2
TRACE = "TORCH_TRACE"  # torch reads it at import; a fork with another folder has torch read it again


def serve(path: str, idle_s: float) -> list[str] | None:
    """Serve fork requests on the socket at `path`. Returns None in this process when it is done;
    in a forked child, returns the recorder's argv (the caller runs it and exits)."""
    import torch  # noqa: F401  (the point of this process: imported once, shared by every fork)

    from tcx.core.recorder import captures, child, compat, program  # noqa: F401

    for name in ("torch._dynamo", "torch._inductor.compile_fx"):  # what a compile imports first
        with contextlib.suppress(ImportError):
            __import__(name)
    trace_again = compat.can_reopen_trace_folder()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)  # a second server for the same folder and key loses here, and exits
    except OSError:
        return None
    os.chmod(path, 0o600)
    listener.listen(16)
    waiting: dict[int, socket.socket] = {}  # a forked child's pid: the connection of its run
    last = time.monotonic()
    while os.path.exists(path) and (waiting or time.monotonic() - last < idle_s):
        _reap(waiting)
        ready, _, _ = select.select([listener], [], [], POLL_S)
        if not ready:
            continue
        conn, _ = listener.accept()
        last = time.monotonic()
        request, fds = _receive(conn)
        if request is None or _needs_cold_start(request, trace_again):
            _close(fds)
            _send(conn, "cold")
            conn.close()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            listener.close()
            for other in (conn, *waiting.values()):
                other.close()
            return _become_the_child(request, fds)
        _close(fds)
        _send(conn, f"pid {pid}")
        waiting[pid] = conn
    listener.close()
    with contextlib.suppress(OSError):
        os.unlink(path)
    while waiting:  # the last runs still get their status
        _reap(waiting)
        time.sleep(POLL_S)
    return None


def _needs_cold_start(request: dict[str, Any], trace_again: bool) -> bool:
    """The CUDA preview loads before torch; another TORCH_TRACE folder needs torch to read it again."""
    from tcx.core.recorder.compat_fakecuda_shim import wanted

    try:
        spec = json.loads(request["argv"][0])
        env = dict(request["env"])
    except (ValueError, KeyError, IndexError, TypeError):
        return True
    if env.get(TRACE) != os.environ.get(TRACE) and not trace_again:
        return True
    return wanted(spec.get("capture") or [])


def _receive(conn: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """One request and the three file descriptors that come with it (stdin, stdout, stderr)."""
    conn.settimeout(10)
    try:
        data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
        if len(data) < HEADER.size or len(fds) != 3:
            return None, fds
        (size,) = HEADER.unpack_from(data)
        if size > MAX_REQUEST:
            return None, fds
        body = data[HEADER.size :]
        while len(body) < size:
            more = conn.recv(size - len(body))
            if not more:
                return None, fds
            body += more
        request = json.loads(body)
        return (request if isinstance(request, dict) else None), fds
    except (OSError, ValueError):
        return None, []


def _send(conn: socket.socket, line: str) -> None:
    with contextlib.suppress(OSError):  # tcx went away: the run goes on and is reaped
        conn.sendall(line.encode() + b"\n")


def _close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _reap(waiting: dict[int, socket.socket]) -> None:
    """Send each finished child's exit status (negative: the signal that ended it) to its run."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            _send(conn, f"exit {os.waitstatus_to_exitcode(status)}")
            conn.close()


def _become_the_child(request: dict[str, Any], fds: list[int]) -> list[str]:
    """In the fork: what a cold start of the recorder child would be, from here on."""
    os.setsid()  # a session and process group of its own, as the cold child's start_new_session
    for target, fd in zip((0, 1, 2), fds, strict=False):
        os.dup2(fd, target)
    _close([fd for fd in fds if fd > 2])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if request.get("cwd"):
        os.chdir(request["cwd"])
    trace = os.environ.get(TRACE)
    os.environ.clear()
    os.environ.update(request["env"])
    if os.environ.get(TRACE) != trace:
        from tcx.core.recorder import compat

        compat.reopen_trace_folder()  # checked before the fork (can_reopen_trace_folder)
    return list(request["argv"])
