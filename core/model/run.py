"""The run model: every fact the views read, built once from a recording or a log (build.py).

Views read facts, never the recording: compiles, graph breaks and recompiles as typed objects, and
the fact families (guard sets, generated code, graphs, cache lookups, per-call records...) built
from the rest when first asked. The raw events stay here, private: the payloads torch logged in
`Documents` (indexed by kind, each read from disk only when asked for), the recorder's captures in
`Captures` (by kind), and the raw-dict properties over them (`_run_start`, `_program_exit`...).
`tcx show --events` prints them raw through the one handle, `raw_trace_events()`.
"""

from __future__ import annotations

import fnmatch
import functools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tcx.core.ingest.trace_events import Interner, TraceEvent
from tcx.core.model.aoti_provenance import AotiCompile
from tcx.core.model.attempt_logs import ATTEMPT_EVENTS, AttemptLog, read_attempt_logs
from tcx.core.model.bytecode_pairs import BYTECODE_ARTIFACTS, BytecodePair, live_pairs, read_bytecode_pairs
from tcx.core.model.cache_lookups import (
    CACHE_ARTIFACTS,
    CacheLookup,
    CacheMetrics,
    read_cache_lookups,
    read_cache_metrics,
)
from tcx.core.model.call_captures import CALL_KINDS, CallCaptures, read_call_captures
from tcx.core.model.chromium_steps import STEP_EVENT, Step, read_steps
from tcx.core.model.cost_capture import COST_EVENTS, RUN_END, CostCapture
from tcx.core.model.cudagraph_decisions import Cudagraphs, read_cudagraphs
from tcx.core.model.exports import ExportRun
from tcx.core.model.facts import Compile, GraphBreak, Milestone, Recompile, Sources
from tcx.core.model.fusion_decisions import FusionGraph, read_fusion
from tcx.core.model.generated_code import PROVENANCE, GeneratedCode
from tcx.core.model.graph_texts import GRAPH_EVENTS, Graphs, read_graphs
from tcx.core.model.guard_sets import GuardSets, build_guard_sets
from tcx.core.model.numerics_captures import NumericsCaptures, read_numerics
from tcx.core.model.payload_sizes import PayloadSize, payload_size
from tcx.core.model.preview import CudaPreview
from tcx.core.model.process import ChildIdentity, child_identity
from tcx.core.model.promotions import PROMOTION_EVENTS, Promotion, read_promotions
from tcx.core.model.rank_facts import (
    COMPARED,
    CompileTraces,
    RankProgress,
    rank_progress,
    read_compile_traces,
)
from tcx.core.model.shape_facts import (
    DESCRIBE_EVENTS,
    SHAPE_EVENTS,
    CompileShapes,
    Dim,
    read_marked_dynamic,
    read_shape_facts,
)
from tcx.core.model.traced_frames import TracedFrame, read_traced_frames

if TYPE_CHECKING:
    from tcx.core.ingest.recording import Recording
    from tcx.core.model.status import RunStatus

# The kinds of payload the views read (Documents.of refuses others: a view that needs a new kind
# declares it here, so the schema of what tcx understands is this list and the consumers').
DOCUMENT_KINDS = frozenset(
    {
        "dynamo_output_graph",
        "dynamo_cpp_guards_str",
        "dynamo_guards",
        "aot_joint_graph",
        "aot_forward_graph",
        "aot_backward_graph",
        "aot_inference_graph",
        "inductor_pre_grad_graph",
        "inductor_post_grad_graph",
        "inductor_output_code",
        "compilation_metrics",
        "bwd_compilation_metrics",
        "chromium_event",
        "describe_storage",
        "describe_tensor",
        "describe_source",
        "create_symbol",
        "guard_added",
        "guard_added_fast",
        "propagate_real_tensors",
        "expression_created",
        "symbolic_shape_specialization",
        "missing_fake_kernel",
        "mismatched_fake_kernel",
        "exported_program",
        "dynamo_start",
        "artifact",  # every `artifact:NAME` (cache lookups, provenance, bytecode, export reports...)
    }
)


