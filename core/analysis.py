"""Build the run model from recorded events: compiles, graph breaks, recompiles, failures.

Pure and torch-free: the same functions serve a live run, a saved recording and a
TORCH_TRACE log. Counts mean what PyTorch means (see DESIGN.md's JSON contract).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tcx.core.event_schema import seconds
from tcx.core.frames import frame_origin, is_recorder_frame
from tcx.core.graph_break_text import parse_graph_break
from tcx.core.recording import Recording
from tcx.core.source_roots import recorded_roots
from tcx.core.torchtext import names
from tcx.core.trace_events import Interner, TraceEvent, normalize, qualified, ranks_of
from tcx.core.trace_lazy import LogRecord

# Events the views understand; anything else is kept and listed as "shown raw".
KNOWN_EVENTS = frozenset(
    {
        "str",
        "dynamo_start",
        "dynamo_output_graph",
        "dynamo_cpp_guards_str",
        "dynamo_guards",
        "compilation_metrics",
        "bwd_compilation_metrics",
        "compilation_metrics_runtime",
        "chromium_event",
        "describe_storage",
        "describe_tensor",
        "describe_source",
        "create_symbol",
        "guard_added",
        "guard_added_fast",
        "propagate_real_tensors",
        "expression_created",
        "missing_fake_kernel",
        "mismatched_fake_kernel",
        "symbolic_shape_specialization",
        "aot_joint_graph",
        "aot_forward_graph",
        "aot_backward_graph",
        "aot_inference_graph",
        "inductor_pre_grad_graph",
        "inductor_post_grad_graph",
        "inductor_output_code",
        "optimize_ddp_split_graph",
        "optimize_ddp_split_child",
        "compiled_autograd_graph",
        "dynamo_error",
        "artifact",
        "graph_execution",
        "link",
        "exported_program",
        "dump_file",
        "stack",
        "restart_reasons",
    }
)


# Recorder event kinds kept in RunModel.recorder_events (see core/recording.py).
RECORDER_EVENTS = frozenset(
    {"frame_call", "guard_check", "what_if", "frame_calls_dropped", "recompile_config"}
    | {"fusion", "fusion_note", "partitioner_log", "cuda_preview"}  # graphs/fusion/codegen views
    | {"cuda_preview_device", "cuda_preview_decision", "cudagraph"}  # the CUDA preview, CUDA graphs
    | {"cost_config", "cost_call", "cost_calls_more", "cost_profile", "cost_device"}  # tcx cost
    | {"cost_eager_run", "cost_eager_call"}  # tcx cost: the force_eager run's timings
)


@dataclass
class Frame:
    file: str
    line: int | None
    name: str
    code: str = ""

    @property
    def origin(self) -> str:
        return frame_origin(self.file)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "function": self.name,
            "code": self.code,
            "origin": self.origin,
        }


@dataclass
class Compile:
    """One compile id (frame_id/frame_compile_id): Dynamo's attempt(s) at one frame."""

    compile_id: str
    frame_id: int | None = None
    co_name: str | None = None
    co_filename: str | None = None
    co_firstlineno: int | None = None
    attempts: int = 1
    graph_count: int = 0
    graph_op_count: int | None = None
    guard_count: int | None = None
    fail_type: str | None = None
    fail_reason: str | None = None
    recompile_reason: str | None = None
    restart_reasons: list[str] = field(default_factory=list)
    stack: list[Frame] = field(default_factory=list)
    # The stack came from tcx's recorder (every caller); else from torch's `dynamo_start`, which
    # leaves out the direct caller of a torch.compile-wrapped function.
    full_stack: bool = False
    compile_time_s: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)  # its first compilation_metrics, as torch wrote it

    @property
    def is_resume(self) -> bool:
        return names.is_resume(self.co_name)

    @property
    def failed(self) -> bool:
        """The compile failed (Dynamo gave up, or the backend raised): the frame runs in eager Python."""
        return self.fail_type is not None

    @property
    def display_name(self) -> str:
        return names.display_name(self.co_name)


