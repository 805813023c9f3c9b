"""What a CUDA preview assumed and what it cannot know, read off its recording (torch-free).

The preview (core/recorder/compat_fakecuda.py) runs the whole program on fake CUDA tensors that
carry their values; where a decision needs a real GPU it records the decision and its assumption
(`cuda_preview_decision`), and it records the device it assumed (`cuda_preview_device`).
This module turns those events, and the way the program ended, into the notes every view
of a preview prints: a preview is exact except where one of these notes says otherwise. It also
tells a view that a recording is a preview, so a saved preview opens without --target.
"""

from __future__ import annotations

from typing import Any

from tcx.core.model import RunModel
from tcx.core.model.failure import failure

# Always true of a preview, whatever the program does.
CANNOT_KNOW = (
    "values: the program computes on the CPU while it compiles for the GPU, so lines that need a "
    "value (.item(), an if on a tensor, printing) run on; but random numbers drawn on the CUDA device "
    "come from a CPU generator (seeded from the CUDA generator's state) and float results can differ "
    "from the GPU's in their last bits: a branch on a value near its threshold can go the other way",
    "runtime choices: which of the configs listed in each Triton kernel the GPU picks at its first "
    "launch (and coordinate-descent tuning) are timed on the GPU",
    "CUDA graphs at run time: recording, replay, re-recording for new shapes and mutations of "
    "non-static inputs are decided when a graph runs on the GPU",
    "device memory: nothing is allocated on a device, so torch.cuda.memory_allocated() and the "
    "other memory statistics read 0",
)
# Exceptions that mean "the program needed a tensor's value" the preview could not give it.
VALUE_ERRORS = (
    "PreviewValueUnknown",
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


def recorded_preview(model: RunModel) -> str | None:
    """The architecture a CUDA preview recording was made for (`sm_90`), None for any other run."""
    device = model.captures.first("cuda_preview_device")
    return (str(device.get("arch") or "") or None) if device else None


def resolve_device(model: RunModel, device: str) -> str:
    """The code a view shows: what ran (`run`), or for a recording of a CUDA preview, the preview
    (so a saved preview opens in every view without --target)."""
    if device == "run":
        arch = recorded_preview(model)
        if arch:
            return f"cuda:{arch}"
    return device


def preview_notes(model: RunModel, arch: str | None) -> dict[str, Any]:
    device = model.captures.first("cuda_preview_device")
    decisions = []
    for e in model.captures.of("cuda_preview_decision"):
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
    """Where a previewed program stopped, with torch's message, when it did not finish."""
    f = failure(model)
    if f is None or f.status not in ("exception", "exit", "crashed", "timeout"):
        return None
    frame = f.raised_at or f.called_from
    where = f"{frame.file}:{frame.line}" if frame else "an unknown line"
    code = f" ({frame.code.strip()})" if frame and frame.code else ""
    first = (f.message or "").strip().splitlines()[0][:400] if f.message else ""
    text = f"the program stopped at {where}{code}: {f.headline}" + (f": {first}" if first else "")
    exit_event = model.program_exit or {}
    exc = str(exit_event.get("exc_type") or "")
    if exc in VALUE_ERRORS or any(name in str(exit_event.get("message") or "") for name in VALUE_ERRORS):
        text += " (the line needs a value the preview could not compute on the CPU)"
    elif "missing kernel for cuda" in first or "from the 'CPU' backend" in first:
        text += " (a CUDA kernel with no CPU counterpart: the preview computes values on the CPU)"
    return text + "; compiles after that line are not previewed"
