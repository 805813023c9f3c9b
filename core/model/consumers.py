"""The consumers of the one-pass build (build.py): each turns the events it declares into facts.

- `CompilesConsumer`: compile ids, their metrics, stacks (torch's, or every caller where tcx's
  recorder kept them) and graph counts;
- `BreaksConsumer`: graph breaks, torch's text joined with the typed fields of tcx's hook;
- `RecompilesConsumer`: recompiles, one rule for every torch version (the `recompile_reasons`
  artifact, or `compilation_metrics.recompile_reason` where older torch wrote only that);
- `SourcesConsumer`: the source files the recording embedded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tcx.core.frames import is_recorder_frame
from tcx.core.ingest.event_schema import seconds
from tcx.core.ingest.trace_events import Interner, TraceEvent
from tcx.core.model.aoti_provenance import AotiCompile
from tcx.core.model.exports import ExportBuilder, ExportRun
from tcx.core.model.facts import Compile, Frame, GraphBreak, Milestone, Recompile, Sources
from tcx.core.model.preview import CudaPreview, PreviewDevice, PreviewModule, text
from tcx.core.torchtext.graph_break_text import ParsedBreak, parse_graph_break


@dataclass
class Facts:
    """What the consumers write, for build.py to put in the RunModel."""

    sources_roots: tuple[str, ...] = ()
    live: bool = False
    compiles: dict[str, Compile] = field(default_factory=dict)
    graph_count: int = 0
    metrics_recompiles: list[Recompile] = field(default_factory=list)
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    recompiles: list[Recompile] = field(default_factory=list)
    sources: Sources = field(default_factory=Sources)
    interner: Interner = field(default_factory=Interner)  # file names torch interned (`str` events)
    exports: list[ExportRun] = field(default_factory=list)
    aoti_compiles: list[AotiCompile] = field(default_factory=list)
    milestones: list[Milestone] = field(default_factory=list)
    preview: CudaPreview = field(default_factory=CudaPreview)


class CompilesConsumer:
    TRACE = frozenset(
        {"str", "dynamo_start", "dynamo_output_graph", "compilation_metrics", "bwd_compilation_metrics"}
    )
    RECORDER = frozenset({"compile_stack"})

    def __init__(self) -> None:
        self.interner = Interner()
        self.compiles: dict[str, Compile] = {}
        self.graph_count = 0
        self.metrics_recompiles: list[Recompile] = []
        self.caller_stacks: dict[str, list[Frame]] = {}

    def take_trace(self, ev: TraceEvent) -> None:
        if ev.name == "str":
            self.interner.add(ev.body, ev.rank)
        elif ev.name == "dynamo_start":
            comp = self._compile(ev)
            raw = ev.body.get("stack") if isinstance(ev.body, dict) else None
            comp.stack = self._stack(raw, ev.rank)
            if ev.attempt:
                comp.attempts = max(comp.attempts, ev.attempt + 1)
                comp.seen_attempts = comp.seen_attempts | {ev.attempt}
        elif ev.name == "dynamo_output_graph":
            self.graph_count += 1
            self._compile(ev).graph_count += 1
        elif ev.name == "compilation_metrics" and isinstance(ev.body, dict):
            self._metrics(ev, ev.body)
        elif ev.name == "bwd_compilation_metrics" and isinstance(ev.body, dict):
            cid = ev.compile_id or ev.body.get("compile_id")
            if isinstance(cid, str) and cid in self.compiles:  # the backward's time is its compile's too
                _add_time(self.compiles[cid], seconds(ev.body.get("duration_us"), 1e-6))

    def take_recorder(self, event: dict[str, Any]) -> None:
        if isinstance(event.get("compile_id"), str):
            self.caller_stacks[event["compile_id"]] = [
                Frame(file=str(fr["file"]), line=fr.get("line"), name=str(fr.get("name", "?")))
                for fr in event.get("stack") or []
                if isinstance(fr, dict) and isinstance(fr.get("file"), str)
            ]

    def finish(self, facts: Facts) -> None:
        _name_refused_compiles(self.compiles)
        for cid, callers in self.caller_stacks.items():
            comp = self.compiles.get(cid)
            if comp is not None:
                comp.stack = callers + comp.stack[-1:]  # torch's last frame is the compiled frame itself
                comp.full_stack = True
        facts.compiles, facts.graph_count, facts.interner = self.compiles, self.graph_count, self.interner
        facts.metrics_recompiles = self.metrics_recompiles

    def _metrics(self, ev: TraceEvent, body: dict[str, Any]) -> None:
        # An AOTInductor compile (torch.export, then aoti_compile_and_package) logs metrics with
        # no compile id: no frame was compiled, so it is no compile of the run.
        if ev.compile_id is not None or body.get("compile_id") is not None:
            self._apply_metrics(self._compile(ev, body.get("compile_id")), body)

    def _compile(self, ev: TraceEvent, fallback_id: str | None = None) -> Compile:
        cid = ev.compile_id or fallback_id or "?"
        if cid not in self.compiles:
            self.compiles[cid] = Compile(compile_id=cid, frame_id=ev.frame_id)
        return self.compiles[cid]

    def _stack(self, raw: Any, rank: Any) -> list[Frame]:
        frames = []
        for fr in raw or []:
            if not isinstance(fr, dict):
                continue
            file = self.interner.file(fr.get("filename"), rank)
            if not is_recorder_frame(file):
                frames.append(Frame(file, fr.get("line"), str(fr.get("name", "?")), fr.get("loc") or ""))
        return frames

    def _apply_metrics(self, comp: Compile, m: dict[str, Any]) -> None:
        comp.co_name = m.get("co_name") or comp.co_name
        comp.co_filename = m.get("co_filename") or comp.co_filename
        comp.co_firstlineno = m.get("co_firstlineno") or comp.co_firstlineno
        comp.graph_op_count = m.get("graph_op_count")
        comp.guard_count = m.get("guard_count")
        comp.fail_type = m.get("fail_type")
        comp.fail_reason = m.get("fail_reason")
        comp.recompile_reason = m.get("recompile_reason")
        comp.restart_reasons = list(m.get("restart_reasons") or [])
        _add_time(comp, seconds(m.get("entire_frame_compile_time_s")))
        comp.metrics = comp.metrics or m
        if comp.recompile_reason:
            reason = str(comp.recompile_reason)
            self.metrics_recompiles.append(Recompile(comp.compile_id, reason, reason, comp.frame_id))
        if comp.fail_type and not comp.co_name and comp.stack:
            # A frame refused before tracing (e.g. the recompile limit) has no co_name in metrics.
            comp.co_name = comp.stack[-1].name


def _add_time(comp: Compile, value: float | None) -> None:
    """A compile's time is the sum of what torch timed for it: every compilation_metrics of its id
    (a log may hold one compile id more than once) and its backward's. The one value every view
    shows (explain, cache, cost, report)."""
    if value is not None:
        comp.compile_time_s = (comp.compile_time_s or 0.0) + value


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


class BreaksConsumer:
    TRACE = frozenset({"artifact:dynamo_graph_break_reason"})
    RECORDER = frozenset({"graph_break"})

    def __init__(self) -> None:
        self.breaks: list[GraphBreak] = []
        self.pending_typed: list[dict[str, Any]] = []  # the hook's event comes before torch's text

    def take_trace(self, ev: TraceEvent) -> None:
        parsed = parse_graph_break(ev.payload or "")
        if parsed.not_converted is not None:  # torch's warning, not a break the hook saw
            self.breaks.append(_graph_break(ev, parsed, None))
            return
        typed = self.pending_typed.pop(0) if self.pending_typed else None
        self.breaks.append(_graph_break(ev, parsed, typed))

    def take_recorder(self, event: dict[str, Any]) -> None:
        if "hook_error" not in event:
            self.pending_typed.append(event)

    def finish(self, facts: Facts) -> None:
        facts.graph_breaks = pair_not_converted(self.breaks)


def pair_not_converted(breaks: list[GraphBreak]) -> list[GraphBreak]:
    """A "WON'T CONVERT" record and the backend-failure break torch logs after it for the same
    compile are one failure in the frame torch names: the record takes the break's site (the line
    of that frame torch was compiling), type, explanation and stack, so both are occurrences of one
    site, as torch names one frame. A record with no such break keeps the frame's first line."""
    for i, record in enumerate(breaks):
        if record.not_converted is None:
            continue
        following = next((b for b in breaks[i + 1 :] if b.compile_id == record.compile_id), None)
        if following is None or following.not_converted is not None or not following.user_stack:
            continue
        if (following.user_stack[-1].name, following.file) == (record.not_converted, record.file):
            record.file, record.line = following.file, following.line
            record.gb_type, record.gb_id = following.gb_type, following.gb_id
            record.explanation, record.hints = following.explanation, following.hints
            record.user_stack, record.frame_skipped = following.user_stack, following.frame_skipped
    return breaks


