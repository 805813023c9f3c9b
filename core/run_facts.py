"""The comparable facts of one run: what `tcx diff` and CI baselines compare.

Built from a RunModel (live, saved or a TORCH_TRACE log); plain JSON so a baseline file
committed to a repository can be compared with a later run without the first one.
"""

from __future__ import annotations

import os
from typing import Any

from tcx import __version__
from tcx.core.analysis import RunModel
from tcx.core.codegen_view import kernel_definitions
from tcx.core.explain import Explanation, explain, to_json

COUNT_KEYS = (
    "graph_count",
    "graph_break_count",
    "unique_graph_break_count",
    "compile_count",
    "recompile_count",
    "failed_frame_count",
)
# Where a higher number is worse (a regression); compile_count follows graphs/recompiles.
WORSE_WHEN_HIGHER = (
    "graph_count",
    "graph_break_count",
    "unique_graph_break_count",
    "recompile_count",
    "failed_frame_count",
)
# Cumulative compile time per phase (each includes the ones below it), from compilation_metrics.
PHASES = {
    "entire_frame_compile_time_s": "total",
    "backend_compile_time_s": "backend",
    "inductor_compile_time_s": "inductor",
    "code_gen_time_s": "code_gen",
}


def run_facts(model: RunModel, ex: Explanation | None = None) -> dict[str, Any]:
    ex = ex or explain(model)
    doc = to_json(ex)
    return {
        "schema": "tcx.facts/1",
        "tcx_version": __version__,
        "torch_version": model.torch_version,
        "target": model.target,
        "counts": {k: doc[k] for k in COUNT_KEYS},
        "graph_breaks": [_site(b) for b in doc["graph_breaks"]],
        "recompile_reasons": list(model.recompile_reasons),
        "kernels": _kernels(model),
        "compile_time_s": _phases(model),
    }


def _site(b: dict[str, Any]) -> dict[str, Any]:
    code = b["user_stack"][-1]["code"] if b.get("user_stack") else ""
    return {
        "type": b["type"],
        "gb_id": b["gb_id"],
        "file": b["file"],
        "line": b["line"],
        "function": b.get("function"),
        "code": code,
        "occurrences": b["occurrences"],
    }


def _kernels(model: RunModel) -> list[dict[str, Any]]:
    out = []
    for ev in model.trace_events:
        if ev.name == "inductor_output_code":
            for name, kind, _source, _comment in kernel_definitions(ev.payload or ""):
                out.append({"name": name, "kind": kind, "compile_id": ev.compile_id})
    return out


def _phases(model: RunModel) -> dict[str, float]:
    totals: dict[str, float] = {}
    for comp in model.compiles.values():
        metrics = _metrics(model, comp.compile_id)
        for key, phase in PHASES.items():
            value = metrics.get(key)
            if isinstance(value, (int, float)):
                seconds = value / 1e6 if key.endswith("_us") else value
                totals[phase] = round(totals.get(phase, 0.0) + seconds, 4)
    return totals


def _metrics(model: RunModel, compile_id: str) -> dict[str, Any]:
    for ev in model.trace_events:
        if ev.name == "compilation_metrics" and ev.compile_id == compile_id and isinstance(ev.body, dict):
            return ev.body
    return {}


def site_key(site: dict[str, Any]) -> tuple:
    """Match a break across two runs by what the line says, so edits that shift lines do not."""
    return (
        site["type"],
        os.path.basename(site["file"] or ""),
        site.get("function"),
        site.get("code") or site["line"],
    )
