"""The parent side of a live run: start the recorder child, enforce the timeout, keep what it wrote.

The child streams events into the recording as they happen; whatever happens to it
(exception, sys.exit, segfault, timeout, Ctrl-C) the parent appends an `outcome` event,
so the recording always says how the run ended.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tcx.core.progress import Progress, RecordingFollower
from tcx.core.recording import RecordingWriter, save_copy, write_header
from tcx.core.targets import ProgramTarget

OUTPUT_TAIL_LINES = 30
POLL_S = 0.25
MAX_SOURCE_BYTES = 1_000_000


@dataclass
class RunOptions:
    backend: str | None = None
    backend_reason: str = ""
    dynamic: bool | None = None
    mode: str | None = None
    calls: list[list[dict]] | None = None
    args: list[str] = field(default_factory=list)
    timeout: float | None = None
    show_output: bool = False
    backward: bool | None = None
    save: str | None = None
    capture: list[str] = field(default_factory=list)  # optional captures (core/recorder/captures.py)
    what_if: list[list[dict]] | None = None  # `tcx recompiles --what-if`: evaluated after the run


@dataclass
class LiveRun:
    """A finished live run: where its recording is, and how the child process ended."""

    path: Path
    workdir: Path
    returncode: int | None
    timed_out: bool
    interrupted: bool

    def cleanup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


def record(
    target: ProgramTarget, opts: RunOptions, progress: Callable[[Progress], None] | None = None
) -> LiveRun:
    """Run the target under the recorder; `progress` is called a few times a second while it runs."""
    workdir = Path(tempfile.mkdtemp(prefix="tcx-run-"))
    path = workdir / "run.tcx"
    write_header(
        path,
        target=target.label,
        argv=sys.argv,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        cwd=os.getcwd(),
    )
    spec = {
        "recording": str(path),
        "script": target.script,
        "module": target.module,
        "function": target.function,
        "args": opts.args,
        "calls": opts.calls,
        "backend": opts.backend,
        "backend_reason": opts.backend_reason,
        "dynamic": opts.dynamic,
        "mode": opts.mode,
        "backward": opts.backward,
        "capture": opts.capture,
        "what_if": opts.what_if,
    }
    output_path = workdir / "output.txt"
    started = time.monotonic()
    timed_out = interrupted = False
    with open(output_path, "wb") as out:
        sink = sys.stderr if opts.show_output else out
        proc = subprocess.Popen(
            [sys.executable, "-m", "tcx.core.recorder.child", json.dumps(spec)],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            _wait(proc, opts.timeout, RecordingFollower(path) if progress else None, progress)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(proc)
        except KeyboardInterrupt:
            interrupted = True
            _kill(proc)
    rc = proc.returncode
    writer = RecordingWriter(path)
    writer.write(
        "outcome",
        returncode=rc,
        signal=signal.Signals(-rc).name if rc is not None and rc < 0 else None,
        timed_out=timed_out,
        timeout_s=opts.timeout,
        interrupted=interrupted,
        wall_s=round(time.monotonic() - started, 3),
        output_tail=_tail(output_path),
    )
    writer.close()
    run = LiveRun(path=path, workdir=workdir, returncode=rc, timed_out=timed_out, interrupted=interrupted)
    return run


def _wait(
    proc: subprocess.Popen[Any],
    timeout: float | None,
    follower: RecordingFollower | None,
    progress: Callable[[Progress], None] | None,
) -> None:
    if follower is None or progress is None:
        proc.wait(timeout=timeout)
        return
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            proc.wait(timeout=POLL_S)
            return
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise
            progress(follower.poll())


def attach_sources(path: Path, files: list[str]) -> None:
    """Embed the user's source files a report points at, so `tcx show` works elsewhere."""
    writer = RecordingWriter(path)
    for file in dict.fromkeys(files):
        try:
            if os.path.getsize(file) > MAX_SOURCE_BYTES:
                continue
            text = Path(file).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        writer.write("source", file=file, text=text)
    writer.close()


def keep(run: LiveRun, dest: str) -> None:
    save_copy(run.path, dest)


def _kill(proc: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _tail(path: Path) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return [line.rstrip("\n") for line in deque(fh, maxlen=OUTPUT_TAIL_LINES)]
    except OSError:
        return []
