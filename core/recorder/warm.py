"""The warm recorder: a process that imported torch once and forks one recorder child per run.

Starting Python and importing torch, Dynamo and Inductor costs about 5 CPU-seconds on a small
machine, most of a short live run. Where `TCX_WARM_DIR` names a private folder, tcx keeps such a
process there for each environment that asked for it twice (core/run/warm.py, the client side);
a run then starts as a fork of it: the same interpreter, the same environment at import, torch
already imported, and from there on exactly what a cold child does (the recorder's hooks, then
the program). The fork makes a session of its own and takes the run's stdin, stdout and stderr
(passed over the socket) and its folder and environment; this process waits for it and sends
its exit status back. A run's PYTHONPATH may differ from this process's (`tcx fix` runs a rewritten
copy of the program with the original's folder on it): the fork puts the run's entries on sys.path
where Python puts them at start-up, unless a new entry holds a module this process has already
imported (the run's own copy would shadow it in a cold start). The CUDA preview's stand-in for
the device must load before torch: a `preview` process loads it first, as a cold preview child does
(core/recorder/compat_fakecuda_shim.py), and serves only preview runs; any other process serves
only runs without it. What this process cannot serve it answers "cold", and tcx starts the child
the usual way.

Run as a script (`python .../recorder/warm_boot.py SOCKET IDLE_S [tied] [preview]`); it exits after IDLE_S
seconds without a request, when its socket file is removed (the folder was cleaned up), or, `tied`,
when the tcx process that started it is gone; the next run of its environment then starts another.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import importlib.machinery
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterable
from typing import Any

HEADER = struct.Struct("!I")  # the request's length, then the request (JSON)
MAX_REQUEST = 64 * 1024 * 1024
POLL_S = 0.2
TRACE = "TORCH_TRACE"  # torch reads it at import; a fork with another folder has torch read it again
PATH = "PYTHONPATH"  # read at start-up into sys.path; a fork with other entries gets them put there
# Imported at start-up from the first folder of sys.path that holds them: a new entry with one of
# these would have run it in a cold start.
STARTUP_MODULES = ("sitecustomize", "usercustomize")
PREVIEW_CAPTURE = "cuda_preview"  # the capture that asks for the CUDA preview (and its stand-in)


def serve(path: str, idle_s: float, tied: bool = False, preview: bool = False) -> list[str] | None:
    """Serve fork requests on the socket at `path`. Returns None in this process when it is done;
    in a forked child, returns the recorder's argv (the caller runs it and exits). `tied`: the
    warm process of one tcx command (core/run/warm.invocation), which exits when that command is gone.
    `preview`: the CUDA preview's runs (its device stand-in loaded before torch), and only those."""
    parent = os.getppid()
    atexit.register(_quiet_teardown_in_forks, os.getpid())  # before torch: it runs after torch's own
    own_path = python_path(os.environ.get(PATH), os.getcwd())  # sys.path's first entries, as started
    known = sys.path[: len(own_path)] == own_path  # else no run gets other entries: it starts cold
    from tcx.core.recorder import compat_fakecuda_shim

    compat_fakecuda_shim.preload([PREVIEW_CAPTURE] if preview else [])
    import torch  # noqa: F401  (the point of this process: imported once, shared by every fork)

    from tcx.core.recorder import captures, child, compat, program  # noqa: F401

    # What a compile imports first. A command's own warm process (`tied`) serves runs whose compile
    # seconds are compared with its first run's, which started cold, and a preview child patches
    # torch's CUDA calls before its program starts (what Inductor reads at import must see them):
    # these import only what a cold child has imported when the program starts (Inductor is
    # imported within the first compile).
    for name in ("torch._dynamo",) if tied or preview else ("torch._dynamo", "torch._inductor.compile_fx"):
        with contextlib.suppress(ImportError):
            __import__(name)
    trace_again = compat.can_reopen_trace_folder()
    # Out of the collector's sight: a fork's first collection would otherwise touch every object
    # imported here, and copy each page that holds one (copy-on-write), as dear as importing again.
    gc.collect()
    gc.freeze()
    listener = _listen(path)
    if listener is None:
        return None
    waiting: dict[int, socket.socket] = {}  # a forked child's pid: the connection of its run
    last = time.monotonic()
    while os.path.exists(path) and (waiting or time.monotonic() - last < idle_s):
        if tied and os.getppid() != parent:
            break
        _reap(waiting)
        ready, _, _ = select.select([listener], [], [], POLL_S)
        if not ready:
            continue
        conn, _ = listener.accept()
        last = time.monotonic()
        request, fds = _receive(conn)
        new_path = None if request is None else path_for(request, own_path, known)
        if request is None or new_path is None or _needs_cold_start(request, trace_again, preview):
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
            return _become_the_child(request, fds, new_path, len(own_path))
        _close(fds)
        _send(conn, f"pid {pid}")
        waiting[pid] = conn
    listener.close()
    # The socket, and the mark that says this process started (core/run/warm.py): the next run of
    # this environment starts another, rather than every later one starting cold.
    for done in (path, os.path.splitext(path)[0] + ".started"):
        with contextlib.suppress(OSError):
            os.unlink(done)
    while waiting:  # the last runs still get their status
        _reap(waiting)
        time.sleep(POLL_S)
    return None