def _graph_break(ev: TraceEvent, parsed: ParsedBreak, typed: dict[str, Any] | None) -> GraphBreak:
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
            if isinstance(f, dict) and not is_recorder_frame(str(f.get("file")))
        ]
        if typed_stack:
            stack = typed_stack
    if parsed.compiled_frame is not None:
        # A backend failure: the user stack ends at the caller of the frame whose graph failed;
        # torch names that frame and the line it was compiling there, where the break is.
        at = parsed.compiled_frame
        compiled = Frame(at["file"], at["line"], at["name"], at["code"])
        if not stack or (stack[-1].file, stack[-1].line) != (compiled.file, compiled.line):
            stack = [*stack, compiled]
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
        not_converted=parsed.not_converted,
    )


class RecompilesConsumer:
    TRACE = frozenset({"artifact:recompile_reasons"})
    RECORDER: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.recompiles: list[Recompile] = []

    def take_trace(self, ev: TraceEvent) -> None:
        payload = ev.payload or ""
        self.recompiles.append(Recompile(ev.compile_id, _recompile_text(payload), payload, ev.frame_id))

    def take_recorder(self, event: dict[str, Any]) -> None:
        pass

    def finish(self, facts: Facts) -> None:
        # Older torch logs carry the reason only in compilation_metrics (CompilesConsumer ran first).
        facts.recompiles = self.recompiles or facts.metrics_recompiles