class Documents:
    """The structured-trace events of a run, in order and indexed by name (`artifact:NAME` for an
    artifact). Each is a TraceEvent whose payload is read when asked for."""

    def __init__(self) -> None:
        self._all: list[TraceEvent] = []
        self._by_name: dict[str, list[TraceEvent]] = {}

    def add(self, ev: TraceEvent) -> None:
        self._all.append(ev)
        self._by_name.setdefault(ev.name, []).append(ev)

    def of(self, *kinds: str) -> list[TraceEvent]:
        """The events of these kinds, in run order. A kind may be a pattern (`*` for any text):
        "artifact:fx_graph_cache_*" takes every such artifact, "artifact:*_BYTECODE" too."""
        for kind in kinds:
            if kind.split(":", 1)[0] not in DOCUMENT_KINDS:
                raise KeyError(f"{kind!r} is not a declared document kind (core/model/run.py)")
        names = {n for kind in kinds for n in self._names(kind)}
        if len(names) == 1:
            return list(self._by_name[names.pop()])
        return [ev for ev in self._all if ev.name in names] if names else []

    def _names(self, kind: str) -> list[str]:
        if "*" not in kind:
            return [kind] if kind in self._by_name else []
        return [name for name in self._by_name if fnmatch.fnmatchcase(name, kind)]

    def census(self) -> Counter[str]:
        """How many events of each name (`tcx show --events`)."""
        return Counter({name: len(evs) for name, evs in self._by_name.items()})

    def named(self, name: str) -> list[TraceEvent]:
        """Events of any name, declared or not: for `tcx show --event NAME`, which prints them raw."""
        return list(self._by_name.get(name, ()))

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)


class Captures:
    """The recorder's own events (everything but torch's trace), by kind, in recording order."""

    def __init__(self) -> None:
        self._by_kind: dict[str, list[dict[str, Any]]] = {}

    def add(self, event: dict[str, Any]) -> None:
        self._by_kind.setdefault(event["kind"], []).append(event)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return self._by_kind.get(kind, [])

    def first(self, kind: str) -> dict[str, Any] | None:
        found = self._by_kind.get(kind)
        return found[0] if found else None


