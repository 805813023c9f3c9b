"""Start the recorder child as a fork of a warm process, where `TCX_WARM_DIR` asks for it.

Each live run pays for a new Python that imports torch (about 5 CPU-seconds on a small machine
before the program does anything). A script that runs tcx many times (a test suite, a CI job
that checks several programs) can set TCX_WARM_DIR to a private folder of its own: tcx then
keeps, per environment, one process there that has imported torch (core/recorder/warm.py) and
starts each later run as a fork of it. The first run with an environment starts cold and leaves
a mark; the second starts the warm process, waits for it (about as long as a cold start takes)
and forks from it, as later ones do. A warm process that exits (IDLE_S without a run) takes its
start mark with it, so the next run starts another. Any difference that could matter at import
(the interpreter, tcx's own code, every environment variable but the few that only shape the
output, TORCH_TRACE and PYTHONPATH, which the fork applies again, and tcx's variables that the
recorder reads only while the program runs) makes a different environment; anything unexpected
falls back to the usual cold start. The folder must be a real folder owned by this user and
closed to others.

A command that makes several runs of one program (`tcx fix`, `tcx cost`) does the same within
itself where TCX_WARM_DIR is unset (`invocation`): its warm process lives in a private temporary
folder, starts with its second run (never for a single run) and ends with the command. A command
that knows a later run shares this run's environment (`tcx cache`'s cold and warm runs, in a
cache folder no other command uses) starts the warm process with this run (`again`): every run of
that environment then forks, the first included. TCX_WARM_DIR=off starts every run cold.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

ENV = "TCX_WARM_DIR"
OFF = "off"  # TCX_WARM_DIR=off: every run starts cold
IDLE_S = 120  # a warm process with no request for this long exits
STARTING_S = 30  # how long a run waits for a warm process that is still starting
WARM_BOOT = str(Path(__file__).resolve().parent.parent / "recorder" / "warm_boot.py")
_CORE = Path(__file__).resolve().parent.parent
# Read by nothing at import, and different from run to run (terminal shape, the test runner).
# TORCH_TRACE differs too (a folder per run) and is read at import: the fork has torch read it
# again (core/recorder/warm.py), so it is left out of the environment's key as well.
_PER_RUN = frozenset(
    {
        "COLUMNS",
        "LINES",
        "NO_COLOR",
        "FORCE_COLOR",
        "CLICOLOR",
        "CLICOLOR_FORCE",
        "TERM",
        "COLORTERM",
        "PYTEST_CURRENT_TEST",
        "PYTEST_XDIST_WORKER",
        "PYTEST_XDIST_WORKER_COUNT",
        "PYTEST_XDIST_TESTRUNUID",
    }
)
# Read at import too, but the fork puts the run's own entries on sys.path (core/recorder/warm.py).
_REAPPLIED = frozenset({"TORCH_TRACE", "PYTHONPATH"})
# tcx's own, read by the recorder while the program runs (never at import): the fork has the run's value.
_READ_WHILE_RUNNING = frozenset({"TCX_COST_PROFILER_EXPORT"})
# The recorder's capture for the CUDA preview (`tcx codegen --target cuda:ARCH`): a warm process
# of its own loads the preview's stand-in for the device before torch, as its cold child does.
PREVIEW_CAPTURE = "cuda_preview"

_invocation: Path | None = None  # the private folder of the command that runs (`invocation`)
_started: list[subprocess.Popen[bytes]] = []  # the warm processes started there


@contextlib.contextmanager
def invocation(own: bool = False) -> Iterator[None]:
    """While a command that makes several runs of a program runs: where TCX_WARM_DIR is unset, its
    runs after the first fork from a warm process of its own, in a private temporary folder that
    is removed at the end (the process ends with it). `own`: the runs' environment is the command's
    alone (a private cache folder), so a private folder is used even where TCX_WARM_DIR names one
    (where its warm process would outlive the command, useless), unless that says `off`."""
    global _invocation
    setting = os.environ.get(ENV)
    if (setting and not own) or setting == OFF or _invocation is not None:
        yield
        return
    _invocation = Path(tempfile.mkdtemp(prefix="tcx-warm-"))  # 0700
    try:
        yield
    finally:
        shutil.rmtree(_invocation, ignore_errors=True)
        _invocation = None
        while _started:
            _stop(_started.pop())


def _stop(server: subprocess.Popen[bytes]) -> None:
    """A warm process exits within a poll of its socket's removal; killed if it has not."""
    try:
        server.wait(timeout=2)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


class WarmChild:
    """A recorder child forked by the warm process: what the supervisor needs of a Popen."""

    def __init__(self, conn: socket.socket, pid: int, args: list[str]) -> None:
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._conn = conn
        self._buffer = b""

    def poll(self) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.wait(0)
        return None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        self._conn.settimeout(timeout if timeout is None or timeout > 0 else 0.0)
        while b"\n" not in self._buffer:
            try:
                data = self._conn.recv(256)
            except (TimeoutError, BlockingIOError):
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            except OSError:
                data = b""
            if not data:  # the warm process went away: wait for the child itself, status unknown
                self._buffer += b"exit 1\n"
                _wait_gone(self.pid)
            self._buffer += data
        line = self._buffer.split(b"\n", 1)[0].decode()
        self.returncode = int(line.split()[1])
        self._conn.close()
        return self.returncode


