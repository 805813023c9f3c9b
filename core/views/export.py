"""The export view: each torch.export call of a run — ok or failed, every issue at the user's line
with its fix, the guards export added, the ExportedProgram's signature — and each AOTInductor
compile's kernels with their provenance (torch-free). The facts are the run model's
(core/model/exports.py); this view selects and serializes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tcx.core.ingest.draft_logs import draft_logs_note
from tcx.core.model import RunModel
from tcx.core.model.aoti_provenance import AotiCompile
from tcx.core.model.exports import ExportRun
from tcx.core.selection import Selection, whole_run
from tcx.core.views.envelope import envelope

SCHEMA = "tcx.export/1"


@dataclass
class ExportView:
    model: RunModel
    selection: Selection
    exports: list[ExportRun]
    aoti: list[AotiCompile]
    unavailable: str | None = None
    notes: list[str] = field(default_factory=list)  # what the input cannot hold, and where it is

    @property
    def export_count(self) -> int:
        return sum(1 for e in self.exports if e.api != "aoti_compile_and_package")

    @property
    def failed_export_count(self) -> int:
        return sum(1 for e in self.exports if e.ok is False)

    @property
    def export_issue_count(self) -> int:
        """Issues of every export: a failure, each draft-export report entry, or each issue tlparse
        lists for a log. What `tcx check --max-export-issues` limits."""
        return sum(len(e.issues) for e in self.exports)


def build_export(model: RunModel, selection: Selection | None = None) -> ExportView:
    selection = selection or whole_run(model)
    exports = list(model.exports)  # found in the model's one pass (core/model/exports.py)
    if selection.function and not selection.whole_run:
        exports = [e for e in exports if e.name == selection.function]
    features = model.status.features
    unavailable = features.why("export")
    if not unavailable and (
        model.source_kind != "trace"
        and not features.recorded("export")
        and not (exports or model.aoti_compiles)
    ):
        unavailable = "this recording was made without the export capture (record it with `tcx export`)"
    notes = []
    if model.source_kind == "trace" and not any(e.logged_as == "draft_export log" for e in exports):
        notes.append(draft_logs_note())  # the input holds no draft_export log: say where they go
    return ExportView(model, selection, exports, model.aoti_compiles, unavailable, notes)


def to_json(view: ExportView) -> dict[str, Any]:
    return {
        **envelope(SCHEMA, view.model, view.selection),
        "unavailable": view.unavailable,
        "notes": view.notes,
        "export_count": view.export_count,
        "failed_export_count": view.failed_export_count,
        "export_issue_count": view.export_issue_count,
        "exports": [e.to_json() for e in view.exports],
        "aoti": [a.to_json() for a in view.aoti],
    }
