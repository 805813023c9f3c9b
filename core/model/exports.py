"""torch.export / draft_export / AOTInductor calls of a run, as facts of the run model: each
export ok or failed with its issues, the guards it added, its specializations and signature, and
each AOTInductor compile with its kernels' provenance. `ExportBuilder` is handed the events by the
model's one pass (core/model/consumers.ExportsConsumer); core/views/export.py shows the result.

A live run or recording has the `export` capture's events around each call
(core/recorder/compat_export.py) and torch's detailed structured trace in between; a TORCH_TRACE
log has only the trace, so its exports are found by their events (`export`, `exported_program`)
and its issues are the ones `tlparse --export` lists for the same log (core/model/export_issues.py).
Pure and torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tcx.core.frames import frame_origin
from tcx.core.ingest.trace_events import Interner, TraceEvent
from tcx.core.model.aoti_provenance import (
    PRE_GRAD_GRAPHS,
    AotiCompile,
    add_code,
    add_mappings,
    add_stack_traces,
)
from tcx.core.model.export_issues import (
    Context,
    ExportIssue,
    as_frame,
    as_int,
    as_sources,
    as_text,
    from_draft,
    from_exception,
    from_trace,
)
from tcx.core.torchtext.exported_program import ExportedProgramText, is_symbol, parse_exported_program

# Trace events that begin an export in a log (no recorder events to say where one starts).
_STARTS_EXPORT = frozenset(
    {
        "export",
        "exported_program",
        "propagate_real_tensors_provenance",
        "missing_fake_kernel",
        "mismatched_fake_kernel",
    }
)
_EXPORT_EVENTS = _STARTS_EXPORT | {
    "guard_added",
    "guard_added_fast",
    "create_unbacked_symbol",
    "symbolic_shape_specialization",
}


@dataclass
class GuardAdded:
    expr: str
    prefix: str | None  # eval, runtime_assert, ...; None for guard_added_fast (a plain TORCH_TRACE)
    file: str | None
    line: int | None
    function: str | None
    code: str
    sources: dict[str, str] = field(default_factory=dict)  # symbol -> the input it is a size of

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class Specialization:
    """torch's `symbolic_shape_specialization`: a dimension that became a constant."""

    symbol: str
    sources: list[str]
    value: str
    reason: str | None
    guard: GuardAdded | None  # the guard that pinned it, with its line

    def to_json(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol,
            "sources": self.sources,
            "value": self.value,
            "reason": self.reason,
            "guard": self.guard.to_json() if self.guard else None,
        }


@dataclass
class ExportRun:
    index: int
    api: str  # export | draft_export | aoti_compile_and_package | log (found in a TORCH_TRACE log)
    name: str | None = None  # the module's class
    ok: bool | None = None  # None: the input does not say (a log without `exported_program`)
    strict: bool | None = None
    call_site: dict[str, Any] | None = None
    seconds: float | None = None
    dynamic_shapes: str | None = None
    exc_type: str | None = None
    package_path: str | None = None
    issues: list[ExportIssue] = field(default_factory=list)
    guards_added: list[GuardAdded] = field(default_factory=list)
    specializations: list[Specialization] = field(default_factory=list)
    unbacked: dict[str, dict[str, Any]] = field(default_factory=dict)  # u0 -> where it was made
    program: ExportedProgramText | None = None
    # facts collected while the call ran, turned into issues when it ends
    _end: dict[str, Any] | None = None
    _trace_issues: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.api == "aoti_compile_and_package":
            return "AOTInductor package"
        site = self.call_site or {}
        return f"export #{self.index + 1}" + (f" at line {site['line']}" if site.get("line") else "")

    def signature_json(self) -> dict[str, Any] | None:
        ep = self.program
        if ep is None:
            return None
        ranges = {s: {"min": lo, "max": hi} for s, (lo, hi) in ep.range_constraints.items()}
        dims = [
            {"input": e.name, "dim": d, "symbol": size, **ranges.get(size, {"min": None, "max": None})}
            for e in ep.inputs
            if e.kind == "USER_INPUT"
            for d, size in enumerate(e.shape or [])
            if is_symbol(size)
        ]
        by_kind = {
            "inputs": ("USER_INPUT", "TOKEN"),
            "parameters": ("PARAMETER",),
            "buffers": ("BUFFER",),
            "constants": ("CONSTANT_TENSOR", "CUSTOM_OBJ"),
        }
        return {
            **{key: [e.to_json() for e in ep.inputs if e.kind in kinds] for key, kinds in by_kind.items()},
            "outputs": [e.to_json() for e in ep.outputs],
            "range_constraints": ranges,
            "dynamic_dims": dims,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "api": self.api,
            "ok": self.ok,
            "strict": self.strict,
            "call_site": self.call_site,
            "seconds": self.seconds,
            "dynamic_shapes": self.dynamic_shapes,
            "exc_type": self.exc_type,
            "package_path": self.package_path,
            "failures": [i.to_json() for i in self.issues],
            "guards_added": [g.to_json() for g in self.guards_added],
            "specializations": [s.to_json() for s in self.specializations],
            "unbacked_symbols": [{"symbol": k, **v} for k, v in self.unbacked.items()],
            "signature": self.signature_json(),
        }


