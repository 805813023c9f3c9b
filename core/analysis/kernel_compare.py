"""Kernels of a run as comparable facts, and two runs compared kernel by kernel (torch-free).

A run's kernels come from Inductor's output code (`inductor_output_code`) or, for a CUDA preview,
from the wrappers the preview generated (`cuda_preview` events). Each kernel is keyed by
(compile id, graph, name) and carries a fingerprint of its source with the lines that name a file
or a build hash left out (`# kernel path: ...`, `'backend_hash': ...`): the same kernel generated
on two machines, or by a real GPU run and by the preview, has the same fingerprint.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from tcx.core.analysis.preview_notes import recorded_preview
from tcx.core.model import RunModel
from tcx.core.selection import Selection
from tcx.core.torchtext.output_code import graph_of, kernel_definitions

_MACHINE_LINES = re.compile(
    r"'backend_hash': '[0-9A-Fa-f]+'|# kernel path: .*|# \[Provenance debug handles\].*"
)


def fingerprint(source: str) -> str:
    """A short hash of a kernel's source, machine-specific lines left out."""
    return hashlib.sha256(_MACHINE_LINES.sub("", source).encode()).hexdigest()[:16]


def _modules(model: RunModel, selection: Selection) -> list[tuple[str | None, str, str]]:
    """(compile id, graph, source) of each generated module of the selected compiles."""
    out = []
    for generated in model.generated_code.modules:
        source = generated.source
        if source and selection.includes(generated.compile_id):
            out.append((generated.compile_id, graph_of(source), source))
    if out or not recorded_preview(model):
        return out
    for module in model.preview.modules:
        if module.source is not None and selection.includes(module.compile_id):
            out.append((module.compile_id, module.graph or graph_of(module.source), module.source))
    return out


@dataclass(frozen=True)
class KernelFact:
    """One generated kernel of a run: matched across runs by (compile id, graph, name)."""

    name: str
    kind: str | None
    compile_id: str | None
    graph: str | None
    fingerprint: str | None  # None in facts written before kernels had fingerprints

    @property
    def key(self) -> tuple[str | None, str | None, str]:
        return (self.compile_id, self.graph, self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "compile_id": self.compile_id,
            "graph": self.graph,
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_json(cls, doc: Any) -> KernelFact:
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
            raise ValueError(f"a kernel without a name: {doc!r:.80}")

        def text(key: str) -> str | None:
            value = doc.get(key)
            return None if value is None else str(value)

        return cls(doc["name"], text("kind"), text("compile_id"), text("graph"), text("fingerprint"))


def kernel_facts(model: RunModel, selection: Selection) -> list[KernelFact]:
    """Each kernel's name, kind, compile id, graph and source fingerprint."""
    return [
        KernelFact(name, kind, cid, graph, fingerprint(source))
        for cid, graph, module in _modules(model, selection)
        for name, kind, source, _comment in kernel_definitions(module)
    ]


def compare_kernels(a: list[KernelFact], b: list[KernelFact]) -> dict[str, list[str]]:
    """Kernels matched by (compile id, graph, name): identical, differing, or only in one run.
    Facts without fingerprints (older baselines) compare by name only and say so."""
    left, right = {k.key: k for k in a}, {k.key: k for k in b}
    identical: list[str] = []
    differ: list[str] = []
    unknown: list[str] = []
    for k in left.keys() & right.keys():
        fa, fb = left[k].fingerprint, right[k].fingerprint
        (unknown if not fa or not fb else identical if fa == fb else differ).append(_label(k))
    return {
        "identical": sorted(identical),
        "differ": sorted(differ),
        "not_compared": sorted(unknown),
        "only_in_a": sorted(_label(k) for k in left.keys() - right.keys()),
        "only_in_b": sorted(_label(k) for k in right.keys() - left.keys()),
    }


def _label(key: tuple[str | None, str | None, str]) -> str:
    cid, graph, name = key
    return f"{cid or '?'} {graph or '?'} {name}"
