"""`python -m tcx ARGS` and plain `python PROGRAM ARGS` for the suite, started as forks of a process
that imported tcx (or torch) once.

The suite runs tcx several hundred times; a fresh Python spends most of a short command (reading a
recording, checking a budget) importing tcx, rich and click again. Each xdist worker starts one
tests/tcx_fork_server.py, and a run whose environment only differs from the worker's in what a
command reads while it runs becomes a fork of it: its own process, with the request's arguments,
environment, working directory (the repository root, where run_tcx and shared_run start tcx),
stdin (the worker's), and stdout and stderr as pipes, exactly as subprocess.run gives them.
Anything else starts a fresh Python as before: another working directory, a variable Python reads
at start-up (PYTHON*, the locale's), a second thread asking while one run is under way, or a
server that could not start. TCX_TEST_FORK=0 turns it off (every run a fresh Python).

The programs the suite runs plainly (no tcx anywhere: torch's own log of them is the truth tcx's
counts are compared with) pay about 5 CPU-seconds each importing torch, Dynamo and Inductor before
they compile anything. `run_python` starts them as forks of a second server per worker that
imported those once (and nothing of tcx), where the environment is the worker's but for
TORCH_TRACE (read again in the fork) and what only shapes output; else a fresh Python.
tests/test_tcx_fork.py holds a fork's output, and torch's log of a program, equal to a fresh process's.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVER = Path(__file__).resolve().parent / "tcx_fork_server.py"
READY_S = 60  # importing tcx takes well under a second; a server not ready by then is not used
# Read by Python itself at start-up (not when a command runs): a run that sets one differently starts fresh.
STARTUP_PREFIXES = ("PYTHON", "LC_")
STARTUP_NAMES = frozenset({"LANG", "LANGUAGE"})
# What a plain program's environment may change from the server's, which imported torch: torch reads
# TORCH_TRACE at import (the fork has it read again); CUDA reads CUDA_VISIBLE_DEVICES when it starts,
# which no import does; the others are read by no import.
PROGRAM_PER_RUN = frozenset(
    {"TORCH_TRACE", "CUDA_VISIBLE_DEVICES", "NO_COLOR", "COLUMNS", "PYTEST_CURRENT_TEST"}
)


class _Server:
    """One worker's tcx_fork_server.py (`mode` "tcx" or "python") and the socket to it."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.env = dict(os.environ)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), str(REPO), str(theirs.fileno()), mode],
            cwd=REPO,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            pass_fds=[theirs.fileno()],
        )
        theirs.close()
        self.conn = ours
        self.conn.settimeout(READY_S)
        self.ready = self.conn.recv(16) == b"ready"
        self.lock = threading.Lock()

    def close(self) -> None:
        self.conn.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        if self.proc.poll() is None:
            self.proc.kill()

    def serves(self, env: dict[str, str], cwd: Path) -> bool:
        if not self.ready or self.proc.poll() is not None or (self.mode == "tcx" and cwd != REPO):
            return False
        changed = {k for k in set(env) | set(self.env) if env.get(k) != self.env.get(k)}
        if self.mode == "python":
            return changed <= PROGRAM_PER_RUN
        return not any(_at_startup(k) for k in changed)

    def run(
        self, args: list[str], env: dict[str, str], cwd: Path, timeout: float | None
    ) -> subprocess.CompletedProcess:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            request = json.dumps({"args": args, "env": env, "cwd": str(cwd)}).encode()
            socket.send_fds(self.conn, [request], [out_w, err_w])
        finally:
            os.close(out_w)
            os.close(err_w)
        self.conn.settimeout(READY_S)
        pid = int(self.conn.recv(64).split()[1])
        argv = [sys.executable, *(["-m", "tcx"] if self.mode == "tcx" else []), *args]
        deadline = None if timeout is None else time.monotonic() + timeout
        out, err, code = _collect(self.conn, out_r, err_r, deadline)
        if code is None:  # past the timeout: killed and waited for, as subprocess.run does
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self.conn.recv(64)  # its exit status
            for fd in (out_r, err_r):
                with contextlib.suppress(OSError):
                    os.close(fd)
            raise subprocess.TimeoutExpired(argv, timeout or 0, output=_text(out), stderr=_text(err))
        return subprocess.CompletedProcess(argv, code, _text(out), _text(err))


def _at_startup(name: str) -> bool:
    return name.startswith(STARTUP_PREFIXES) or name in STARTUP_NAMES


def _collect(
    conn: socket.socket,
    out_r: int,
    err_r: int,
    deadline: float | None,
) -> tuple[bytes, bytes, int | None]:
    """Both pipes to their end and the exit status; the status None where the deadline came first
    (the pipes stay open then). Closes the pipes once read to their end."""
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    code: int | None = None
    with selectors.DefaultSelector() as sel:
        sel.register(out_r, selectors.EVENT_READ)
        sel.register(err_r, selectors.EVENT_READ)
        sel.register(conn, selectors.EVENT_READ)
        while sel.get_map():
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                return b"".join(chunks[out_r]), b"".join(chunks[err_r]), None
            for key, _ in sel.select(wait):
                if key.fileobj is conn:
                    code = int(conn.recv(64).split()[1])
                    sel.unregister(conn)
                    continue
                data = os.read(key.fd, 1 << 16)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
                    os.close(key.fd)
    return b"".join(chunks[out_r]), b"".join(chunks[err_r]), code


def _text(data: bytes) -> str:
    """As subprocess.run(text=True) decodes: the locale's encoding, universal newlines."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


_servers: dict[str, _Server] = {}
_failed: set[str] = set()


def run(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float | None
) -> subprocess.CompletedProcess:
    """`python -m tcx ARGS` in `cwd` with `env`: a fork of the worker's server where it can be, else
    a fresh Python; stdout and stderr captured as text, as subprocess.run(capture_output, text)."""
    return _run("tcx", ["-m", "tcx"], args, env, cwd, timeout)


def run_python(
    args: list[str], env: dict[str, str] | None = None, cwd: Path = REPO, timeout: float | None = 600
) -> subprocess.CompletedProcess:
    """`python PROGRAM ARGS` or `python -c CODE ARGS` (no tcx: the program as a user runs it) in `cwd`
    with `env` (the worker's by default): a fork of the worker's server that imported torch where it
    can be, else a fresh Python; captured as text, as subprocess.run(capture_output, text)."""
    env = dict(os.environ) if env is None else env
    servable = bool(args) and ((args[0] == "-c" and len(args) > 1) or not args[0].startswith("-"))
    return _run("python" if servable else "", [], args, env, cwd, timeout)


def _run(
    mode: str, prefix: list[str], args: list[str], env: dict[str, str], cwd: Path, timeout: float | None
) -> subprocess.CompletedProcess:
    server = _get(mode) if mode else None
    if server is not None and server.serves(env, cwd) and server.lock.acquire(blocking=False):
        try:
            return server.run(args, env, cwd, timeout)
        finally:
            server.lock.release()
    return subprocess.run(
        [sys.executable, *prefix, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _get(mode: str = "tcx") -> _Server | None:
    if mode not in _servers and mode not in _failed and os.environ.get("TCX_TEST_FORK") != "0":
        try:
            _servers[mode] = _Server(mode)
        except OSError:
            _failed.add(mode)
            return None
        atexit.register(_servers[mode].close)
    return _servers.get(mode)