class ExportBuilder:
    """Exports (from the capture's start/end, or found in a log) and the trace facts that belong to
    each; the model's one pass (core/model/consumers.ExportsConsumer) hands it the events."""

    def __init__(self) -> None:
        self.interner = Interner()
        self.runs: list[ExportRun] = []
        self.open: list[ExportRun] = []  # live calls in progress (innermost last)
        self.live = False
        self.log_run: ExportRun | None = None  # a log's export being read
        self.log_run_done = False  # its `exported_program` came: the next export event starts another
        self.aoti: list[AotiCompile] = []
        self.pre_grad = ""

    # -- the export capture's events ---------------------------------------------------------------
    def recorder(self, event: dict[str, Any]) -> None:
        self.live = True
        if event.get("event") == "start":
            strict = event.get("strict")
            run = ExportRun(
                index=len(self.runs),
                api=str(event.get("api") or "export"),
                name=as_text(event.get("name")),
                strict=strict if isinstance(strict, bool) else None,
                call_site=as_frame(event.get("call_site")),
                dynamic_shapes=as_text(event.get("dynamic_shapes")),
            )
            self.runs.append(run)
            self.open.append(run)
        elif event.get("event") == "end" and self.open:
            run = self.open.pop()
            seconds = event.get("seconds")
            run.ok = event.get("ok") is True
            run.seconds = float(seconds) if isinstance(seconds, (int, float)) and seconds >= 0 else None
            run.package_path = as_text(event.get("package_path"))
            run.exc_type = as_text(event.get("exc_type"))
            run._end = event

    # -- torch's structured trace -----------------------------------------------------------------
    def trace(self, ev: TraceEvent) -> None:
        name = ev.name
        if name == "str":
            self.interner.add(ev.body, ev.rank)
            return
        if name in PRE_GRAD_GRAPHS:
            self.pre_grad = ev.payload or ""
            return
        if name == "graph_dump":
            self._aoti_code(ev)
            return
        if name.startswith("artifact:inductor_provenance_tracking") and self.aoti:
            target = self.aoti[-1]
            if name.endswith("node_mappings"):
                add_mappings(target, ev.payload)
            else:
                add_stack_traces(target, ev.payload)
            return
        if name not in _EXPORT_EVENTS:
            return
        run = self._run_for(ev)
        if run is not None:
            self._apply(run, ev)

    def _run_for(self, ev: TraceEvent) -> ExportRun | None:
        if self.open:
            # an AOTInductor compile's own shape guards are Inductor's, not the export's
            return None if self.open[-1].api == "aoti_compile_and_package" else self.open[-1]
        if self.live:
            return None  # outside any export call the program made (e.g. a torch.compile's guards)
        name = ev.name
        starts_next = name in _STARTS_EXPORT or (name == "guard_added" and ev.compile_id is None)
        if name == "export" or (self.log_run_done and starts_next and name != "exported_program"):
            self.log_run = None
        if self.log_run is None:
            if not starts_next:
                return None
            self.log_run = ExportRun(index=len(self.runs), api="log")
            self.runs.append(self.log_run)
            self.log_run_done = False
        return self.log_run

    def _apply(self, run: ExportRun, ev: TraceEvent) -> None:
        body = ev.body if isinstance(ev.body, dict) else {}
        name = ev.name
        if name == "exported_program":
            run.program = parse_exported_program(ev.payload or "")
            if run.api == "log":  # logged as the export returns: the stack ends in the program's call
                run.call_site = self._caller(ev)
            if run.api == "log":
                run.ok = True
                self.log_run_done = True
        elif name in ("guard_added", "guard_added_fast"):
            guard = self._guard(body, None if name == "guard_added_fast" else body.get("prefix"))
            if name == "guard_added_fast" and any(g.prefix is not None for g in run.guards_added):
                return  # the detailed event of the same guard is there
            if not any(_same_guard(guard, g) for g in run.guards_added):
                run.guards_added.append(guard)
            if name == "guard_added" and run.api == "log":
                run._trace_issues.append((name, body, self._where(body)))
        elif name == "create_unbacked_symbol":
            where = self._where(body) or {}
            run.unbacked[str(body.get("symbol"))] = {
                k: where.get(k) for k in ("file", "line", "function", "code")
            }
        elif name == "symbolic_shape_specialization":
            symbol, value = str(body.get("symbol")), str(body.get("value"))
            forced = next((g for g in reversed(run.guards_added) if g.expr == f"Eq({symbol}, {value})"), None)
            if any((sp.symbol, sp.value) == (symbol, value) for sp in run.specializations):
                return  # draft_export exports again after a specialization: the same one, logged twice
            run.specializations.append(
                Specialization(
                    symbol, _texts(body.get("sources")), value, as_text(body.get("reason")), forced
                )
            )
        elif run.api == "log" and name != "export":
            run._trace_issues.append((name, body, self._where(body)))

    def _guard(self, body: dict[str, Any], prefix: str | None) -> GuardAdded:
        where = self._where(body) or {}
        return GuardAdded(
            expr=str(body.get("expr")),
            prefix=as_text(prefix),
            file=where.get("file"),
            line=where.get("line"),
            function=where.get("function"),
            code=str(where.get("code") or ""),
            sources=as_sources(body.get("symbol_to_sources")),
        )

    def _frames(self, raw: Any, rank: Any = None) -> list[dict[str, Any]]:
        return [
            {
                "file": self.interner.file(f.get("filename"), rank),
                "line": as_int(f.get("line")),
                "function": as_text(f.get("name")),
                "code": str(f.get("loc") or ""),
            }
            for f in _dicts(raw)
        ]

    def _where(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The user's line of a trace event: its `user_stack`, or (older torch) its full `stack`."""
        frames = self._frames(body.get("user_stack") or body.get("stack"))
        user = [f for f in frames if _is_user(f["file"])]
        return user[-1] if user else None

    def _caller(self, ev: TraceEvent) -> dict[str, Any] | None:
        """A log's export call: the innermost user frame of the event's stack."""
        user = [f for f in self._frames(ev.md.get("stack"), ev.rank) if _is_user(f["file"])]
        return user[-1] if user else None

    def _aoti_code(self, ev: TraceEvent) -> None:
        body = ev.body if isinstance(ev.body, dict) else {}
        name = body.get("name")
        if name not in ("inductor_aot_wrapper_code", "inductor_aot_kernel_code"):
            return
        current = self.aoti[-1] if self.aoti else None
        if name == "inductor_aot_wrapper_code" or current is None or current.kernel_file is not None:
            current = AotiCompile(pre_grad=self.pre_grad)
            aoti_run = next((r for r in reversed(self.open) if r.api == "aoti_compile_and_package"), None)
            current.export_index = aoti_run.index if aoti_run else None
            self.aoti.append(current)
        add_code(current, body, ev.payload)

    # -- issues, once a call has ended ------------------------------------------------------------
    def finish(self, run: ExportRun) -> ExportRun:
        ctx = Context(
            guards=[g.to_json() for g in run.guards_added if g.prefix != "runtime_assert"],
            unbacked=run.unbacked,
            call_site=run.call_site,
        )
        end = run._end or {}
        if run.ok is False:
            run.issues.append(
                from_exception(
                    str(end.get("exc_type") or "?"),
                    str(end.get("message") or ""),
                    _dicts(end.get("frames")),
                    ctx,
                    end.get("op_schema") if isinstance(end.get("op_schema"), dict) else None,
                )
            )
        for failure in _dicts(end.get("draft_failures")):
            if isinstance(failure, dict):
                failure["user_stack"] = [self._resolved(f) for f in _dicts(failure.get("user_stack"))]
                run.issues.append(from_draft(failure, ctx))
        for name, body, where in run._trace_issues:
            issue = from_trace(name, body, where, ctx)
            if issue is not None:
                run.issues.append(issue)
        return run

    def _resolved(self, frame: Any) -> dict[str, Any]:
        """A frame of draft_export's report: its file from the run's `str` events when torch's report
        could not name it (the file was interned before draft_export began)."""
        out: dict[str, Any] = dict(frame) if isinstance(frame, dict) else {}
        if not out.get("file") and isinstance(out.get("file_id"), int):
            out["file"] = self.interner.file(out["file_id"])
        return out


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _texts(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _is_user(file: str) -> bool:
    """The user's code; torch run from a source checkout (`.../pytorch/torch/...`) is torch's."""
    return frame_origin(file) == "user" and "/pytorch/torch/" not in file.replace("\\", "/")


def _same_guard(a: GuardAdded, b: GuardAdded) -> bool:
    return (a.expr, a.file, a.line, a.prefix) == (b.expr, b.file, b.line, b.prefix)
