"""The parent side of a live run: start the recorder child, enforce the timeout, keep what it wrote.

The child streams events into the recording as they happen; whatever happens to it
(exception, sys.exit, segfault, timeout, Ctrl-C) the parent appends an `outcome` event,
so the recording always says how the run ended.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from tcx.core import pysource
from tcx.core.errors import UsageError
from tcx.core.ingest.recording import RecordingWriter, save_copy, write_header
from tcx.core.run import warm
from tcx.core.run.processes import Supervisor
from tcx.core.run.progress import Progress, RecordingFollower
from tcx.core.run.targets import ProgramTarget

OUTPUT_TAIL_LINES = 30
OUTPUT_TAIL_BYTES = 64 * 1024
OUTPUT_LINE_CHARS = 1000
MAX_SOURCE_BYTES = 1_000_000
# The recorder child, run as a script (its docstring says why not -m or -c).
CHILD_BOOT = str(Path(__file__).resolve().parent.parent / "recorder" / "boot.py")


@dataclass
class RunOptions:
    backend: str | None = None  # None: each torch.compile call keeps the program's own backend
    caches: str = "program"  # "program": the compile caches as the program has them; "off": disabled
    dynamic: bool | None = None
    mode: str | None = None
    calls: list[list[dict]] | None = None
    args: list[str] = field(default_factory=list)
    timeout: float | None = None
    show_output: bool = False
    backward: bool | None = None
    save: str | None = None
    keep_last: bool = False  # keep the recording in .tcx/last.tcx (core/run/last_run.py)
    capture: list[str] = field(default_factory=list)  # optional captures (core/recorder/captures.py)
    what_if: list[list[dict]] | None = None  # `tcx recompiles --what-if`: evaluated after the run
    env: dict[str, str] = field(default_factory=dict)  # added to the program's environment (`tcx cache`)
    cwd: str | None = None  # the program's working directory (None: tcx's own; `tcx fix --isolate`: a copy)
    # a later run of this command has the same environment: this one forks from a warm process
    # started now (core/run/warm.py `again`), where the command keeps one
    warm_again: bool = False


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
    if opts.save:
        check_save(opts.save, target.script)
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
        "caches": opts.caches,
        "dynamic": opts.dynamic,
        "mode": opts.mode,
        "backward": opts.backward,
        "capture": opts.capture,
        "what_if": opts.what_if,
    }
    output_path = workdir / "output.txt"
    if not opts.show_output:
        spec["output_end"] = str(workdir / "output.end")  # how far the program's own output goes
    started = time.monotonic()
    with open(output_path, "wb") as out:
        sink = sys.stderr if opts.show_output else out
        env = {**os.environ, **opts.env, "PYTHONUNBUFFERED": "1"}
        with Supervisor() as supervisor:
            forked = warm.start([json.dumps(spec)], env, opts.cwd, sink, sink, opts.warm_again)
            proc = (
                supervisor.adopt(forked)
                if forked
                else supervisor.popen(
                    [sys.executable, CHILD_BOOT, json.dumps(spec)],
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=sink,
                    env=env,
                    cwd=opts.cwd,
                )
            )
            follower = RecordingFollower(path) if progress else None
            poll = (lambda: progress(follower.poll())) if progress and follower else None
            timed_out = supervisor.wait(opts.timeout, poll)
    rc = proc.returncode
    writer = RecordingWriter(path)
    writer.write(
        "outcome",
        returncode=rc,
        signal=signal.Signals(-rc).name if rc is not None and rc < 0 else None,
        timed_out=timed_out,
        timeout_s=opts.timeout,
        interrupted=supervisor.stop_signal is not None,
        interrupted_by=supervisor.stop_signal,
        wall_s=round(time.monotonic() - started, 3),
        output_tail=_tail(output_path, _program_end(workdir / "output.end")),
    )
    writer.close()
    return LiveRun(
        path=path,
        workdir=workdir,
        returncode=rc,
        timed_out=timed_out,
        interrupted=supervisor.stop_signal is not None,
    )


def attach_sources(path: Path, files: list[str]) -> None:
    """Embed the user's source files a report points at, so `tcx show` works elsewhere.

    Each carries its sha256: a view shows a file from disk only while it still has that hash
    (a file larger than MAX_SOURCE_BYTES is recorded by its hash alone)."""
    writer = RecordingWriter(path)
    for file in dict.fromkeys(files):
        try:
            data = Path(file).read_bytes()
        except OSError:
            continue
        event = {"file": file, "sha256": hashlib.sha256(data).hexdigest()}
        if len(data) <= MAX_SOURCE_BYTES:
            event["text"] = pysource.decode_lenient(data)  # as Python reads it: its coding cookie, no BOM
        writer.write("source", **event)
    writer.close()


def check_save(dest: str, script: str | None = None, *, directory: bool = False) -> None:
    """Refuse a `--save` path that cannot be written before anything runs, not after the run.

    `directory`: DEST is a folder to create or fill (`tcx record`), else a file."""
    path = Path(dest)
    if script and path.exists() and os.path.samefile(path, script):
        raise UsageError(f"--save {dest!r} is the program being run; save the recording elsewhere.")
    try:
        if path.exists() and not (path.is_dir() if directory else path.is_file()):
            raise UsageError(f"--save {dest!r} is not a {'directory' if directory else 'regular file'}.")
        # A file is saved as a new file renamed over DEST (core/files.py): its folder must be writable.
        here = path if directory and path.exists() else None
        folder = here or next(p for p in path.absolute().parents if p.exists())
        if not folder.is_dir():
            raise UsageError(f"--save {dest!r}: {str(folder)!r} is not a directory.")
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as exc:
        raise UsageError(
            f"--save {dest!r} cannot be written ({exc.strerror or exc}); nothing was run."
        ) from None


def keep(run: LiveRun, dest: str) -> None:
    save_copy(run.path, dest)


def _program_end(mark: Path) -> int | None:
    """The byte count of output the child saw when the program ended (core/recorder/child.py)."""
    try:
        return int(mark.read_text(encoding="ascii"))
    except (OSError, ValueError):
        return None


def _tail(path: Path, end: int | None = None) -> list[str]:
    """The program's last lines of output, bounded: at most `OUTPUT_TAIL_LINES` lines of at most
    `OUTPUT_LINE_CHARS` characters, read from the last `OUTPUT_TAIL_BYTES` bytes before `end` (where
    the program ended; what came after, while the interpreter shut down, is counted in a marker line);
    a marker line says what was cut."""
    try:
        size = os.path.getsize(path)
        stop = size if end is None or not 0 <= end <= size else end
        with open(path, "rb") as fh:
            fh.seek(max(0, stop - OUTPUT_TAIL_BYTES))
            data = fh.read(min(stop, OUTPUT_TAIL_BYTES))
    except OSError:
        return []
    raw = data.removesuffix(b"\n").split(b"\n")[-OUTPUT_TAIL_LINES:] if data else []
    earlier = stop - len(b"\n".join(raw)) - data.endswith(b"\n")
    lines = [_cap(line.rstrip(b"\r").decode("utf-8", errors="replace")) for line in raw]
    if size > stop:
        lines.insert(
            0, f"[… {size - stop:,} bytes printed after the program ended, while Python shut down, not shown]"
        )
    if earlier > 0:
        lines.insert(0, f"[… {earlier:,} earlier bytes of output cut]")
    return lines


def _cap(line: str) -> str:
    if len(line) <= OUTPUT_LINE_CHARS:
        return line
    return f"{line[:OUTPUT_LINE_CHARS]} [… {len(line) - OUTPUT_LINE_CHARS:,} more characters cut]"
