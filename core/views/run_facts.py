"""The comparable facts of one run: what `tcx diff` and CI baselines compare.

Built from a RunModel (live, saved or a TORCH_TRACE log); plain JSON so a baseline file
committed to a repository can be compared with a later run without the first one.
"""

from __future__ import annotations

import os
from typing import Any

from tcx import __version__
from tcx.core.analysis.kernel_compare import kernel_facts
from tcx.core.ingest.event_schema import seconds
from tcx.core.model import RunModel
from tcx.core.model.budgets import COUNT_KEYS
from tcx.core.selection import Selection, whole_run
from tcx.core.views.cache import cache_counts
from tcx.core.views.envelope import SOURCE_KINDS
from tcx.core.views.explain import BreakSite, Explanation, explain

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


def run_facts(
    model: RunModel, selection: Selection | None = None, *, ex: Explanation | None = None
) -> dict[str, Any]:
    """The facts of the selected compiles (`ex`, when given, must be built on `selection`)."""
    selection = selection or whole_run(model)
    ex = ex or explain(model, selection)
    return {
        "schema": "tcx.facts/1",
        "tcx_version": __version__,
        "torch_version": model.torch_version,
        "target": model.target,
        "source_kind": SOURCE_KINDS.get(model.source_kind, model.source_kind),
        "backend": model.status.conditions.to_json(),
        "device": model.status.device(selection),
        "selection": selection.to_json(),
        "counts": {k: getattr(ex, k) for k in COUNT_KEYS},
        "graph_breaks": [_site(s) for s in ex.sites],
        "recompile_reasons": _recompile_reasons(model, selection),
        "kernels": _kernels(model, selection),
        "compile_time_s": _phases(model, selection),
        "caches": cache_counts(model, selection),
    }


def _site(s: BreakSite) -> dict[str, Any]:
    return {
        "type": s.gb_type,
        "gb_id": s.gb_id,
        "file": s.file,
        "line": s.line,
        "function": s.function,
        "code": s.user_stack[-1].code if s.user_stack else "",
        "occurrences": len(s.occurrences),
    }


def _recompile_reasons(model: RunModel, selection: Selection) -> list[str]:
    if selection.whole_run:
        return list(model.recompile_reasons)
    return [
        c.recompile_reason
        for c in model.compiles.values()
        if selection.includes(c.compile_id) and c.recompile_reason
    ]


def _kernels(model: RunModel, selection: Selection) -> list[dict[str, Any]]:
    """Each kernel with its graph and source fingerprint (a CUDA preview's kernels for a preview)."""
    return kernel_facts(model, selection)


def _phases(model: RunModel, selection: Selection) -> dict[str, float]:
    totals: dict[str, float] = {}
    for comp in model.compiles.values():
        if not selection.includes(comp.compile_id):
            continue
        metrics = comp.metrics
        for key, phase in PHASES.items():
            value = seconds(metrics.get(key), 1e-6 if key.endswith("_us") else 1.0)
            if value is not None:
                totals[phase] = round(totals.get(phase, 0.0) + value, 4)
    return totals


def site_key(site: dict[str, Any]) -> tuple:
    """Match a break across two runs by what the line says, so edits that shift lines do not."""
    return (
        site["type"],
        os.path.basename(site["file"] or ""),
        site.get("function"),
        site.get("code") or site["line"],
    )