def _recompile_text(payload: str) -> str:
    try:
        value = json.loads(payload)
    except ValueError:
        return payload.strip()
    if isinstance(value, list):
        return "\n".join(map(str, value))
    return str(value)


class SourcesConsumer:
    TRACE: frozenset[str] = frozenset()
    RECORDER = frozenset({"source"})

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.sha256: dict[str, str] = {}

    def take_trace(self, ev: TraceEvent) -> None:
        pass

    def take_recorder(self, event: dict[str, Any]) -> None:
        file = event.get("file")
        if not isinstance(file, str):
            return
        if isinstance(event.get("text"), str):
            self.texts[file] = event["text"]
        if isinstance(event.get("sha256"), str):
            self.sha256[file] = event["sha256"]

    def finish(self, facts: Facts) -> None:
        facts.sources = Sources(
            texts=self.texts, sha256=self.sha256, live=facts.live, roots=facts.sources_roots
        )


class ExportsConsumer:
    """torch.export / draft_export / AOTInductor calls: the export capture's start and end events
    interleaved with the trace events each call logged (core/views/export.py reads the result)."""

    TRACE = frozenset(
        {"str", "graph_dump", "export", "exported_program", "propagate_real_tensors_provenance"}
        | {"missing_fake_kernel", "mismatched_fake_kernel", "guard_added", "guard_added_fast"}
        | {"create_unbacked_symbol", "symbolic_shape_specialization", "inductor_pre_grad_graph"}
        | {"create_symbol", "describe_source", "compilation_metrics", "guard_on_data_dependent_error"}
        | {"artifact:make_fx_fail_partial"}
        | {"artifact:before_pre_grad_graph", "artifact:after_pre_grad_graph"}
        | {"artifact:inductor_provenance_tracking_node_mappings"}
        | {"artifact:inductor_provenance_tracking_kernel_stack_traces"}
    )
    # run_start: a recording (its exports are the capture's calls, never found by stacks)
    RECORDER = frozenset({"export", "run_start"})

    def __init__(self) -> None:
        self.builder = ExportBuilder()

    def take_trace(self, ev: TraceEvent) -> None:
        self.builder.trace(ev)

    def take_recorder(self, event: dict[str, Any]) -> None:
        self.builder.recorder(event)

    def take_log_file(self) -> None:
        self.builder.log_file()

    def finish(self, facts: Facts) -> None:
        facts.exports = [self.builder.finish(run) for run in self.builder.runs]
        facts.aoti_compiles = self.builder.aoti


