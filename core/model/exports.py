"""torch.export / draft_export / AOTInductor calls of a run, as facts of the run model: each
export ok or failed with its issues, the guards it added, its specializations and signature, and
each AOTInductor compile with its kernels' provenance. `ExportBuilder` is handed the events by the
model's one pass (core/model/consumers.ExportsConsumer); core/views/export.py shows the result.

A live run or recording has the `export` capture's events around each call
(core/recorder/compat_export.py) and torch's detailed structured trace in between. A log has only
the trace: its calls are found by the stacks torch logs (each names the program's line that called
torch.export), by TORCH_DTRACE's `export` event, and by draft_export's own log; how each ended and
its issues are what torch logged (core/model/export_log.py). Pure and torch-free.
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
)
from tcx.core.model.export_log import (
    DRAFT_LOG_EVENTS,
    ENTRY_FILES,
    NEEDS_EXPORT_STACK,
    TraceEvidence,
    conclude,
    export_entry,
)
from tcx.core.torchtext.exported_program import ExportedProgramText, is_symbol, parse_exported_program
from tcx.core.torchtext.fx_graph import parse_graph_nodes
from tcx.core.torchtext.locations import fx_node_location

_EXPORT_EVENTS = frozenset(
    {
        "export",
        "exported_program",
        "propagate_real_tensors_provenance",
        "missing_fake_kernel",
        "mismatched_fake_kernel",
        "guard_added",
        "create_unbacked_symbol",
    }
    | NEEDS_EXPORT_STACK
)


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
    api: str  # export | draft_export | aoti_compile_and_package
    name: str | None = None  # the module's class (a log does not name it)
    ok: bool | None = None  # None: the input does not say (see log_lacks)
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
    logged_as: str | None = None  # a log's kind: TORCH_TRACE, TORCH_DTRACE, draft_export log (None: live)
    log_lacks: list[str] = field(default_factory=list)  # what the log cannot tell, and what would
    symbol_sources: dict[str, str] = field(default_factory=dict)  # s77 -> L['x'].size()[0]
    # facts collected while the call ran, turned into issues when it ends
    evidence: TraceEvidence = field(default_factory=TraceEvidence)
    # the events a draft_export's report is made of: (name, body, the user's line)
    report_events: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = field(default_factory=list)
    _end: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.api == "aoti_compile_and_package":
            return "AOTInductor package"
        # a log names no module: the program's outermost line on the call's stack says which call
        # (a helper that calls torch.export for every module is the same direct caller each time)
        outermost = self.evidence.key[0][1] if self.evidence.key else (self.call_site or {}).get("line")
        return f"{self.api} #{self.index + 1}" + (f" at line {outermost}" if outermost else "")

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
            "logged_as": self.logged_as,
            "log_lacks": self.log_lacks,
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
        self.entry_files: set[tuple[Any, int]] = set()  # interned ids of torch.export's entry files
        self.aoti: list[AotiCompile] = []
        self.pre_grad = ""

    # -- the recorder's events -----------------------------------------------------------------------
    def recorder(self, event: dict[str, Any]) -> None:
        self.live = True  # a recording: exports are the capture's calls, never guessed from stacks
        if event.get("kind") != "export":
            return
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

    def log_file(self) -> None:
        """Another file of the log begins: a draft_export's own log (it took torch's trace from the
        file before), so what follows is another call."""
        if self.log_run is not None:
            self.log_run.evidence.followed = True
        self.log_run = None

    # -- torch's structured trace -----------------------------------------------------------------
    def trace(self, ev: TraceEvent) -> None:
        name = ev.name
        if name == "str":
            self.interner.add(ev.body, ev.rank)
            body = ev.body
            if (
                isinstance(body, list)
                and len(body) == 2
                and isinstance(body[1], int)  # an index into the file table, as the interner takes
                and str(body[0]).replace("\\", "/").endswith(ENTRY_FILES)
            ):
                self.entry_files.add((ev.rank, body[1]))
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
        run = self._live_run() if self.live else self._log_run(ev)
        if run is not None:
            self._apply(run, ev)

    def _live_run(self) -> ExportRun | None:
        """The call in progress; none outside the program's calls (e.g. a torch.compile's guards),
        and an AOTInductor compile's own shape guards are Inductor's, not the export's."""
        if not self.open or self.open[-1].api == "aoti_compile_and_package":
            return None
        return self.open[-1]

    def _log_run(self, ev: TraceEvent) -> ExportRun | None:
        """The export of a log an event belongs to: a new one when torch logs `export`
        (TORCH_DTRACE), when a stack names another call of torch.export, or when draft_export's own
        log begins after a call that returned its program."""
        name = ev.name
        if name == "export":
            return self._new_log_run(started=True)
        if name in ("describe_source", "compilation_metrics") and ev.compile_id is not None:
            return None  # inside a Dynamo compile: a torch.compile's (a strict export's metrics have none)
        run = self.log_run
        entry = export_entry(self._stack(ev))
        if entry is not None:
            if run is None or self._another_call(run, entry.key, ev):
                run = self._new_log_run(started=False)
            if run.evidence.key is None:
                run.evidence.key, run.call_site = entry.key, entry.call_site
                run.api = entry.api
            if run.strict is None:
                run.strict = entry.strict
            return run
        if name in NEEDS_EXPORT_STACK:
            return None  # no export on its stack: a torch.compile's event
        if run is None or run.program is not None:
            return self._new_log_run(started=False) if name in DRAFT_LOG_EVENTS else None
        if ev.compile_id is not None and not (run.strict and ev.compile_id == run.evidence.compile_id):
            return None  # a compile's event, not this export's
        return run

    def _new_log_run(self, *, started: bool) -> ExportRun:
        if self.log_run is not None:
            self.log_run.evidence.followed = True
        run = ExportRun(index=len(self.runs), api="export" if started else "draft_export")
        run.evidence.started = started
        self.runs.append(run)
        self.log_run = run
        return run

    @staticmethod
    def _another_call(run: ExportRun, key: tuple[Any, ...], ev: TraceEvent) -> bool:
        """Whether a stacked event begins another call than `run`: `run` returned its program, was
        called from other lines, or this is a second call from the same lines (its inputs made fake
        again, or Dynamo's capture measured again)."""
        evidence = run.evidence
        if run.program is not None or (evidence.key is not None and evidence.key != key):
            return True
        if ev.name == "describe_source":
            describer = as_int(ev.body_field("describer_id"))
            return (
                describer is not None and bool(evidence.describers) and describer not in evidence.describers
            )
        return ev.name == "compilation_metrics" and bool(evidence.metrics)

    def _stack(self, ev: TraceEvent) -> list[dict[str, Any]]:
        """The full stack an event was logged from (the record's, else its body's `stack`), when it
        passes through torch.export's entry file (others are not resolved: a large log has many)."""
        raw = ev.md.get("stack")
        if not raw and isinstance(ev.body, dict):
            raw = ev.body.get("stack")
        frames = _dicts(raw)
        names = [f.get("filename") for f in frames]
        if not any((ev.rank, n) in self.entry_files or str(n).endswith(ENTRY_FILES) for n in names):
            return []
        return self._frames(frames, ev.rank)

    def _apply(self, run: ExportRun, ev: TraceEvent) -> None:
        body = ev.body if isinstance(ev.body, dict) else {}
        name = ev.name
        evidence = run.evidence
        if ev.compile_id is not None and evidence.compile_id is None and run.strict:
            evidence.compile_id = ev.compile_id
        if name == "exported_program":
            run.program = parse_exported_program(ev.payload or "")
            if run.call_site is None and not self.live:
                run.call_site = self._caller(ev)  # older torch logs it with the stack of the call
        elif name == "describe_source":
            describer = as_int(body.get("describer_id"))
            if describer is not None:
                evidence.describers.add(describer)
        elif name == "create_symbol":
            if body.get("symbol") and body.get("source"):
                run.symbol_sources[str(body["symbol"])] = str(body["source"])
        elif name == "compilation_metrics":
            evidence.metrics.append((as_text(body.get("fail_type")), str(body.get("fail_reason") or "")))
        elif name == "guard_on_data_dependent_error":
            evidence.data_dependent.append((str(body.get("expr")), self._where(body)))
        elif name == "artifact:make_fx_fail_partial":
            evidence.partial = _last_traced(ev.payload or "")
        elif name in ("guard_added", "guard_added_fast"):
            self._guard_event(run, name, body)
        elif name == "create_unbacked_symbol":
            where = self._where(body) or {}
            run.unbacked[str(body.get("symbol"))] = {
                k: where.get(k) for k in ("file", "line", "function", "code")
            }
        elif name == "symbolic_shape_specialization":
            self._specialization(run, body)
        elif name in ("propagate_real_tensors_provenance", "missing_fake_kernel", "mismatched_fake_kernel"):
            run.report_events.append((name, body, self._where(body)))

    def _guard_event(self, run: ExportRun, name: str, body: dict[str, Any]) -> None:
        guard = self._guard(body, None if name == "guard_added_fast" else body.get("prefix"))
        if name == "guard_added_fast" and any(g.prefix is not None for g in run.guards_added):
            return  # the detailed event of the same guard is there
        if not any(_same_guard(guard, g) for g in run.guards_added):
            run.guards_added.append(guard)
        if name == "guard_added":
            run.report_events.append((name, body, self._where(body)))

    def _specialization(self, run: ExportRun, body: dict[str, Any]) -> None:
        symbol, value = str(body.get("symbol")), str(body.get("value"))
        if any((sp.symbol, sp.value) == (symbol, value) for sp in run.specializations):
            return  # draft_export exports again after a specialization: the same one, logged twice
        forced = next((g for g in reversed(run.guards_added) if g.expr == f"Eq({symbol}, {value})"), None)
        run.specializations.append(
            Specialization(symbol, _texts(body.get("sources")), value, as_text(body.get("reason")), forced)
        )

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
        ctx = self._context(run)
        if not self.live:
            conclude(run, run.evidence, ctx)
            return run
        end = run._end or {}
        if run.ok is False:
            run.issues.extend(
                from_exception(
                    str(end.get("exc_type") or "?"),
                    str(end.get("message") or ""),
                    _dicts(end.get("frames")),
                    ctx,
                    end.get("op_schema") if isinstance(end.get("op_schema"), dict) else None,
                )
            )
        for failure in _dicts(end.get("draft_failures")):
            failure["user_stack"] = [self._resolved(f) for f in _dicts(failure.get("user_stack"))]
            run.issues.append(from_draft(failure, ctx))
        return run

    def _context(self, run: ExportRun) -> Context:
        program = run.program
        return Context(
            guards=[g.to_json() for g in run.guards_added if g.prefix != "runtime_assert"],
            unbacked=run.unbacked,
            call_site=run.call_site,
            specializations=[s.to_json() for s in run.specializations],
            symbol_sources=run.symbol_sources,
            data_dependent=run.evidence.data_dependent,
            partial=run.evidence.partial,
            program_symbols=None if program is None else _input_symbols(program),
            op_lines={} if program is None else _op_lines(program.graph),
        )

    def _resolved(self, frame: Any) -> dict[str, Any]:
        """A frame of draft_export's report: its file from the run's `str` events when torch's report
        could not name it (the file was interned before draft_export began)."""
        out: dict[str, Any] = dict(frame) if isinstance(frame, dict) else {}
        if not out.get("file") and isinstance(out.get("file_id"), int):
            out["file"] = self.interner.file(out["file_id"])
        return out