@dataclass
class GraphBreak:
    """One graph-break event (torch's `dynamo_graph_break_reason`), typed where the hook ran."""

    compile_id: str | None
    attempt: int
    gb_type: str
    gb_id: str | None
    explanation: str
    hints: list[str]
    debug_context: str
    file: str | None
    line: int | None
    user_stack: list[Frame]
    frame_skipped: bool
    caused: list[tuple[str, str | None]]  # further breaks this one triggered, e.g. "graph break in loop"
    frame: str | None = None  # the code object being traced
    typed: bool = False  # fields came from the typed hook, not only from text

    @property
    def key(self) -> tuple[str, str | None, int | None]:
        return (self.gb_type, self.file, self.line)


@dataclass(frozen=True)
class Recompile:
    """One recompile (what `TORCH_LOGS=recompiles` prints): the compile it started and torch's
    reason, from the `recompile_reasons` artifact, or from `compilation_metrics` on older torch."""

    compile_id: str | None
    reason: str


@dataclass
class Sources:
    """The program's source files a report may quote, as the recording holds them.

    A recording or log is input from anywhere and may name any path: its lines are shown from
    the text snapshot taken at record time, or from a file on disk inside the program's recorded
    `roots` whose sha256 is the recorded one, or inside a folder the user gave (`user_roots`,
    --source-root); see core/source_roots.py. A live run just ran the files on disk.
    """

    texts: dict[str, str] = field(default_factory=dict)
    sha256: dict[str, str] = field(default_factory=dict)
    live: bool = False
    roots: tuple[str, ...] = ()
    user_roots: tuple[str, ...] = ()


@dataclass
class RunModel:
    """Everything the views need, derived from one recording or log."""

    source_kind: str  # "live", "recording" or "trace"
    source: str
    target: str
    header: dict[str, Any]
    run_start: dict[str, Any] | None
    compiles: dict[str, Compile]
    graph_breaks: list[GraphBreak]
    graph_count: int
    recompiles: list[Recompile]
    compile_calls: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    program_exit: dict[str, Any] | None
    outcome: dict[str, Any] | None
    logs: list[dict[str, Any]]
    sources: Sources
    unknown_events: Counter
    problems: list[str]
    trace_events: list[TraceEvent]
    # Recorder events of kinds this module does not interpret (e.g. the recompiles capture's
    # `frame_call`, `guard_check`, `what_if`), in recording order, for the views that do.
    recorder_events: list[dict[str, Any]] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    recording: Recording | None = None

    @property
    def torch_version(self) -> str | None:
        if self.run_start:
            return self.run_start.get("torch_version")
        return self.header.get("torch_version")

    @property
    def recompile_count(self) -> int:
        return len(self.recompiles)

    @property
    def recompile_reasons(self) -> list[str]:
        return [r.reason for r in self.recompiles]

    @property
    def failed_compiles(self) -> list[Compile]:
        return [c for c in self.compiles.values() if c.failed]