# In finishing order: RecompilesConsumer reads what CompilesConsumer found in the metrics.
_MILESTONES = {
    "dynamo_start": "start",
    "artifact:dynamo_graph_break_reason": "break",
    "compilation_metrics": "end",
}


class MilestonesConsumer:
    """Each compile's start, graph-break records and end, in log order (Milestone)."""

    TRACE = frozenset(_MILESTONES)
    RECORDER: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.milestones: list[Milestone] = []

    def take_trace(self, ev: TraceEvent) -> None:
        self.milestones.append(Milestone(_MILESTONES[ev.name], ev.compile_id, ev.rank))

    def take_recorder(self, event: dict[str, Any]) -> None:
        pass

    def finish(self, facts: Facts) -> None:
        facts.milestones = self.milestones


class PreviewConsumer:
    """The preview's events of the one pass (core/model/build.py), typed."""

    TRACE: frozenset[str] = frozenset()
    RECORDER = frozenset(
        {"cuda_preview", "cuda_preview_device", "cuda_preview_decision", "cuda_preview_note"}
    )

    def __init__(self) -> None:
        self.preview = CudaPreview()

    def take_trace(self, ev: TraceEvent) -> None:
        pass

    def take_recorder(self, event: dict[str, Any]) -> None:
        kind = event["kind"]
        if kind == "cuda_preview_device":
            if self.preview.device is None:  # the first, as the capture writes one
                self.preview.device = PreviewDevice(
                    text(event.get("arch")),
                    tuple(event.get("assumptions") or ()),
                    tuple(event.get("notes") or ()),
                )
        elif kind == "cuda_preview":
            devices = event.get("devices")
            ptx = event.get("ptx")
            self.preview.modules.append(
                PreviewModule(
                    compile_id=text(event.get("compile_id")),
                    graph=text(event.get("graph")),
                    arch=text(event.get("arch")),
                    source=text(event.get("source")),
                    ptx=ptx if isinstance(ptx, dict) else {},
                    seconds=event.get("seconds"),
                    devices=tuple(str(d) for d in devices) if isinstance(devices, list) else None,
                    error=text(event.get("error")),
                )
            )
        elif kind == "cuda_preview_decision":
            self.preview.decisions.append(event)
        elif event.get("note"):
            self.preview.notes.append(str(event["note"]))

    def finish(self, facts: Facts) -> None:
        facts.preview = self.preview


CONSUMERS = (
    CompilesConsumer,
    BreaksConsumer,
    RecompilesConsumer,
    SourcesConsumer,
    ExportsConsumer,
    MilestonesConsumer,
    PreviewConsumer,
)
