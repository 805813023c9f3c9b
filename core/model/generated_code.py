"""Generated-code modules per compile: each module Inductor wrote (`inductor_output_code`), with the
provenance maps it logged after it, and its kernels listed by one reader for every view.

The model keeps each module's payload reference; its source is read from the log when a view asks,
and what every view counts (the kernels' names) is read once and kept. The index's and the ranks'
kernel counts, `--kernel NAME`'s selection, the kernel comparison and the codegen view read the
same modules (a CUDA preview's modules are the preview's: core/model/preview.py).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from tcx.core.ingest.trace_events import TraceEvent
from tcx.core.torchtext.output_code import kernel_definitions

PROVENANCE = "artifact:inductor_provenance_tracking*"


class GeneratedModule:
    """One output-code module of a compile."""

    def __init__(self, event: TraceEvent) -> None:
        self._event = event
        self._provenance: list[TraceEvent] = []  # the maps logged after it, parsed when asked

    @property
    def compile_id(self) -> str | None:
        return self._event.compile_id

    @property
    def source(self) -> str:
        """The module's code (read from the log on each call: a view that keeps it says so)."""
        return self._event.payload or ""

    @functools.cached_property
    def kernel_names(self) -> tuple[str, ...]:
        """The kernels the module defines, in order (the one count every view shows)."""
        return tuple(k.name for k in kernel_definitions(self.source))

    @property
    def kernel_count(self) -> int:
        return len(self.kernel_names)

    def provenance(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(node mappings, stack traces) Inductor logged after this module; {} where it logged none
        or what it logged is not a JSON object (the last map of each kind that parses)."""
        node_map: dict[str, Any] = {}
        stack_traces: dict[str, Any] = {}
        for ev in self._provenance:
            ok, data = _parsed(ev)
            if not ok:
                continue
            if ev.name.endswith("node_mappings"):
                node_map = data
            else:
                stack_traces = data
        return node_map, stack_traces


class GeneratedCode:
    """Every module of the run, in log order."""

    def __init__(self, events: list[TraceEvent]) -> None:
        self.modules: list[GeneratedModule] = []
        self._provenance: list[TraceEvent] = []
        for ev in events:
            if ev.name == "inductor_output_code":
                self.modules.append(GeneratedModule(ev))
            elif ev.payload:  # provenance: it belongs to the compile's last module with code
                self._provenance.append(ev)
                owner = next(
                    (m for m in reversed(self.modules) if m.compile_id == ev.compile_id and m.source), None
                )
                if owner is not None:
                    owner._provenance.append(ev)

    def kernel_counts(self) -> dict[str, int]:
        """Kernels generated per compile id (only compiles with output code)."""
        counts: dict[str, int] = {}
        for m in self.modules:
            if m.compile_id:
                counts[m.compile_id] = counts.get(m.compile_id, 0) + m.kernel_count
        return counts

    @property
    def kernel_count(self) -> int:
        return sum(m.kernel_count for m in self.modules)

    def compiles_with_kernel(self, name: str) -> set[str]:
        """Compile ids whose modules define a kernel named `name` (or containing it)."""
        return {m.compile_id for m in self.modules if m.compile_id and any(name in k for k in m.kernel_names)}

    def provenance_by_compile(self) -> dict[str, list[dict[str, Any]]]:
        """Per compile id, the provenance maps Inductor logged after each module it generated, in
        order (a CUDA preview's modules are recorder events, its provenance trace events)."""
        found: dict[str, list[dict[str, Any]]] = {}
        for ev in self._provenance:
            ok, data = _parsed(ev)
            if not ok:
                continue
            entries = found.setdefault(ev.compile_id or "", [])
            if ev.name.endswith("node_mappings") or not entries or "stack_traces" in entries[-1]:
                entries.append({})
            entries[-1]["node_map" if ev.name.endswith("node_mappings") else "stack_traces"] = data
        return found


def _parsed(ev: TraceEvent) -> tuple[bool, dict[str, Any]]:
    """(whether the map's JSON parses, the map: {} when it is not an object)."""
    try:
        data = json.loads(ev.payload or "")
    except ValueError:
        return False, {}
    return True, data if isinstance(data, dict) else {}
