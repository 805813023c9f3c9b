"""`tcx record -- CMD`: run any command with TORCH_TRACE pointed at a fresh directory.

Works for anything that runs torch in its processes — a script, `torchrun` with several
ranks, a test runner: each process writes its own trace log, which tcx then reads with
the same model and views as a live recording.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tcx.core.errors import UsageError
from tcx.core.processes import Supervisor


@dataclass
class CommandRun:
    trace_dir: Path
    returncode: int | None
    timed_out: bool
    wall_s: float
    interrupted_by: str | None = None  # "SIGINT" / "SIGTERM" when tcx was asked to stop

    @property
    def signal_name(self) -> str | None:
        rc = self.returncode
        return signal.Signals(-rc).name if rc is not None and rc < 0 else None


def run_command(argv: list[str], *, timeout: float | None, disable_caches: bool) -> CommandRun:
    """Run `argv` with TORCH_TRACE set; SIGINT/SIGTERM and --timeout stop every process it started."""
    if not argv:
        raise UsageError("tcx record needs a command after `--`, e.g. tcx record -- python train.py")
    if shutil.which(argv[0]) is None and not Path(argv[0]).exists():
        raise UsageError(f"command not found: {argv[0]!r}.")
    trace_dir = Path(tempfile.mkdtemp(prefix="tcx-trace-"))
    env = {**os.environ, "TORCH_TRACE": str(trace_dir)}
    if disable_caches:
        env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    started = time.monotonic()
    with Supervisor() as supervisor:
        # The command's output goes to stderr: stdout is the report (JSON must stay parseable).
        proc = supervisor.popen(argv, env=env, stdout=sys.stderr)
        timed_out = supervisor.wait(timeout)
    wall_s = round(time.monotonic() - started, 3)
    return CommandRun(trace_dir, proc.returncode, timed_out, wall_s, supervisor.stop_signal)


def keep_logs(run: CommandRun, dest: str) -> None:
    """Copy the trace logs to `dest` (a directory, created if needed)."""
    target = Path(dest)
    target.mkdir(parents=True, exist_ok=True)
    for log in run.trace_dir.iterdir():
        shutil.copy2(log, target / log.name)
