"""The recorder child process: run the user's program under capture hooks.

Started by `tcx.core.run.driver` (`python recorder/boot.py SPEC_JSON`, which calls `main`). It appends
events to the recording named in the spec as they happen and always tries to finish with
a `program_exit` event; the parent adds `outcome` when this process dies without one.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import traceback
import warnings
from typing import Any

from tcx.core.recorder import children
from tcx.core.recorder.handlers import LogHandler, TraceHandler


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
    sys.stdout.flush()
    sys.stderr.flush()
    _mark_output_end(spec.get("output_end"))
    writer.write("program_exit", **exit_event)
    writer.close()
    return 0


def _mark_output_end(mark: str | None) -> None:
    """Write how many bytes of output the program printed, so the run's output tail ends where the
    program did: what the interpreter prints while it shuts down this process afterwards (a leak
    report from an extension tcx's recorder loaded, say) is tcx's, not the program's."""
    if not mark:
        return
    try:
        end = os.lseek(1, 0, os.SEEK_CUR)  # the file the run gave the child, whatever sys.stdout is now
        with open(mark, "w", encoding="ascii") as fh:
            fh.write(str(end))
    except OSError:
        pass  # output to a terminal or a pipe: the whole tail is kept


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
        "hidden_from_dynamo": compat.hide_from_dynamo(),
        **({"caches_disabled": compat.disable_compile_caches()} if caches == "off" else {}),
        "structured_trace": compat.attach_trace_handler(TraceHandler(writer)),
        "torch_logs": compat.route_torch_logs(LogHandler(writer)),
        "graph_break_types": compat.install_graph_break_hook(
            lambda ev: writer.write("graph_break", **drop_recorder_frames(ev))
        ),
        "compile_hook": compat.install_compile_hook(lambda cid: writer.write("compile_seen", compile_id=cid)),
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
