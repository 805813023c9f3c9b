"""Inductor's fusion decisions per scheduled graph, as the recorder captured them (`tcx fusion`).

One `fusion` capture per graph Inductor scheduled: its nodes (name, kind, the ops they came from),
the groups the scheduler formed and every decision it made (fuse, or not and why). A capture that
failed (`error`) has no nodes and is left out. The fusion view and the TUI read the same graphs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FusionGraph:
    """One scheduled graph's decisions; `nodes`, `groups` and `decisions` as the recorder wrote them."""

    compile_id: str | None
    graph: str | None  # forward, backward, inference
    device: str | None
    preview: bool  # scheduled for the CUDA preview (core/recorder/compat_fakecuda.py)
    nodes: list[dict[str, Any]]
    groups: list[dict[str, Any]]
    decisions: list[dict[str, Any]]


def read_fusion(captures: Iterable[dict[str, Any]]) -> list[FusionGraph]:
    """The graphs of the run's `fusion` captures, in recording order."""
    return [
        FusionGraph(
            compile_id=e.get("compile_id"),
            graph=e.get("graph"),
            device=e.get("device"),
            preview=bool(e.get("preview")),
            nodes=list(e.get("nodes") or []),
            groups=list(e.get("groups") or []),
            decisions=list(e.get("decisions") or []),
        )
        for e in captures
        if "nodes" in e
    ]