def build_model(rec: Recording, source_kind: str = "recording") -> RunModel:
    interner = Interner()
    compiles: dict[str, Compile] = {}
    breaks: list[GraphBreak] = []
    pending_typed: list[dict[str, Any]] = []
    recompiles: list[Recompile] = []
    metrics_recompiles: list[Recompile] = []
    unknown: Counter = Counter()
    trace_events: list[TraceEvent] = []
    ranks = ranks_of(rec.events)
    multi_rank = len(ranks) > 1
    graph_count = 0
    extras: dict[str, list[dict[str, Any]]] = {k: [] for k in ("compile_call", "call", "log")}
    sources = Sources(live=source_kind == "live", roots=recorded_roots(rec.header))
    recorder_events: list[dict[str, Any]] = []
    caller_stacks: dict[str, list[Frame]] = {}
    for event in rec.events:
        kind = event.get("kind") if isinstance(event, (dict, LogRecord)) else None
        if not isinstance(kind, str):
            continue  # the loaders report malformed events; a model built in memory skips them too
        if kind == "trace":
            if isinstance(event, LogRecord):  # read straight into its TraceEvent
                ev: TraceEvent | None = event if event.name is not None else None
                if ev is not None and multi_rank:
                    ev = qualified(ev)
            else:
                ev = normalize(event.get("md") or {}, event.get("payload"), qualify_rank=multi_rank)
            if ev is None:
                continue
            trace_events.append(ev)
            base = ev.name.split(":", 1)[0]
            if base not in KNOWN_EVENTS:
                unknown[ev.name] += 1
            if ev.name == "str":
                interner.add(ev.body, ev.rank)
            elif ev.name == "dynamo_start":
                comp = _compile(compiles, ev)
                raw_stack = ev.body.get("stack") if isinstance(ev.body, dict) else None
                comp.stack = _stack(raw_stack, interner, ev.rank)
                if ev.attempt:
                    comp.attempts = max(comp.attempts, ev.attempt + 1)
            elif ev.name == "dynamo_output_graph":
                graph_count += 1
                _compile(compiles, ev).graph_count += 1
            elif ev.name == "compilation_metrics" and isinstance(ev.body, dict):
                # An AOTInductor compile (torch.export, then aoti_compile_and_package) logs metrics
                # with no compile id: no frame was compiled, so it is no compile of the run.
                if ev.compile_id is not None or ev.body.get("compile_id") is not None:
                    cid = ev.body.get("compile_id")
                    _apply_metrics(_compile(compiles, ev, cid), ev.body, metrics_recompiles)
            elif ev.name == "artifact:recompile_reasons":
                recompiles.append(Recompile(ev.compile_id, _recompile_text(ev.payload)))
            elif ev.name == "artifact:dynamo_graph_break_reason":
                breaks.append(_graph_break(ev, pending_typed.pop(0) if pending_typed else None))
        elif kind == "graph_break":
            if "hook_error" not in event:
                pending_typed.append(event)
        elif kind == "compile_stack":
            if isinstance(event.get("compile_id"), str):
                caller_stacks[event["compile_id"]] = _caller_stack(event.get("stack"))
        elif kind == "source":
            _add_source(sources, event)
        elif kind in extras:
            extras[kind].append(event)
        elif kind in RECORDER_EVENTS:
            recorder_events.append(event)
    _name_refused_compiles(compiles)
    for cid, callers in caller_stacks.items():
        comp = compiles.get(cid)
        if comp is not None:
            comp.stack = callers + comp.stack[-1:]  # torch's last frame is the compiled frame itself
            comp.full_stack = True
    run_start = rec.first("run_start")
    return RunModel(
        source_kind=source_kind,
        ranks=ranks,
        recording=rec,
        source=rec.source,
        target=str(rec.header.get("target") or rec.source),
        header=rec.header,
        run_start=run_start,
        compiles=compiles,
        graph_breaks=breaks,
        graph_count=graph_count,
        # Older torch logs carry the reason only in compilation_metrics.
        recompiles=recompiles or metrics_recompiles,
        compile_calls=extras["compile_call"],
        calls=extras["call"],
        program_exit=rec.first("program_exit"),
        outcome=rec.first("outcome"),
        logs=extras["log"],
        sources=sources,
        unknown_events=unknown,
        problems=list(rec.problems),
        trace_events=trace_events,
        recorder_events=recorder_events,
    )


def _add_source(sources: Sources, event: dict[str, Any]) -> None:
    file = event.get("file")
    if not isinstance(file, str):
        return
    if isinstance(event.get("text"), str):
        sources.texts[file] = event["text"]
    if isinstance(event.get("sha256"), str):
        sources.sha256[file] = event["sha256"]


def _compile(compiles: dict[str, Compile], ev: TraceEvent, fallback_id: str | None = None) -> Compile:
    cid = ev.compile_id or fallback_id or "?"
    if cid not in compiles:
        compiles[cid] = Compile(compile_id=cid, frame_id=ev.frame_id)
    return compiles[cid]


def _stack(raw: Any, interner: Interner, rank: Any = None) -> list[Frame]:
    frames = []
    for fr in raw or []:
        if not isinstance(fr, dict):
            continue
        file = interner.file(fr.get("filename"), rank)
        if is_recorder_frame(file):
            continue
        frames.append(
            Frame(
                file=file,
                line=fr.get("line"),
                name=str(fr.get("name", "?")),
                code=fr.get("loc") or "",
            )
        )
    return frames


def _caller_stack(raw: Any) -> list[Frame]:
    return [
        Frame(file=str(fr["file"]), line=fr.get("line"), name=str(fr.get("name", "?")))
        for fr in raw or []
        if isinstance(fr, dict) and isinstance(fr.get("file"), str)
    ]


