"""The numerics view: does the compiled program compute what eager computes (torch-free).

`tcx numerics PROGRAM` makes the runs (core/numerics/pipeline.py) and writes what they found into the
compiled run's recording as a `numerics_report` event; this view reads it back (core/numerics/report.py),
so a saved recording re-renders without running anything. `TARGET:func` keeps that function's calls and
the probes of its compiles; gradients and parameters belong to the whole program and stay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tcx.core.model import RunModel
from tcx.core.numerics.report import NumericsReport
from tcx.core.selection import Selection, whole_run
from tcx.core.views.envelope import envelope

SCHEMA = "tcx.numerics/1"
NOT_RECORDED = (
    "this input holds no numerics comparison: `tcx numerics PROGRAM` runs the program eager and compiled and "
    "compares every value (a saved run of it re-renders here; a TORCH_TRACE log has no values)"
)


@dataclass
class NumericsView:
    model: RunModel
    selection: Selection
    report: NumericsReport | None
    unavailable: str | None = None

    @property
    def diverged(self) -> bool | None:
        return self.report.diverged if self.report else None

    @property
    def divergent_count(self) -> int:
        """Values beyond tolerance that eager repeats (`tcx check --max-numerics-divergences`)."""
        return len(self.report.divergent) if self.report else 0

    @property
    def max_abs(self) -> float | None:
        """The largest |compiled − eager| of any value compared (`tcx check --max-numerics-error`)."""
        return self.report.max_abs if self.report else None


def build_numerics(model: RunModel, selection: Selection | None = None) -> NumericsView:
    selection = selection or whole_run(model)
    event = model.numerics.report
    if event is None:
        return NumericsView(model, selection, None, NOT_RECORDED)
    report = NumericsReport.from_json(event)
    if selection.function and not selection.whole_run:
        report.checks = [
            c for c in report.checks if c.kind != "call" or selection.includes_function(c.function)
        ]
        report.probes = [p for p in report.probes if selection.includes(p.compile_id)]
    return NumericsView(model, selection, report)


def to_json(view: NumericsView) -> dict[str, Any]:
    doc = {**envelope(SCHEMA, view.model, view.selection), "unavailable": view.unavailable}
    if view.report is None:
        return {
            **doc,
            "verdict": "not_compared",
            "diverged": None,
            "calls": [],
            "first_divergence": None,
            "remedies": [],
        }
    return {**doc, **view.report.to_json()}
