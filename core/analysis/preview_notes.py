"""What a CUDA preview assumed and what it cannot know, read off its recording (torch-free).

The preview (core/recorder/compat_fakecuda.py) runs the whole program on fake CUDA tensors that
carry their values; where a decision needs a real GPU it records the decision and its assumption
(`cuda_preview_decision`), and it records the device it assumed (`cuda_preview_device`).
This module turns those events, and the way the program ended, into the notes every view
of a preview prints: a preview is exact except where one of these notes says otherwise. It also
tells a view that a recording is a preview, so a saved preview opens without --target.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from tcx.core.model import RunModel
from tcx.core.model.failure import failure
from tcx.core.model.preview import PreviewModule
from tcx.core.torchtext.output_code import code_device

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
    "random_values": "the preview draws the CUDA generator's numbers from a CPU generator; a GPU draws "
    "others (torch's Philox streams are not reproduced), so a branch, size or constant that depends "
    "on them can differ, and with it which graph compiles and what it holds",
    "fake_device_break": "Dynamo met tcx's stand-in for a CUDA function where a GPU run calls torch's "
    "own: this graph break (and how the graphs around it are cut) may not happen on a GPU",
}
READ = {
    "branch": "a branch on random values",
    "number": "a number read from random values",
    "size": "a size that depends on random values",
}
# A graph break at one of tcx's stand-ins for CUDA (the preview's own code) names it.
_STAND_IN = re.compile(r"compat_fakecuda\w*\.py|PreviewCudaGenerator|_tcx_preview_\w+")
NOTHING_ON_CUDA = (
    "nothing runs on CUDA here: every graph this program compiled ({n}) is of CPU tensors, so there "
    "is no GPU code to preview (the preview generates none for them). The program keeps its tensors "
    'on the CPU (device="cpu", .cpu()): a preview keeps them there, as a GPU machine would. To '
    'preview the GPU\'s code, create them on CUDA: device="cuda" (or "cuda" if '
    'torch.cuda.is_available(), which a preview answers True), .to("cuda"); factories given no '
    "device already land on CUDA in a preview (its default device), and so do --call inputs"
)


def recorded_preview(model: RunModel) -> str | None:
    """The architecture a CUDA preview recording was made for (`sm_90`), None for any other run."""
    device = model.preview.device
    return (device.arch or None) if device else None


def resolve_device(model: RunModel, device: str) -> str:
    """The code a view shows: what ran (`run`), or for a recording of a CUDA preview, the preview
    (so a saved preview opens in every view without --target)."""
    if device == "run":
        arch = recorded_preview(model)
        if arch:
            return f"cuda:{arch}"
    return device


def preview_notes(model: RunModel, arch: str | None) -> dict[str, Any]:
    device = model.preview.device
    decisions = []
    for e in model.preview.decisions:
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
    decisions += _fake_device_breaks(model)
    cuda, cpu = graph_devices(model)
    return {
        "arch": (device.arch if device else None) or arch,
        "assumptions": list(device.assumptions) if device else [],
        "notes": [*(device.notes if device else ()), *model.preview.notes[:20]],
        "decisions": decisions,
        "cuda_modules": cuda,
        "cpu_modules": cpu,
        "nothing_on_cuda": NOTHING_ON_CUDA.format(n=cpu) if cpu and not cuda else None,
        "stopped": _stopped(model),
        "cannot_know": list(CANNOT_KNOW),
    }


def graph_differences(
    notes: dict[str, Any], compile_id: str | None, graph: str | None
) -> list[dict[str, Any]]:
    """The decisions and dependencies named on one graph of a preview: those of its compile that
    apply to the whole compile (graph None) or to this graph."""
    return [
        {k: d.get(k) for k in ("decision", "what", "assumed")}
        for d in notes.get("decisions") or []
        if d.get("compile_id") == compile_id and d.get("graph") in (None, graph)
    ]


def preview_device(module: PreviewModule) -> str:
    """cuda or cpu: the device of one module a preview generated (the devices Inductor lowered it
    for; from its code in a recording that does not say)."""
    if module.devices:
        return "cuda" if "cuda" in module.devices else module.devices[0]
    return code_device(module.source or "")


def graph_devices(model: RunModel) -> tuple[int, int]:
    """(graphs of CUDA tensors, graphs of CPU tensors only) Inductor lowered in the preview."""
    devices = [preview_device(m) for m in model.preview.modules if m.source or m.devices]
    return sum(d == "cuda" for d in devices), sum(d != "cuda" for d in devices)


def _fake_device_breaks(model: RunModel) -> list[dict[str, Any]]:
    """Graph breaks at tcx's stand-ins for CUDA functions: the preview's own, named on their compile."""
    found = []
    for b in model.graph_breaks:
        text = " ".join([b.explanation or "", b.debug_context or "", *(f.file for f in b.user_stack)])
        match = _STAND_IN.search(text)
        if not match:
            continue
        where = f"{os.path.basename(b.file or '?')}:{b.line}" if b.file else "?"
        found.append(
            {
                "decision": "fake_device_break",
                "compile_id": b.compile_id,
                "graph": None,
                "what": f"graph break at {where} ({b.gb_type}) at tcx's {match.group(0)}",
                "assumed": "the break the preview makes",
                "why": WHY["fake_device_break"],
                "details": {"file": b.file, "line": b.line, "gb_type": b.gb_type},
            }
        )
    return found


def _what(e: Mapping[str, Any]) -> str:
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
    if kind == "random_values":
        return _random_what(e)
    return str(e.get("op") or kind)


def _random_what(e: Mapping[str, Any]) -> str:
    """`a branch on random values at x.py:26 (if noise.mean() > 0); ...; drawn at x.py:25 (aten.normal_)`."""
    parts, drawn = [], []
    for r in (e.get("reads") or [])[:4]:
        if not isinstance(r, dict):
            continue
        code = f" ({str(r.get('code'))[:80]})" if r.get("code") else ""
        parts.append(f"{READ.get(str(r.get('how')), 'random values read')} at {_at(r)}{code}")
        drawn += [d for d in r.get("drawn_at") or [] if isinstance(d, dict)]
    for i in (e.get("inputs") or [])[:4]:
        if not isinstance(i, dict):
            continue
        shape = "x".join(map(str, i.get("shape") or []))
        parts.append(f"input {i.get('input')} [{shape}] has sizes that depend on random values")
        drawn += [d for d in i.get("drawn_at") or [] if isinstance(d, dict)]
    if e.get("inputs") and not str(e.get("compile_id") or "").endswith("/0"):
        parts.append("a recompile: the dimensions it makes dynamic depend on these sizes too")
    origins = list(dict.fromkeys(f"{_at(d)} ({d.get('op')})" for d in drawn))[:3]
    return "; ".join(parts) + (f"; drawn at {', '.join(origins)}" if origins else "")


def _at(frame: dict[str, Any]) -> str:
    return f"{os.path.basename(str(frame.get('file') or '?'))}:{frame.get('line')}"


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
    program = model.status.program
    exc = str(program.exc_type or "")
    if exc in VALUE_ERRORS or any(name in str(program.message or "") for name in VALUE_ERRORS):
        text += " (the line needs a value the preview could not compute on the CPU)"
    elif "missing kernel for cuda" in first or "from the 'CPU' backend" in first:
        text += " (a CUDA kernel with no CPU counterpart: the preview computes values on the CPU)"
    return text + "; compiles after that line are not previewed"
