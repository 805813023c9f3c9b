"""The keys every view's JSON document starts with (the contract in the README).

Pure and torch-free.
"""

from __future__ import annotations

from typing import Any

from tcx import __version__
from tcx.core.model import RunModel
from tcx.core.selection import Selection, whole_run

ENVELOPE_KEYS = (
    "schema",
    "tcx_version",
    "torch_version",
    "target",
    "source_kind",
    "backend",
    "device",
    "selection",
)
# RunModel.source_kind -> the envelope's spelling.
SOURCE_KINDS = {"live": "live", "recording": "recording", "trace": "trace_log"}


def envelope(
    schema: str, m: RunModel, selection: Selection | None = None, *, device: str | None = None
) -> dict[str, Any]:
    """ENVELOPE_KEYS, then how the program ended: a pure function of the run's status (computed
    once per model) and the selection. `device` overrides the run's device (codegen and fusion:
    the device whose code is shown, e.g. a CUDA preview's `cuda:sm_90`)."""
    selection = selection or whole_run(m)
    status = m.status
    return {
        "schema": schema,
        "tcx_version": __version__,
        "torch_version": m.torch_version,
        "target": m.target,
        "source_kind": SOURCE_KINDS.get(m.source_kind, m.source_kind),
        "backend": status.conditions.to_json(),
        "device": device or status.device(selection),
        "selection": selection.to_json(),
        "program": status.program_json(),
    }
