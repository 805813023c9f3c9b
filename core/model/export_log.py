"""torch.export calls read from a log, as torch logged them: which call each event belongs to, how
each call ended, and its issues at the user's line (torch-free).

Three kinds of log hold exports, each holding different facts (torch 2.13):

- a plain TORCH_TRACE log: each call's events carry the stack that called torch.export
  (`describe_source` of its inputs, `create_symbol`, `guard_added_fast` with the user's line,
  `symbolic_shape_specialization`, `create_unbacked_symbol`); a strict export's Dynamo capture ends
  in `compilation_metrics` (on failure: the exception type and message, with the user's stack); a
  non-strict trace that fails leaves `make_fx_fail_partial` (its graph up to the failure). Nothing
  marks a call's end, its exception or its ExportedProgram.
- a TORCH_DTRACE log: the same, plus `export` when a call starts, `exported_program` when it
  returns one, `guard_added` (prefix, sources) and `guard_on_data_dependent_error`.
- draft_export's own log (in TORCH_DTRACE, else <tempdir>/export_<user>): only the events its
  report is made of (`guard_added` with sources, `propagate_real_tensors_provenance`, missing and
  mismatched fake kernels, `create_unbacked_symbol`, `exported_program`), each logged once.

An issue comes from what torch logged as a failure — never from a guard of an export that
returned its program — and what a log cannot tell is said, with where to get it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tcx.core.frames import is_recorder_frame
from tcx.core.model.export_issues import (
    Context,
    from_data_dependent,
    from_exception,
    from_partial_graph,
    from_specialization,
    from_trace,
    from_unrecorded_failure,
)

if TYPE_CHECKING:
    from tcx.core.model.exports import ExportRun

ENTRY_FILES = ("torch/export/__init__.py", "torch/export/_draft_export.py")
# The exception torch.export raises for what Dynamo's metrics record, when strict
# (torch/export/_trace.py `_export_to_torch_ir`: both re-raised as UserError).
_RAISED_AS = {
    "ConstraintViolationError": "UserError",
    "ValueRangeError": "UserError",
    "GuardOnDataDependentSymNode": "UserError",
}
# Events a draft_export log starts with when its first events carry no stack.
DRAFT_LOG_EVENTS = frozenset(
    {
        "guard_added",
        "propagate_real_tensors_provenance",
        "missing_fake_kernel",
        "mismatched_fake_kernel",
        "exported_program",
    }
)
# Events that belong to an export only when their stack says so (else a torch.compile's).
NEEDS_EXPORT_STACK = frozenset(
    {
        "describe_source",
        "create_symbol",
        "guard_added_fast",
        "compilation_metrics",
        "symbolic_shape_specialization",
        "artifact:make_fx_fail_partial",
        "guard_on_data_dependent_error",
    }
)
LOGGED_AS = {"plain": "TORCH_TRACE", "dtrace": "TORCH_DTRACE", "draft": "draft_export log"}


@dataclass(frozen=True)
class ExportEntry:
    """Where a stack enters torch.export: the entry point, strict or not, the program's line that
    called it, and the program's frames above the call (one call site)."""

    api: str  # export | draft_export
    strict: bool | None
    call_site: dict[str, Any] | None
    key: tuple[tuple[str, int | None], ...]


def export_entry(frames: list[dict[str, Any]]) -> ExportEntry | None:
    """The torch.export call a stack (outermost first, files resolved) passes through, if any."""
    for i, frame in enumerate(frames):
        file = str(frame.get("file") or "").replace("\\", "/")
        function = frame.get("function")
        if function in ("export", "draft_export") and file.endswith(ENTRY_FILES):
            above = [  # the program's frames: tcx's own wrapper (a live run's log) is not the program's
                f
                for f in frames[:i]
                if not str(f.get("file") or "<").startswith("<") and not is_recorder_frame(str(f.get("file")))
            ]
            below = {f.get("function") for f in frames[i + 1 :]}
            strict = True if "_strict_export" in below else False if "_non_strict_export" in below else None
            return ExportEntry(
                str(function),
                strict,
                dict(above[-1]) if above else None,
                tuple((str(f.get("file")), f.get("line")) for f in above),
            )
    return None