def start(
    argv: list[str],
    env: dict[str, str],
    cwd: str | None,
    stdout: IO[Any] | int,
    stderr: IO[Any] | int,
    again: bool = False,
) -> WarmChild | None:
    """Fork the recorder child (`argv`: boot.py's arguments) from a warm process, or None: start it cold.
    `again`: a later run shares this environment, so a warm process for it starts now, not at the
    second run."""
    folder = _invocation or _private_folder(os.environ.get(ENV))
    if folder is None or not hasattr(socket, "send_fds"):
        return None
    preview = _asks_for_the_preview(argv)
    key = _key(env, preview)
    path = folder / f"{key}.sock"
    _wait_for_a_starting_server(folder, key)
    conn = _connect(path)
    if conn is None:
        server = _start_server(folder, key, env, cwd, preview, again)
        if server is None:
            return None
        _wait_for_a_starting_server(folder, key, server)  # as long as a cold start would take
        conn = _connect(path)
        if conn is None:
            return None
    try:
        body = json.dumps({"argv": argv, "env": env, "cwd": cwd or os.getcwd()}).encode()
        with open(os.devnull, "rb") as stdin:
            fds = [stdin.fileno(), _fileno(stdout), _fileno(stderr)]
            socket.send_fds(conn, [len(body).to_bytes(4, "big") + body], fds)
        conn.settimeout(30)
        answer = conn.makefile("rb").readline().decode().split()
    except (OSError, ValueError):
        conn.close()
        return None
    if len(answer) != 2 or answer[0] != "pid":
        conn.close()
        return None
    return WarmChild(conn, int(answer[1]), argv)


def _connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        return None
    return conn


def _fileno(stream: IO[Any] | int) -> int:
    return stream if isinstance(stream, int) else stream.fileno()


def _private_folder(value: str | None) -> Path | None:
    """The folder TCX_WARM_DIR names, if it is a real folder of this user's that others cannot write."""
    if not value or value == OFF:
        return None
    try:
        info = os.lstat(value)
    except OSError:
        return None
    mode = info.st_mode
    if not stat.S_ISDIR(mode) or info.st_uid != os.getuid() or mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    return Path(value)


def _asks_for_the_preview(argv: list[str]) -> bool:
    """Whether the recorder child's spec (its first argument) has the CUDA preview's capture, whose
    stand-in for the device loads before torch: only a warm process started with it can serve it."""
    try:
        capture = json.loads(argv[0]).get("capture") or []
        return any(str(c).split("=", 1)[0] == PREVIEW_CAPTURE for c in capture)
    except (ValueError, IndexError, AttributeError, TypeError):
        return False


def _key(env: dict[str, str], preview: bool) -> str:
    """Everything a warm process must share with the run it forks for."""
    sources = sorted((str(p), p.stat().st_mtime_ns) for p in _CORE.rglob("*.py"))
    ignored = _PER_RUN | _REAPPLIED | _READ_WHILE_RUNNING
    fixed = sorted((k, v) for k, v in env.items() if k not in ignored)
    text = json.dumps([sys.executable, sys.version, str(_CORE), sources, fixed, preview])
    return hashlib.sha1(text.encode()).hexdigest()[:20]


def _wait_for_a_starting_server(
    folder: Path, key: str, server: subprocess.Popen[bytes] | None = None
) -> None:
    """A warm process started moments ago is still importing torch: waiting for it (idle) costs less
    than a cold start (the same import, paid again). `server`: the one this process started (no
    more waiting once it has exited)."""
    import time

    started = folder / f"{key}.started"
    try:
        age = time.time() - started.lstat().st_mtime
    except OSError:
        return
    deadline = time.monotonic() + max(0.0, min(STARTING_S - age, STARTING_S))
    while not (folder / f"{key}.sock").exists() and time.monotonic() < deadline:
        if server is not None and server.poll() is not None:
            return
        time.sleep(0.05)


def _start_server(
    folder: Path, key: str, env: dict[str, str], cwd: str | None, preview: bool, again: bool
) -> subprocess.Popen[bytes] | None:
    """The first run of an environment leaves a mark; the second (the first, `again`) starts its
    warm process (returned, and waited for: a run that finds it starting waits for it too)."""
    for mark in (f"{key}.seen", f"{key}.started"):
        try:
            os.close(os.open(folder / mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
        except FileExistsError:
            continue
        except OSError:
            return None
        if mark.endswith(".seen"):
            if again:
                continue
            return None
        server_env = {k: v for k, v in env.items() if k != "TORCH_TRACE"}  # each fork reads its own
        if env.get("PYTHONPATH"):  # as the run would have it, though the server starts in `folder`
            here = cwd or os.getcwd()
            server_env["PYTHONPATH"] = os.pathsep.join(
                os.path.normpath(os.path.join(here, p)) for p in env["PYTHONPATH"].split(os.pathsep)
            )
        server = subprocess.Popen(
            [sys.executable, WARM_BOOT, str(folder / f"{key}.sock"), str(IDLE_S)]
            + (["tied"] if folder == _invocation else [])
            + (["preview"] if preview else []),
            env=server_env,
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        if folder == _invocation:
            _started.append(server)
        return server
    return None


def _wait_gone(pid: int) -> None:
    """Until `pid` has ended (it is not this process's child: it cannot be waited for)."""
    import time

    while True:
        try:
            os.kill(pid, 0)
        except OSError:
            return
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    return
        except OSError:
            return
        time.sleep(0.1)
