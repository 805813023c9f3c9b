"""A CUDA preview's facts (core/recorder/compat_fakecuda.py writes them): the device it assumed, the
modules Inductor generated for it (or the error that stopped one), the decisions the preview made
where a real GPU would have measured, and its notes. Typed once here; the views and analyses read
them (core/analysis/preview_notes.py, core/views/codegen.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PreviewDevice:
    """The GPU a preview assumed: its architecture (`sm_90`), what it assumed of it, its notes."""

    arch: str | None
    assumptions: tuple[Any, ...] = ()
    notes: tuple[Any, ...] = ()


@dataclass(frozen=True)
class PreviewModule:
    """One module Inductor generated in the preview (a `cuda_preview` event), or its error."""

    compile_id: str | None
    graph: str | None
    arch: str | None
    source: str | None
    ptx: Mapping[str, str]
    seconds: Any  # as recorded; a reader checks it (core/ingest/event_schema.seconds)
    devices: tuple[str, ...] | None  # the devices Inductor lowered it for (older recordings: None)
    error: str | None


@dataclass
class CudaPreview:
    device: PreviewDevice | None = None  # None: the run was no preview
    modules: list[PreviewModule] = field(default_factory=list)
    # each a `cuda_preview_decision` event's fields: decision, compile_id, graph, assumed, why and the
    # decision's own (op, inputs, choices, reads...), which core/analysis/preview_notes.py words
    decisions: list[Mapping[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # `cuda_preview_note` events


def text(value: Any) -> str | None:
    """A recorded value as text (None stays None)."""
    return None if value is None else str(value)
