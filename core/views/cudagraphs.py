"""The cudagraphs view: under `mode="reduce-overhead"`, which graphs CUDA graphs captured and why
the others were skipped, each reason with the user line torch names (torch-free).

Read off the `cudagraph` events (core/recorder/compat_cudagraphs.py): torch's own skip messages,
Inductor's graph partitions with torch's `should_partition` reasons, the reasons post-compile
read, and the CUDA-graph trees' recordings. In a CUDA preview, compile-time reasons are torch's
own decisions on fake CUDA tensors; what is decided only when a graph runs on the GPU is marked
as needing a GPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tcx.core.analysis.preview_notes import preview_notes, resolve_device
from tcx.core.frames import innermost_user_frame, parse_stack_trace
from tcx.core.model import RunModel
from tcx.core.model.cudagraph_decisions import GraphDecisions
from tcx.core.selection import Selection, whole_run
from tcx.core.views.envelope import envelope

SCHEMA = "tcx.cudagraphs/1"

# (category, pattern) over torch's reason texts, first match wins.
CATEGORIES = (
    ("mutated inputs", re.compile(r"mutat", re.I)),
    ("CPU tensors", re.compile(r"\bcpu\b", re.I)),
    ("dynamic shapes", re.compile(r"symbolic shape|dynamic shape", re.I)),
    ("incompatible ops", re.compile(r"incompatible op|unbacked|unsafe|DeviceCopy|Conditional", re.I)),
    ("multiple devices", re.compile(r"multiple devices", re.I)),
    ("non-tensor inputs", re.compile(r"non-Tensor", re.I)),
)


@dataclass
class Reason:
    category: str
    text: str  # torch's words
    user_line: dict[str, Any] | None
    decided: str  # "compile" (Inductor) or "runtime" (CUDA-graph trees, when the graph runs)
    needs_gpu: bool = False  # a preview could not decide it

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class GraphCudagraphs:
    compile_id: str | None
    graph: str | None
    # captured (a tree recorded it), wrapped (handed to CUDA graphs, not recorded: the program ended,
    # or a preview), partly (some partitions stay outside), skipped (requested, and torch said why
    # not), on the CPU (requested, but the graph runs on the CPU), not requested
    status: str
    captured: int = 0
    partitions: int | None = None
    cudagraphable_partitions: int | None = None
    reasons: list[Reason] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "graph": self.graph,
            "status": self.status,
            "captured": self.captured,
            "partitions": self.partitions,
            "cudagraphable_partitions": self.cudagraphable_partitions,
            "reasons": [r.to_json() for r in self.reasons],
        }


@dataclass
class CudagraphsView:
    model: RunModel
    selection: Selection
    device: str  # "run" or "cuda:sm_XX" (a preview)
    graphs: list[GraphCudagraphs]
    unavailable: str | None = None
    preview_notes: dict[str, Any] | None = None

    @property
    def is_preview(self) -> bool:
        return self.device.startswith("cuda:")


def category(text: str) -> str:
    return next((name for name, pattern in CATEGORIES if pattern.search(text)), "other")


def _line_from_message(message: str) -> dict[str, Any] | None:
    """torch appends "Found from : <stack trace>" to a skip message."""
    _, _, stack = message.partition("Found from")
    return innermost_user_frame(parse_stack_trace(stack)) if stack else None


def build_cudagraphs(
    model: RunModel, selection: Selection | None = None, *, device: str = "run"
) -> CudagraphsView:
    selection = selection or whole_run(model)
    device = resolve_device(model, device)  # a saved preview shows the preview
    preview = device.startswith("cuda:")
    recorded = model.cudagraphs
    events = any(selection.includes(cid) for cid in recorded.compile_ids)
    graphs = [_graph(g, preview) for g in recorded.graphs if selection.includes(g.compile_id)]
    asked = _modes_asked(model)
    for g in graphs:
        if g.status == "not requested" and _asked_for(model, g.compile_id, asked):
            g.status = "on the CPU" if _on_cpu(g) else "skipped"
    unavailable = None
    features = model.status.features
    if features.why("cudagraphs"):
        unavailable = features.why("cudagraphs")
    elif not features.recorded("cudagraphs") and not events:
        unavailable = "this recording has no CUDA-graph events (record it with `tcx cudagraphs`)"
    elif not any(g.status != "not requested" for g in graphs):
        unavailable = (
            'no graph asked for CUDA graphs: compile with mode="reduce-overhead" (or pass --mode '
            "reduce-overhead)"
        )
    notes = preview_notes(model, device.split(":", 1)[1]) if preview else None
    return CudagraphsView(model, selection, device, graphs, unavailable, notes)


# torch's should_partition reason for every op when CUDA graphs are off for the graph
_NOT_REQUESTED = "when cudagraphs is disabled"


def _graph(recorded: GraphDecisions, preview: bool) -> GraphCudagraphs:
    cid, graph = recorded.compile_id, recorded.graph
    partitions, decided, wrapped = recorded.partitions, recorded.decided, recorded.wrapped
    captured, skips = recorded.captured, recorded.skips
    nodes = (partitions or {}).get("nodes") or []
    partitioned_for_cudagraphs = any(_NOT_REQUESTED not in str(n.get("reason")) for n in nodes)
    enabled = decided is not None or wrapped or captured or skips or partitioned_for_cudagraphs
    out = GraphCudagraphs(
        cid,
        graph,
        "not requested",
        captured=captured,
        partitions=(partitions or {}).get("partitions"),
        cudagraphable_partitions=(partitions or {}).get("cudagraphable"),
    )
    if not enabled:
        return out
    for e in skips:
        text = str(e.get("message") or "").removeprefix("skipping cudagraphs due to ")
        when = str(e.get("when") or "compile")
        out.reasons.append(
            Reason(category(text), text.split("Found from")[0].strip(), _line_from_message(text), when)
        )
    for text in (decided or {}).get("fail_reasons") or []:
        if not any(r.text.startswith(str(text)) for r in out.reasons):
            out.reasons.append(Reason(category(str(text)), str(text), None, "compile"))
    lines = (decided or {}).get("mutation_lines") or []
    mutated = (decided or {}).get("mutated_inputs")
    if mutated and not any(r.category == "mutated inputs" for r in out.reasons):
        # CUDA-graph trees check mutations of non-static inputs when the graph runs.
        out.reasons.append(
            Reason(
                "mutated inputs",
                f"{mutated} mutated input(s), checked when the graph runs",
                lines[0] if lines else None,
                "runtime",
                needs_gpu=preview,
            )
        )
    split = bool(partitions) and ((partitions or {}).get("cudagraphable") or 0) < (
        (partitions or {}).get("partitions") or 0
    )
    if split:
        for node in nodes:
            text = f"{node.get('reason')} ({node.get('op') or node.get('node')})"
            out.reasons.append(Reason(category(text), text, node.get("user_line"), "compile"))
    if captured:
        out.status = "captured"
    elif wrapped and not skips:
        out.status = "partly" if split else "wrapped"
    else:
        out.status = "on the CPU" if _on_cpu(out) else "skipped"
    if preview and out.status in ("wrapped", "partly"):
        out.reasons.append(
            Reason(
                "other",
                "recording happens when the graph runs on the GPU (a later call); the preview cannot "
                "know whether a runtime check skips it",
                None,
                "runtime",
                needs_gpu=True,
            )
        )
    return out


def _on_cpu(g: GraphCudagraphs) -> bool:
    """Every reason torch gave is the CPU (CUDA graphs capture CUDA work only)."""
    return bool(g.reasons) and all(r.category == "CPU tensors" for r in g.reasons)


def _modes_asked(model: RunModel) -> dict[str, set[str]]:
    """The `mode=` each torch.compile call of the program asked for, by the function it compiled."""
    out: dict[str, set[str]] = {}
    for call in model.status.torch_compile_calls:
        mode = str((call.used or call.asked).get("mode", "None")).strip("'\"")
        out.setdefault(str(call.target), set()).add(mode)
    return out


def _asked_for(model: RunModel, compile_id: str | None, asked: dict[str, set[str]]) -> bool:
    """The program's torch.compile call for this frame asked for CUDA graphs (reduce-overhead)."""
    comp = model.compiles.get(compile_id or "")
    modes = asked.get(comp.co_name or "", set()) if comp else set()
    return any("reduce-overhead" in m for m in modes)


def to_json(view: CudagraphsView) -> dict[str, Any]:
    shown = view.device if view.is_preview else None
    return {
        **envelope(SCHEMA, view.model, view.selection, device=shown),
        "preview": view.is_preview,
        "unavailable": view.unavailable,
        "captured_count": sum(1 for g in view.graphs if g.status == "captured"),
        "skipped_count": sum(1 for g in view.graphs if g.status == "skipped"),
        "on_cpu_count": sum(1 for g in view.graphs if g.status == "on the CPU"),
        "not_requested_count": sum(1 for g in view.graphs if g.status == "not requested"),
        "graphs": [g.to_json() for g in view.graphs],
        "preview_notes": view.preview_notes,
    }
