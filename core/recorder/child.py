"""The recorder child process: run the user's program under capture hooks.

Started by `tcx.core.driver` (`driver.CHILD_MAIN` SPEC_JSON, which calls `main`). It appends
events to the recording named in the spec as they happen and always tries to finish with
a `program_exit` event; the parent adds `outcome` when this process dies without one.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import sys
import traceback
import warnings
from typing import Any

from tcx.core.frames import is_recorder_frame
from tcx.core.recorder import children
from tcx.core.recording import RecordingWriter


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
        if metadata is None:
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
        try:
            message = record.getMessage()
        except Exception:  # a bad format string in a log call is not our problem to raise
            message = str(record.msg)
        self.writer.write("log", logger=record.name, level=record.levelname, message=message)


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    writer = children.ProcessWriter(spec["recording"])
    try:
        exit_event = run(spec, writer)
    except BaseException as exc:
        exit_event = {
            "status": "tcx_error",
            "exc_type": type(exc).__name__,
            "message": str(exc),
            "traceback": traceback.format_exc(),
        }
    writer.write("program_exit", **exit_event)
    writer.close()
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


def run(spec: dict[str, Any], writer: children.ProcessWriter) -> dict[str, Any]:
    from tcx.core.recorder import compat_fakecuda_shim

    compat_fakecuda_shim.preload(spec.get("capture") or [])  # the CUDA preview: before torch loads
    try:
        import torch
    except ImportError as exc:
        return {"status": "setup", "message": f"torch cannot be imported: {exc}"}
    from tcx.core.recorder import compat
    from tcx.core.recorder.captures import install_captures, run_at_end
    from tcx.core.recorder.program import drop_recorder_frames, run_program

    warnings.filterwarnings(
        "ignore", message=".*force disabled by torch.compiler.config.force_disable_caches"
    )
    capture = spec.get("capture") or []
    # The compile caches stay as the program has them, unless the view must see every stage
    # compiled; `tcx cache` (its "caches" capture) keeps them on: it explains their hits and misses.
    caches = "program" if "caches" in capture else spec.get("caches") or "program"
    features = {
        **({"caches_disabled": compat.disable_compile_caches()} if caches == "off" else {}),
        "structured_trace": compat.attach_trace_handler(TraceHandler(writer)),
        "torch_logs": compat.route_torch_logs(LogHandler(writer)),
        "graph_break_types": compat.install_graph_break_hook(
            lambda ev: writer.write("graph_break", **drop_recorder_frames(ev))
        ),
        "backend_override": compat.override_compile(
            spec.get("backend"),
            spec.get("dynamic"),
            spec.get("mode"),
            lambda ev: writer.write("compile_call", **ev),
        ),
    }
    features.update(install_captures(spec.get("capture") or [], writer))
    features["child_processes"] = children.install(spec, writer)
    writer.write(
        "run_start",
        torch_version=compat.TORCH_VERSION,
        torch_full_version=torch.__version__,
        python_version=platform.python_version(),
        platform=platform.platform(),
        pid=os.getpid(),
        backend=spec.get("backend"),
        caches=caches,
        dynamic=spec.get("dynamic"),
        mode=spec.get("mode"),
        features=features,
    )
    exit_event = run_program(spec, writer)
    run_at_end()
    if spec.get("what_if"):  # `tcx recompiles --what-if`: needs the cache entries of this run
        from tcx.core.recorder.compat_recompiles import evaluate_what_if

        evaluate_what_if(spec["what_if"], spec.get("function"), writer)
    return exit_event
