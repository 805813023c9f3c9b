"""What a CUDA preview assumed and what it cannot know, read off its recording (torch-free).

The preview (core/recorder/compat_fakecuda.py) runs the whole pipeline on fake CUDA tensors;
where a decision needs a real GPU it records the decision and its assumption
(`cuda_preview_decision`), and it records the device it assumed (`cuda_preview_device`).
This module turns those events, and the way the program ended, into the notes every view
of a preview prints: a preview is exact except where one of these notes says otherwise.
"""

from __future__ import annotations

from typing import Any

from tcx.core.analysis import RunModel
from tcx.core.frames import innermost_user_frame, parse_stack_trace

# Always true of a preview, whatever the program does.
CANNOT_KNOW = (
    "values: the program runs on fake tensors (shapes, dtypes, strides; no data), so nothing "
    "is computed and a line that needs a value (.item(), printing values, numpy) stops the preview",
    "runtime choices: which of the configs listed in each Triton kernel the GPU picks at its first "
    "launch (and coordinate-descent tuning) are timed on the GPU",
    "CUDA graphs at run time: recording, replay, re-recording for new shapes and mutations of "
    "non-static inputs are decided when a graph runs on the GPU",
)
# Exceptions that mean "the program needed a tensor's value".
VALUE_ERRORS = (
    "DataDependentOutputException",
    "GuardOnDataDependentSymNode",
    "DynamicOutputShapeException",
    "UnsupportedFakeTensorException",
)
WHY = {
    "autotune": "needs the GPU to time the candidates",
    "pad_mm": "needs the GPU to time the padded and unpadded matmul",
    "sdpa": "tcx's model of torch's C++ select_sdp_backend (torch needs the CUDA runtime for its own)",
}


def preview_notes(model: RunModel, arch: str | None) -> dict[str, Any]:
    device = next(
        (e for e in model.recorder_events if e.get("kind") == "cuda_preview_device"),
        None,
    )
    decisions = []
    for e in model.recorder_events:
        if e.get("kind") != "cuda_preview_decision":
            continue
        decisions.append(
            {
                "decision": e.get("decision"),
                "compile_id": e.get("compile_id"),
                "graph": e.get("graph"),
                "what": _what(e),
                "assumed": e.get("assumed"),
                "why": WHY.get(str(e.get("decision")), e.get("why")),
                "details": {
                    k: v
                    for k, v in e.items()
                    if k not in ("kind", "seq", "t", "decision", "compile_id", "graph", "assumed", "why")
                },
            }
        )
    return {
        "arch": (device or {}).get("arch") or arch,
        "assumptions": list((device or {}).get("assumptions") or []),
        "notes": list((device or {}).get("notes") or []),
        "decisions": decisions,
        "stopped": _stopped(model),
        "cannot_know": list(CANNOT_KNOW),
    }


def _what(e: dict[str, Any]) -> str:
    kind = e.get("decision")
    if kind == "autotune":
        sizes = " x ".join("x".join(map(str, s)) for s in e.get("inputs") or [])
        return f"{e.get('op')} ({sizes}): {e.get('choices')} candidates"
    if kind == "pad_mm":
        sizes = " x ".join("x".join(map(str, s)) for s in e.get("inputs") or [])
        return f"pad {e.get('op')} ({sizes})?"
    if kind == "sdpa":
        refused = "; ".join(f"{k}: {v}" for k, v in (e.get("refused") or {}).items())
        shapes = " ".join("x".join(map(str, s)) for s in (e.get("shapes") or [])[:1])
        return f"scaled_dot_product_attention {e.get('dtype')} {shapes} -> {e.get('op')}" + (
            f" (refused {refused})" if refused else ""
        )
    return str(e.get("op") or kind)


def _stopped(model: RunModel) -> str | None:
    """Where the program stopped because it needed a value, if it did."""
    exit_event = model.program_exit or {}
    if exit_event.get("status") != "exception":
        return None
    exc = str(exit_event.get("exc_type") or "")
    message = str(exit_event.get("message") or "")
    if exc not in VALUE_ERRORS and not any(name in message for name in VALUE_ERRORS):
        return None
    frame = innermost_user_frame(parse_stack_trace(str(exit_event.get("traceback") or "")))
    where = f"{frame['file']}:{frame['line']}" if frame else "an unknown line"
    return (
        f"the program stopped at {where} ({exc}): it needs a tensor's value, which a preview does "
        "not compute; compiles after that line are not previewed"
    )
