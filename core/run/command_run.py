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
from typing import TYPE_CHECKING, Any

from tcx.core.errors import UsageError
from tcx.core.run.processes import Supervisor

if TYPE_CHECKING:
    from tcx.core.model import RunModel


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
    if disable_caches and env.get("TCX_KEEP_KERNEL_CACHE") == "1":  # core/recorder/compat.py
        env.update(TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0")
        env["TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO"] = "0"
    elif disable_caches:
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
    from tcx.core.files import copy_file

    target = Path(dest)
    target.mkdir(parents=True, exist_ok=True)
    for log in run.trace_dir.iterdir():
        copy_file(log, target / log.name)  # a link already at that name is replaced, not written through


def command_model(run: CommandRun, argv: list[str]) -> RunModel:
    """The model of what the command's processes logged, with how the command ended: its status
    reads as any run's (core/model/status.py). InputError when it logged nothing."""
    from tcx.core.ingest.trace_log import load_trace
    from tcx.core.model import build_model

    model = build_model(load_trace(run.trace_dir).end_with(_command_end(run), " ".join(argv)), "trace")
    model.sources.live = True  # the command just ran here: the files on disk are the ones it ran
    return model


def _command_end(run: CommandRun) -> list[dict[str, Any]]:
    """The recorder events a live run ends with (`outcome`, and `program_exit` when the command
    exited by itself), for a command `tcx record` ran."""
    outcome = {
        "kind": "outcome",
        "returncode": run.returncode,
        "signal": run.signal_name,
        "timed_out": run.timed_out,
        "interrupted": bool(run.interrupted_by),
        "interrupted_by": run.interrupted_by,
        "wall_s": run.wall_s,
    }
    if run.signal_name or run.timed_out or run.interrupted_by:
        return [outcome]
    status = "ok" if run.returncode == 0 else "exit"
    return [{"kind": "program_exit", "status": status, "exit_code": run.returncode}, outcome]
