"""Open a saved recording or a TORCH_TRACE log (file or directory) as a RunModel; never runs anything.

Shared by the CLI (cli/session.py), the Python API (`tcx.load`) and `tcx mcp`.
"""

from __future__ import annotations

from tcx.core.errors import UsageError
from tcx.core.model import RunModel, build_model
from tcx.core.run.targets import FileTarget, resolve_target


def open_file(text: str) -> tuple[RunModel, str | None]:
    """The model of the recording or log `text` names, and the function `FILE:func` selects.

    A program (script.py, module:func) is a usage error: opening an input never executes code."""
    target = resolve_target(text)
    if not isinstance(target, FileTarget):
        raise UsageError(
            f"{text!r} is not a recording or a log. Record it first: tcx explain {text} --save run.tcx"
        )
    return model_of(target), target.function


def model_of(target: FileTarget) -> RunModel:
    """A recording (its capture checked: a run that lost events is an error, not low counts) or a
    TORCH_TRACE log."""
    if target.kind == "recording":
        from tcx.core.ingest.recording import load_recording
        from tcx.core.run.observed import check_capture

        model = build_model(load_recording(target.path), "recording")
        check_capture(model)
        return model
    from tcx.core.ingest.trace_log import load_trace

    return build_model(load_trace(target.path), "trace")
