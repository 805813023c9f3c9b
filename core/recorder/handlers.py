"""The logging handlers through which the recorder takes torch's output: the structured trace
(every event TORCH_TRACE writes, and the callers of each compile), and torch's log messages.
Used by the recorder child, the processes it follows (core/recorder/children.py) and the
in-process recorder."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

from tcx.core.frames import is_recorder_frame
from tcx.core.ingest.recording import RecordingWriter

_QUIET = [0]  # > 0 while tcx compiles something of its own (tcx numerics' probes): not the program's


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Drop torch's trace and log records while tcx itself compiles (they are not the program's)."""
    _QUIET[0] += 1
    try:
        yield
    finally:
        _QUIET[0] -= 1


class TraceHandler(logging.Handler):
    """Streams every structured-trace record (metadata + payload) into the recording.

    At each `dynamo_start` it also writes `compile_stack`: the Python frames that called the
    frame being compiled. torch's own stack in that event leaves out the direct caller of a
    `torch.compile`-wrapped function (it is cut above Dynamo's wrapper), and `script.py:func`
    selects every compile that ran while func was on the stack."""

    def __init__(self, writer: RecordingWriter) -> None:
        super().__init__(logging.DEBUG)
        self.writer = writer

    def emit(self, record: logging.LogRecord) -> None:
        metadata = getattr(record, "metadata", None)
        if metadata is None or _QUIET[0]:
            return
        self.writer.write("trace", md=metadata, payload=getattr(record, "payload", None))
        if "dynamo_start" in metadata:
            self.writer.write(
                "compile_stack",
                compile_id=f"{metadata.get('frame_id')}/{metadata.get('frame_compile_id')}",
                attempt=metadata.get("attempt"),
                stack=caller_frames(sys._getframe(1)),
            )


def caller_frames(frame: Any) -> list[dict[str, Any]]:
    """The frames on the Python stack outside torch, logging and tcx's recorder, outermost first."""
    out = []
    while frame is not None:
        file = frame.f_code.co_filename
        if not _hidden(file):
            out.append({"file": file, "line": frame.f_lineno, "name": frame.f_code.co_name})
        frame = frame.f_back
    return out[::-1]


_TORCH_DIR = ""


def _hidden(file: str) -> bool:
    global _TORCH_DIR
    if not _TORCH_DIR:
        torch = sys.modules.get("torch")
        _TORCH_DIR = os.path.dirname(getattr(torch, "__file__", "") or "") + os.sep
    return file.startswith(_TORCH_DIR) or file == logging.__file__ or is_recorder_frame(file)


class LogHandler(logging.Handler):
    """Keeps torch's own log messages (e.g. the `.item()` warning) instead of printing them."""

    def __init__(self, writer: RecordingWriter) -> None:
        super().__init__(logging.DEBUG)
        self.writer = writer

    def emit(self, record: logging.LogRecord) -> None:
        if _QUIET[0]:
            return
        try:
            message = record.getMessage()
        except Exception:  # a bad format string in a log call is not our problem to raise
            message = str(record.msg)
        self.writer.write("log", logger=record.name, level=record.levelname, message=message)
