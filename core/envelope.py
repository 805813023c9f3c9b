"""The keys every view's JSON document starts with (the contract in the README), and the device
the run used.

Pure and torch-free.
"""

from __future__ import annotations

import re
from typing import Any

from tcx import __version__
from tcx.core.analysis import RunModel
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
_DEVICE_TYPE = re.compile(r"type='(?P<type>[\w]+)'")


def envelope(
    schema: str, m: RunModel, selection: Selection | None = None, *, device: str | None = None
) -> dict[str, Any]:
    """ENVELOPE_KEYS, then how the program ended. `device` overrides the run's device (codegen and
    fusion: the device whose code is shown, e.g. a CUDA preview's `cuda:sm_90`)."""
    from tcx.core.explain import backend_info, program_status  # explain's JSON starts with this too

    selection = selection or whole_run(m)
    return {
        "schema": schema,
        "tcx_version": __version__,
        "torch_version": m.torch_version,
        "target": m.target,
        "source_kind": SOURCE_KINDS.get(m.source_kind, m.source_kind),
        "backend": backend_info(m),
        "device": device or run_device(m, selection),
        "selection": selection.to_json(),
        "program": program_status(m),
    }


def run_device(m: RunModel, selection: Selection | None = None) -> str | None:
    """The device the compiled frames' tensors were on, as torch described them (`describe_tensor`);
    `--device` when it was asked; None when the input says neither."""
    features = (m.run_start or {}).get("features") or {}
    for name in features:
        if name.startswith("device="):
            return name.split("=", 1)[1]
    types: list[str] = []
    for ev in m.trace_events:
        if ev.name != "describe_tensor":
            continue
        if selection is not None and not selection.includes(ev.compile_id):
            continue
        match = _DEVICE_TYPE.search(str(ev.body_field("device") or ""))
        if match and match.group("type") not in types:
            types.append(match.group("type"))
    return ",".join(types) or None