def _quiet_teardown_in_forks(server: int) -> None:
    """A fork's last exit handler (registered before torch and the program register theirs; the last
    registered run first): what Python prints after it, while it tears the fork down, goes nowhere.
    The objects this process froze (gc.freeze) stay out of the collector's sight there, and triton's
    bindings print those still alive as leaks, which a cold child (that collects them) never prints;
    collecting them would cost each run about a CPU-second. Everything the program, its exit
    handlers and torch's print comes out as in a cold start; only a message from the teardown itself
    (an error in an object's `__del__` at exit) is not printed where a cold child would print it."""
    if os.getpid() == server:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # the program's own replacement may be closed or broken
            stream.flush()
    nowhere = os.open(os.devnull, os.O_WRONLY)
    os.dup2(nowhere, 1)
    os.dup2(nowhere, 2)


def _listen(path: str) -> socket.socket | None:
    """A socket listening at `path`, or None where another server has it. Bound under a temporary
    name and linked to `path` once it listens, so that a run that sees the file can connect."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    temporary = f"{path}.{os.getpid()}"
    try:
        listener.bind(temporary)
        os.chmod(temporary, 0o600)
        listener.listen(16)
        os.link(temporary, path)  # a second server for the same folder and key loses here, and exits
    except OSError:
        listener.close()
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    return listener


def python_path(value: str | None, cwd: str) -> list[str]:
    """The entries PYTHONPATH puts first on sys.path at start-up: absolute (an empty one is the
    working directory), each once."""
    if not value:
        return []
    return _unique(os.path.normpath(os.path.join(cwd, entry)) for entry in value.split(os.pathsep))


def _unique(paths: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    kept = []
    for entry in paths:
        key = os.path.normcase(os.path.abspath(entry))
        if key not in seen:
            seen.add(key)
            kept.append(entry)
    return kept


def path_for(request: dict[str, Any], own: list[str], known: bool = True) -> list[str] | None:
    """The PYTHONPATH entries of the run's sys.path, or None where a fork cannot have them: a new
    entry holds a module this process imported (or one Python runs at start-up), or a module this
    process imported came from an entry the run does not have. `own`: this process's entries, first
    on its sys.path (`known`: where they were found)."""
    try:
        env, cwd = dict(request["env"]), str(request.get("cwd") or os.getcwd())
    except (KeyError, TypeError, ValueError):
        return None
    wanted = python_path(env.get(PATH), cwd)
    if wanted == own:
        return wanted
    if not known:
        return None
    imported = {name for name in sys.modules if "." not in name}
    for entry in set(wanted) - set(own):
        if _top_level_names(entry) & (imported | set(STARTUP_MODULES)):
            return None
    gone = tuple(os.path.join(entry, "") for entry in set(own) - set(wanted))
    files = (str(getattr(m, "__file__", None) or "") for m in list(sys.modules.values()))
    if gone and any(file.startswith(gone) for file in files):
        return None
    return wanted


def _top_level_names(folder: str) -> set[str]:
    """The names `import NAME` could find in `folder` (modules, packages, extension modules)."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return set()
    suffixes = tuple(importlib.machinery.all_suffixes())
    return {
        name.split(".", 1)[0]
        for name in entries
        if name.endswith(suffixes) or os.path.isdir(os.path.join(folder, name))
    }


def _needs_cold_start(request: dict[str, Any], trace_again: bool, preview: bool) -> bool:
    """The CUDA preview's stand-in loads before torch (in this process, or not at all); another
    TORCH_TRACE folder needs torch to read it again."""
    from tcx.core.recorder.compat_fakecuda_shim import wanted

    try:
        spec = json.loads(request["argv"][0])
        env = dict(request["env"])
    except (ValueError, KeyError, IndexError, TypeError):
        return True
    if env.get(TRACE) != os.environ.get(TRACE) and not trace_again:
        return True
    return wanted(spec.get("capture") or []) != preview


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


def _become_the_child(request: dict[str, Any], fds: list[int], entries: list[str], own: int) -> list[str]:
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
    if sys.path[:own] != entries:  # checked before the fork (path_for); the rest as site.py leaves it
        sys.path[:] = _unique([*entries, *sys.path[own:]])
        importlib.invalidate_caches()
    return list(request["argv"])
