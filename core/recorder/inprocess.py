"""Record torch.compile inside the current process: `tcx.record()` and the pytest plugin.

The CLI records in a child process so a crash cannot take tcx down; a notebook, a script or a
test suite already runs the code in-process, so these record there, into a recording file of
the same format (what `tcx explain FILE` reads): the structured trace, typed graph breaks,
torch's log records, the program's `torch.compile` calls and the optional captures a view asks
for (core/recorder/captures.py).

torch gives no way to remove most hooks, so the graph-break hook and each capture are installed
once per process, the first time a recording asks for them, and stay: outside a recorded block
they write nowhere (`ActiveWriter`). What a recording changes only for its block is restored:
the structured-trace handler, the log handler, `torch.compile` and the compile-cache flag.
"""

from __future__ import annotations

import functools
import hashlib
import linecache
import logging
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from tcx.core import pysource
from tcx.core.errors import UsageError
from tcx.core.ingest.recording import Recording, RecordingWriter, load_recording, save_copy, write_header

# Captures that must be installed before torch is imported (the CUDA preview's fake device):
# a recording in a process that already runs torch cannot have them.
NEEDS_FRESH_PROCESS = ("cuda_preview", "device")
MAX_SOURCE_BYTES = 1_000_000  # as the CLI's snapshots (core/run/driver.py): larger files by hash only

_ACTIVE: list[InProcessRecorder] = []
_INSTALLED: dict[str, str | None] = {}  # hook or capture name -> None (installed) or why not
T = TypeVar("T")


class ActiveWriter:
    """The RecordingWriter interface for hooks installed once per process: every recorder whose
    block is running gets the event; with none running it is dropped."""

    def write(self, kind: str, **fields: Any) -> None:
        for recorder in list(_ACTIVE):
            recorder.writer.write(kind, **fields)