@dataclass
class RunModel:
    """Everything the views need, derived from one recording or log."""

    source_kind: str  # "live", "recording" or "trace"
    source: str
    target: str
    header: dict[str, Any]
    compiles: dict[str, Compile]
    graph_breaks: list[GraphBreak]
    graph_count: int
    recompiles: list[Recompile]
    sources: Sources
    unknown_events: Counter[str]
    problems: list[str]
    # The raw events, private to core/model (tests/test_structure.py): views read the facts below;
    # `tcx show --events` reads them through `raw_trace_events()`.
    _documents: Documents
    _captures: Captures
    # file names torch's stacks name by index (its `str` events), for the whole run
    interner: Interner = field(default_factory=Interner)
    exports: list[ExportRun] = field(default_factory=list)  # torch.export / draft_export calls
    aoti_compiles: list[AotiCompile] = field(default_factory=list)  # AOTInductor packages
    milestones: list[Milestone] = field(default_factory=list)  # compiles' starts, breaks, ends in log order
    preview: CudaPreview = field(default_factory=CudaPreview)  # a CUDA preview's device, modules, decisions
    ranks: list[int] = field(default_factory=list)
    # The loaded input: only a multi-rank input's per-rank models are built from it again
    # (core/model/ranks.py); views read the facts above.
    _recording: Recording | None = None

    def raw_trace_events(self) -> Documents:
        """The structured-trace events themselves, for `tcx show --events / --event NAME`
        (renderers/raw_events.py), which prints them raw on purpose: the one handle outside the
        model (tests/test_structure.py allows it there alone)."""
        return self._documents

    @property
    def _run_start(self) -> dict[str, Any] | None:
        return self._captures.first("run_start")

    @property
    def _program_exit(self) -> dict[str, Any] | None:
        return self._captures.first("program_exit")

    @property
    def _outcome(self) -> dict[str, Any] | None:
        return self._captures.first("outcome")

    @property
    def _compile_calls(self) -> list[dict[str, Any]]:
        return self._captures.of("compile_call")

    @property
    def _calls(self) -> list[dict[str, Any]]:
        return self._captures.of("call")

    @property
    def _logs(self) -> list[dict[str, Any]]:
        return self._captures.of("log")

    @functools.cached_property
    def guard_sets(self) -> GuardSets:
        """Each compile's guards (core/model/guard_sets.py): made when first asked, trees parsed lazily."""
        return build_guard_sets(
            self._documents.of("dynamo_cpp_guards_str"),
            self._captures.of("guards"),
            self._captures.of("cache_entries"),
        )

    @functools.cached_property
    def generated_code(self) -> GeneratedCode:
        """Inductor's output-code modules with their provenance (core/model/generated_code.py)."""
        return GeneratedCode(self._documents.of("inductor_output_code", PROVENANCE))

    @functools.cached_property
    def cache_lookups(self) -> list[CacheLookup]:
        """Each compile-cache lookup torch logged, its payload parsed once (core/model/cache_lookups.py)."""
        return read_cache_lookups(self._documents.of(*CACHE_ARTIFACTS))

    @functools.cached_property
    def graphs(self) -> Graphs:
        """Each compile's graphs by stage, their texts read when asked (core/model/graph_texts.py)."""
        return read_graphs(self._documents.of(*GRAPH_EVENTS), self._captures.of("partitioner_log"))

    @functools.cached_property
    def fusion(self) -> list[FusionGraph]:
        """Inductor's fusion decisions per scheduled graph (core/model/fusion_decisions.py)."""
        return read_fusion(self._captures.of("fusion"))

    @functools.cached_property
    def bytecode(self) -> list[BytecodePair]:
        """Each compiled frame's original and transformed bytecode (core/model/bytecode_pairs.py)."""
        return read_bytecode_pairs(self.live_bytecode, self._documents.of(BYTECODE_ARTIFACTS), self.compiles)

    @functools.cached_property
    def live_bytecode(self) -> list[BytecodePair]:
        """A live run's bytecode pairs alone, as recorded (nothing parsed from the log's artifacts)."""
        return live_pairs(self._captures.of("bytecode"))

    @functools.cached_property
    def cudagraphs(self) -> Cudagraphs:
        """CUDA-graph decisions per graph (core/model/cudagraph_decisions.py)."""
        return read_cudagraphs(self._captures.of("cudagraph"))

    @functools.cached_property
    def cache_metrics(self) -> list[CacheMetrics]:
        """What torch's compilation_metrics say of the caches, per record (core/model/cache_lookups.py)."""
        return read_cache_metrics(self._documents.of("compilation_metrics"))

    @functools.cached_property
    def compile_traces(self) -> dict[str, CompileTraces]:
        """Per compile id, the logged facts ranks compare (core/model/rank_facts.py)."""
        return read_compile_traces(self._documents.of(*COMPARED))

    def rank_progress(self, rank: int) -> RankProgress:
        """How far `rank` logged in this (its own) model (core/model/rank_facts.py)."""
        return rank_progress(self._documents, rank)

    @functools.cached_property
    def traced(self) -> list[TracedFrame]:
        """Each compile attempt's traced instructions (core/model/traced_frames.py)."""
        return read_traced_frames(self._captures.of("trace_instructions"))

    @property
    def child(self) -> ChildIdentity:
        """The child process this recording is of, as its header says (core/model/process.py)."""
        return child_identity(self.header.get("child"))

    @functools.cached_property
    def numerics(self) -> NumericsCaptures:
        """What a `tcx numerics` run recorded (core/model/numerics_captures.py)."""
        captures = self._captures
        return read_numerics(
            captures.first("numerics_config"),
            captures.of("numerics_probe"),
            captures.first("numerics_report"),
        )

    def chromium_steps(self) -> dict[str, list[Step]]:
        """The steps torch timed per compile (core/model/chromium_steps.py): read when asked, not
        kept (a large log has ~10^6 of them)."""
        return read_steps(self._documents.of(STEP_EVENT))

    @functools.cached_property
    def shapes(self) -> dict[str, CompileShapes]:
        """What each compile's shape environment logged (core/model/shape_facts.py)."""
        return read_shape_facts(self._documents.of(*SHAPE_EVENTS), self.interner)

    def marked_dynamic(self, compile_id: str) -> set[Dim]:
        """The sizes the program marked dynamic for one compile (core/model/shape_facts.py): read
        when asked, one compile at a time (a large log keeps these records on disk)."""
        return read_marked_dynamic(self._documents.of(*DESCRIBE_EVENTS), compile_id)

    def promotions(self) -> dict[str, list[Promotion]]:
        """Sizes made symbolic per compile (core/model/promotions.py): new objects on each call (the
        recompiles view attaches what each replaced)."""
        return read_promotions(self._documents.of(*PROMOTION_EVENTS))

    @functools.cached_property
    def call_captures(self) -> CallCaptures:
        """The recompiles capture's per-call records (core/model/call_captures.py)."""
        return read_call_captures(*(self._captures.of(kind) for kind in CALL_KINDS))

    @functools.cached_property
    def cost_capture(self) -> CostCapture:
        """The cost capture's records (core/model/cost_capture.py)."""
        return CostCapture({kind: self._captures.of(kind) for kind in (*COST_EVENTS, RUN_END)})

    def payload_sizes(self, *kinds: str) -> list[PayloadSize]:
        """Each payload of these document kinds, sized from its reference alone (nothing is parsed
        or read from disk): what the index a big run prints first estimates its views from."""
        return [payload_size(ev) for ev in self._documents.of(*kinds)]

    @functools.cached_property
    def attempt_logs(self) -> dict[tuple[str, int], AttemptLog]:
        """What each compile attempt logged of why torch traced again (core/model/attempt_logs.py)."""
        return read_attempt_logs(self._documents.of(*ATTEMPT_EVENTS))

    @functools.cached_property
    def status(self) -> RunStatus:
        """How the run went and under what conditions: computed once (core/model/status.py)."""
        from tcx.core.model.status import run_status

        return run_status(self)

    @property
    def torch_version(self) -> str | None:
        if self._run_start:
            return self._run_start.get("torch_version")
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