@dataclass
class TraceEvidence:
    """What torch logged during one export call about how it went (live runs keep it too: it places
    an issue whose exception names no user line)."""

    started: bool = False  # torch logged `export` as the call began (TORCH_DTRACE)
    key: tuple[tuple[str, int | None], ...] | None = None
    describers: set[int] = field(default_factory=set)  # fake-tensor describers of its inputs
    compile_id: str | None = None  # a strict export's Dynamo capture
    metrics: list[tuple[str | None, str]] = field(default_factory=list)  # (fail_type, fail_reason)
    data_dependent: list[tuple[str, dict[str, Any] | None]] = field(default_factory=list)
    partial: dict[str, Any] | None = None  # make_fx_fail_partial: the last line it traced, its node
    followed: bool = False  # another export began after it

    @property
    def failure(self) -> tuple[str, str] | None:
        for fail_type, reason in self.metrics:
            if fail_type:
                return fail_type, reason
        return None


def _log_kind(run: ExportRun, evidence: TraceEvidence) -> str:
    if evidence.started:
        return "dtrace"
    return "draft" if run.api == "draft_export" else "plain"


def conclude(run: ExportRun, evidence: TraceEvidence, ctx: Context) -> None:
    """A log's export: its outcome, exception and issues from what torch logged, and what the log
    cannot tell."""
    kind = _log_kind(run, evidence)
    run.logged_as = LOGGED_AS[kind]
    failure = evidence.failure
    if run.program is not None:
        run.ok = True
    elif failure or evidence.data_dependent or evidence.partial:
        run.ok = False
    elif evidence.started and evidence.followed:
        run.ok = False  # the next call began and this one had returned no ExportedProgram: it raised
    else:
        run.ok = None
    if kind == "draft":
        _draft_issues(run, ctx)
    elif run.ok is False:
        _failure_issues(run, evidence, ctx, failure)
    run.log_lacks = _lacks(run, kind)


def _failure_issues(
    run: ExportRun, evidence: TraceEvidence, ctx: Context, failure: tuple[str, str] | None
) -> None:
    if failure:
        fail_type, reason = failure
        run.exc_type = _RAISED_AS.get(fail_type, fail_type)  # only a strict export has Dynamo's metrics
        run.issues.extend(from_exception(run.exc_type, reason, [], ctx, None, origin="trace"))
    elif evidence.data_dependent:
        expr, where = evidence.data_dependent[-1]
        run.exc_type = "UserError" if run.strict else "GuardOnDataDependentSymNode"
        run.issues.append(from_data_dependent(expr, where, ctx))
    elif evidence.partial:
        run.issues.append(from_partial_graph(evidence.partial, ctx))
    else:
        run.issues.extend(from_specialization(s.to_json(), ctx) for s in run.specializations)
    if not run.issues:
        run.issues.append(from_unrecorded_failure(ctx))


def _draft_issues(run: ExportRun, ctx: Context) -> None:
    for name, body, where in run.report_events:
        issue = from_trace(name, body, where, ctx)
        if issue is not None:
            run.issues.append(issue)


def _lacks(run: ExportRun, kind: str) -> list[str]:
    out = []
    dtrace = (
        "run the program with TORCH_DTRACE=DIR (torch then logs each call's start and its ExportedProgram)"
    )
    if run.ok is None and kind == "plain":
        out.append(f"how the call ended: a TORCH_TRACE log has no record of an export's end; {dtrace}")
        if run.specializations:
            named = ", ".join(", ".join(s.sources) or s.symbol for s in run.specializations)
            out.append(
                f"whether the specialization of {named} failed the export: it does when the "
                "dimension was marked Dim.DYNAMIC or a named Dim (dynamic_shapes is not in the log)"
            )
    elif run.ok is None:
        out.append("how the call ended: the log ends during it (the program stopped, or the log was cut)")
    if run.ok is False and not run.exc_type:
        out.append(
            "the exception: torch logged none for this failure"
            + (
                " (with TORCH_DTRACE=DIR it logs each data-dependent error it raises)"
                if kind == "plain"
                else ""
            )
            + "; `tcx export PROGRAM` records every exception"
        )
    if run.program is None and run.ok is not False:
        out.append("the ExportedProgram's signature: " + ("not logged" if kind != "plain" else dtrace))
    if kind == "draft" and not run.call_site:
        out.append("the program's line that called draft_export: its log records none")
    return out