def _input_symbols(program: ExportedProgramText) -> set[str]:
    return {size for e in program.inputs for size in e.shape or [] if is_symbol(size)} | set(
        program.range_constraints
    )


def _op_lines(graph: str) -> dict[str, dict[str, Any]]:
    """Each op the program calls -> the user's line of its first call (the `# File:` above it)."""
    out: dict[str, dict[str, Any]] = {}
    for node in parse_graph_nodes(graph):
        if node.op and node.user_line and node.op not in out:
            out[node.op] = node.user_line
    return out


def _last_traced(partial_graph: str) -> dict[str, Any] | None:
    """`make_fx_fail_partial`: the user's line of the last node torch traced (the `# File:` above
    it), and that node's text."""
    where: dict[str, Any] | None = None
    node = ""
    for raw in partial_graph.splitlines():
        loc = fx_node_location(raw)
        if loc is not None:
            where, node = loc.to_json(), ""
        elif where is not None and "=" in raw and not raw.strip().startswith(("def ", "return")):
            node = raw.strip().split(";  ")[0]
    return {**where, "node": node or None} if where else None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _texts(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _is_user(file: str) -> bool:
    """The user's code; torch run from a source checkout (`.../pytorch/torch/...`) is torch's."""
    return frame_origin(file) == "user" and "/pytorch/torch/" not in file.replace("\\", "/")


def _same_guard(a: GuardAdded, b: GuardAdded) -> bool:
    return (a.expr, a.file, a.line, a.prefix) == (b.expr, b.file, b.line, b.prefix)