def _apply_metrics(comp: Compile, m: dict[str, Any], metrics_recompiles: list[Recompile]) -> None:
    comp.co_name = m.get("co_name") or comp.co_name
    comp.co_filename = m.get("co_filename") or comp.co_filename
    comp.co_firstlineno = m.get("co_firstlineno") or comp.co_firstlineno
    comp.graph_op_count = m.get("graph_op_count")
    comp.guard_count = m.get("guard_count")
    comp.fail_type = m.get("fail_type")
    comp.fail_reason = m.get("fail_reason")
    comp.recompile_reason = m.get("recompile_reason")
    comp.restart_reasons = list(m.get("restart_reasons") or [])
    comp.compile_time_s = seconds(m.get("entire_frame_compile_time_s"))
    comp.metrics = comp.metrics or m
    if comp.recompile_reason:
        metrics_recompiles.append(Recompile(comp.compile_id, comp.recompile_reason))
    if comp.fail_type and not comp.co_name:
        # A frame refused before tracing (e.g. the recompile limit) has no co_name in metrics.
        comp.co_name = _frame_name_from_stack(comp)


def _name_refused_compiles(compiles: dict[str, Compile]) -> None:
    """A compile refused before tracing (the recompile limit) has no code name of its own; the
    other compiles of the same frame (same frame id, same rank) name it."""

    def frame_of(comp: Compile) -> str:  # "0" of "0/3", "rank1:0" of "rank1:0/3"
        return comp.compile_id.rsplit("/", 1)[0]

    by_frame = {frame_of(c): c for c in compiles.values() if c.co_name}
    for comp in compiles.values():
        known = by_frame.get(frame_of(comp))
        if not comp.co_name and known is not None:
            comp.co_name = known.co_name
            comp.co_filename = comp.co_filename or known.co_filename
            comp.co_firstlineno = comp.co_firstlineno or known.co_firstlineno


def _frame_name_from_stack(comp: Compile) -> str | None:
    return comp.stack[-1].name if comp.stack else None


def _recompile_text(payload: str | None) -> str:
    import json

    if payload is None:
        return ""
    try:
        value = json.loads(payload)
    except ValueError:
        return payload.strip()
    if isinstance(value, list):
        return "\n".join(map(str, value))
    return str(value)


def _graph_break(ev: TraceEvent, typed: dict[str, Any] | None) -> GraphBreak:
    parsed = parse_graph_break(ev.payload or "")
    primary = parsed.primary
    stack = [Frame(f["file"], f["line"], f["name"], f.get("code", "")) for f in parsed.user_stack]
    stack = [f for f in stack if not is_recorder_frame(f.file)]
    file, line = parsed.file, parsed.line
    gb_type, gb_id = primary.gb_type, primary.gb_id
    frame = None
    caused_types = {sec.gb_type for sec in parsed.sections[1:]}
    if typed and (typed.get("compile_id") in (None, ev.compile_id)):
        # When one break caused another (a print inside a loop makes Dynamo skip the frame),
        # the hook sees the last exception; the text keeps the root cause first.
        if typed.get("gb_type") not in caused_types:
            gb_type = typed.get("gb_type") or gb_type
            gb_id = typed.get("gb_id") or gb_id
        frame = typed.get("frame")
        typed_stack = [
            Frame(str(f.get("file")), f.get("line"), str(f.get("name")), f.get("code") or "")
            for f in typed.get("user_stack") or []
            if isinstance(f, dict)
        ]
        if typed_stack:
            stack = typed_stack
    if stack:
        # The innermost frame is where the break happened; its full path beats the short one.
        file, line = stack[-1].file, stack[-1].line
    return GraphBreak(
        compile_id=ev.compile_id,
        attempt=ev.attempt,
        gb_type=gb_type,
        gb_id=gb_id,
        explanation=primary.explanation,
        hints=primary.hints,
        debug_context=primary.debug_context,
        file=file,
        line=line,
        user_stack=stack,
        frame_skipped=parsed.frame_skipped,
        caused=[(s.gb_type, s.gb_id) for s in parsed.sections[1:]],
        frame=frame,
        typed=typed is not None,
    )


def resume_target(comp: Compile) -> tuple[str, int] | None:
    """For a resume function's compile: (original function, line it resumed at)."""
    return names.parse_resume(comp.co_name)