class InProcessRecorder:
    """`with InProcessRecorder() as rec: ...` records every compile in the block.

    `backend`: the backend every `torch.compile()` called in the block uses (None: what the
    program asks). `captures`: optional captures (core/recorder/captures.CAPTURES) to install.
    `caches`: "off" (every stage really compiles, as the views of graphs and kernels need) or
    "program" (the compile caches as the program has them)."""

    def __init__(
        self,
        label: str = "in-process",
        *,
        backend: str | None = None,
        captures: tuple[str, ...] = (),
        caches: str = "off",
    ) -> None:
        self.label = label
        self.backend = backend
        self.captures = tuple(dict.fromkeys(captures))
        # `tcx cache` (the "caches" capture) explains hits and misses: the caches stay as they are
        self.caches = "program" if "caches" in self.captures else caches
        _check_captures(self.captures)
        self.folder = Path(tempfile.mkdtemp(prefix="tcx-inprocess-"))
        self.path = self.folder / "run.tcx"
        self.writer: RecordingWriter = None  # type: ignore[assignment]  # opened by __enter__
        self.finished = False
        self._restore: list[Callable[[], None]] = []

    def __enter__(self) -> InProcessRecorder:
        if self.finished or self in _ACTIVE:
            raise UsageError("this recorder has already recorded a block; start a new one for the next.")
        try:
            import torch
        except ImportError as exc:
            raise UsageError(
                f"recording torch.compile needs torch, which cannot be imported ({exc}).",
                hint="tcx records with the torch installed next to it: pip install torch.",
            ) from None

        from tcx.core.recorder import compat
        from tcx.core.recorder.captures import run_at_start
        from tcx.core.recorder.handlers import LogHandler, TraceHandler

        write_header(
            self.path,
            target=self.label,
            argv=list(sys.argv),
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            cwd=os.getcwd(),
            in_process=True,
        )
        self.writer = RecordingWriter(self.path)
        features: dict[str, str | None] = {
            "graph_break_types": _install_break_dispatch(),
            "compile_hook": _install_compile_dispatch(),
        }
        if "hidden_from_dynamo" not in _INSTALLED:  # for good: torch has no way to unskip a folder
            _INSTALLED["hidden_from_dynamo"] = compat.hide_from_dynamo()
        features["hidden_from_dynamo"] = _INSTALLED["hidden_from_dynamo"]
        features.update(_install_captures(self.captures))
        compat.reset_dynamo()
        if self.caches == "off":
            previous = compat.caches_disabled(True)
            if previous is not None:
                self._restore.append(lambda: compat.caches_disabled(previous))
        trace = TraceHandler(self.writer)
        features["structured_trace"] = compat.attach_trace_handler(trace)
        self._restore.append(lambda: compat.detach_trace_handler(trace))
        logs, torch_logger = LogHandler(self.writer), logging.getLogger("torch")
        torch_logger.addHandler(logs)  # torch's records still print as they did; tcx keeps a copy
        self._restore.append(lambda: torch_logger.removeHandler(logs))
        program_compile = torch.compile
        features["backend_override"] = compat.override_compile(
            self.backend, None, None, lambda ev: self.writer.write("compile_call", **ev)
        )
        self._restore.append(lambda: setattr(torch, "compile", program_compile))
        self.writer.write(
            "run_start",
            torch_version=compat.TORCH_VERSION,
            torch_full_version=torch.__version__,
            python_version=platform.python_version(),
            platform=platform.platform(),
            pid=os.getpid(),
            backend=self.backend,
            **({"backend_reason": "chosen with tcx.record(backend=...)"} if self.backend else {}),
            caches=self.caches,
            features=features,
        )
        _ACTIVE.append(self)
        run_at_start()  # after joining: a capture's per-run events (its config) come to this recording
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        from tcx.core.recorder import compat
        from tcx.core.recorder.captures import run_at_end

        try:
            run_at_end()
        finally:
            _ACTIVE.remove(self)
            for restore in reversed(self._restore):
                restore()
            self._restore.clear()
            compat.reset_dynamo()
            self.writer.write("program_exit", **_exit_event(exc))
            self.writer.close()
            self.finished = True
            _snapshot_sources(self.path)

    def recording(self) -> Recording:
        """The recorded events, read back as the CLI reads a saved recording."""
        return load_recording(self.path)

    def save(self, dest: str | Path) -> None:
        """Keep the recording at `dest` (`.gz` compresses); `tcx explain DEST` reads it."""
        save_copy(self.path, dest)

    def cleanup(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def record_each_call(
    fn: Callable[..., T], start: Callable[[], AbstractContextManager[Any]]
) -> Callable[..., T]:
    """`fn` recorded on every call, each call in a fresh recording (the latest is `wrapper.run`).

    The wrapper lives in the recorder's package, so its frame is left out of the user stacks
    a recording shows (core/frames.is_recorder_frame)."""

    @functools.wraps(fn)
    def recorded(*args: Any, **kwargs: Any) -> T:
        with start() as run:
            recorded.run = run  # type: ignore[attr-defined]
            return fn(*args, **kwargs)

    recorded.run = None  # type: ignore[attr-defined]
    return recorded


def _check_captures(names: tuple[str, ...]) -> None:
    from tcx.core.recorder.captures import CAPTURES

    for name in names:
        base = name.partition("=")[0]
        if base not in CAPTURES:
            raise UsageError(
                f"unknown capture {name!r}.", hint="Captures: " + ", ".join(sorted(CAPTURES)) + "."
            )
        if base in NEEDS_FRESH_PROCESS:
            raise UsageError(
                f"the {base!r} capture must be installed before torch is imported, so it cannot record "
                "inside a running process.",
                hint="Use the command line, which records in a fresh process: "
                "tcx codegen script.py --target cuda:sm_90.",
            )


def _install_captures(names: tuple[str, ...]) -> dict[str, str | None]:
    """Each capture installed once per process (into the ActiveWriter); its status every time."""
    from tcx.core.recorder.captures import install_captures

    new = [n for n in names if n not in _INSTALLED]
    if new:
        _INSTALLED.update(install_captures(new, ActiveWriter()))  # type: ignore[arg-type]
    return {n: _INSTALLED[n] for n in names}


def _install_break_dispatch() -> str | None:
    """Dynamo's graph-break hook is installed once per process and feeds the active recorders."""
    if "graph_break_types" not in _INSTALLED:
        from tcx.core.recorder import compat
        from tcx.core.recorder.program import drop_recorder_frames

        writer = ActiveWriter()

        def on_break(event: dict[str, Any]) -> None:
            writer.write("graph_break", **drop_recorder_frames(event))

        _INSTALLED["graph_break_types"] = compat.install_graph_break_hook(on_break)
    return _INSTALLED["graph_break_types"]


def _install_compile_dispatch() -> str | None:
    """The hook that sees each compile (core/model/status.py checks the trace holds each), once
    per process, feeding the active recorders."""
    if "compile_hook" not in _INSTALLED:
        from tcx.core.recorder import compat

        writer = ActiveWriter()
        _INSTALLED["compile_hook"] = compat.install_compile_hook(
            lambda cid: writer.write("compile_seen", compile_id=cid)
        )
    return _INSTALLED["compile_hook"]


def _exit_event(exc: BaseException | None) -> dict[str, Any]:
    """How the block ended, in the fields the child process writes (core/recorder/program.py)."""
    if exc is None:
        return {"status": "ok"}
    if isinstance(exc, SystemExit) and exc.code in (None, 0):
        return {"status": "ok", "exit_code": 0}
    from tcx.core.recorder.program import user_traceback

    return {
        "status": "exception",
        "exc_type": type(exc).__name__,
        "message": str(exc)[:4000],
        "traceback": user_traceback(exc),
    }


def _snapshot_sources(path: Path) -> None:
    """Embed the user's files the recording points at (break stacks, compiled frames), as the CLI
    does after a live run. A notebook cell has no file on disk: its text comes from linecache,
    where IPython keeps it."""
    from tcx.core.frames import frame_origin, is_recorder_frame
    from tcx.core.model import build_model

    model = build_model(load_recording(path), "live")
    files = [f.file for b in model.graph_breaks for f in b.user_stack]
    files += [f.file for c in model.compiles.values() for f in c.stack]
    files += [c.co_filename for c in model.compiles.values() if c.co_filename]
    writer = RecordingWriter(path)
    for file in dict.fromkeys(files):
        if frame_origin(file) != "user" or is_recorder_frame(file):
            continue
        data = _source_bytes(file)
        if data is None:
            continue
        event: dict[str, Any] = {"file": file, "sha256": hashlib.sha256(data).hexdigest()}
        if len(data) <= MAX_SOURCE_BYTES:
            event["text"] = pysource.decode_lenient(data)  # as Python reads it: its coding cookie, no BOM
        writer.write("source", **event)
    writer.close()


def _source_bytes(file: str) -> bytes | None:
    try:
        return Path(file).read_bytes()
    except (OSError, ValueError):
        lines = linecache.getlines(file)
        return "".join(lines).encode("utf-8") if lines else None


def _forget_in_child() -> None:
    """A process forked inside a recorded block does not write into its parent's recording."""
    _ACTIVE.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
