"""Where a compile's time went: torch's own timers, per compile id and per phase.

torch times every step of a compile with `dynamo_timed` and logs each as a pair of
`chromium_event`s (`ph` "B" then "E", `ts` in µs, the compile id in the record's context).
The steps nest (`dynamo` ⊃ `backend_compile` ⊃ `inductor_compile` ⊃ `code_gen` ⊃
`compile_file`), so each moment is given to the innermost step that names a phase; a step this
table does not know counts as its parent's phase. The totals per frame come from
`compilation_metrics` (`entire_frame_compile_time_s`) and, for a backward compiled on the first
`.backward()`, `bwd_compilation_metrics` (`duration_us`).

Pure and torch-free: live runs, recordings and TORCH_TRACE logs alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tcx.core.model import RunModel
from tcx.core.model.chromium_steps import Step

# Phases in pipeline order: (name, exact step names, step-name prefixes).
PHASES: tuple[tuple[str, frozenset[str], tuple[str, ...]], ...] = (
    (
        "Dynamo",
        frozenset({"dynamo", "entire_frame_compile", "bytecode_tracing", "build_guards", "gc"}),
        ("compile_attempt_", "insert_deferred_runtime_asserts", "OutputGraph."),
    ),
    (
        "AOTAutograd",
        frozenset({"backend_compile", "create_aot_dispatcher_function", "entire_backward_compile"}),
        ("aot_", "_recursive_joint_graph_passes", "pass.joint_graph", "min_cut_rematerialization"),
    ),
    (
        "Inductor lowering",
        frozenset({"inductor_compile", "fx_codegen_and_compile", "additional_fake_tensor_prop"}),
        (
            "compile_fx",
            "GraphLowering.run",
            "Scheduler.",
            "_recursive_pre_grad",
            "_recursive_post_grad",
            "pass.",
        ),
    ),
    (
        "codegen",
        frozenset({"code_gen", "GraphLowering.codegen", "Scheduler.codegen"}),
        ("GraphLowering.compile_to", "PythonWrapperCodegen.", "CppWrapper"),
    ),
    (
        "C++/Triton compile",
        frozenset({"compile_file"}),
        ("async_compile.", "CppCodeCache", "TritonBundler.load"),
    ),
    ("autotuning", frozenset(), ("CachingAutotuner.",)),
    (
        "cache key and lookup",
        frozenset({"inductor_codecache_torch_key"}),
        (
            "CacheBase.get_system",
            "AOTAutogradCache.",
            "FxGraphCache.",
            "TritonBundler.read",
            "TritonBundler.collect",
        ),
    ),
    ("load compiled code", frozenset({"PyCodeCache.load_by_key_path"}), ()),
)
PHASE_NAMES = tuple(name for name, _, _ in PHASES)
_AUTOTUNE_SUFFIXES = ("_template_autotuning", "_template_precompiling")


def phase_of(step: str) -> str | None:
    """The phase a `dynamo_timed` step belongs to; None for a step this table does not know."""
    if step.endswith(_AUTOTUNE_SUFFIXES):
        return "autotuning"
    # "pass.joint_graph…" is AOTAutograd's, the other "pass.…" Inductor's: the more specific first.
    best: tuple[int, str] | None = None
    for name, exact, prefixes in PHASES:
        if step in exact:
            return name
        for prefix in prefixes:
            if step.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), name)
    return best[1] if best else None


@dataclass
class CompileTime:
    """One compile id's time in one run."""

    compile_id: str
    seconds: float | None  # torch's total: compilation_metrics (+ the backward's)
    phases: dict[str, float] = field(default_factory=dict)  # phase -> seconds, from the steps
    graph_compiles: list[dict[str, Any]] = field(default_factory=list)  # each `inductor_compile` step

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "seconds": None if self.seconds is None else round(self.seconds, 3),
            "phases": {k: round(v, 4) for k, v in self.phases.items()},
        }


def compile_times(model: RunModel) -> dict[str, CompileTime]:
    """compile id -> its time, for every compile id torch timed or measured in this run."""
    out: dict[str, CompileTime] = {}
    for cid, comp in model.compiles.items():  # the model's one value (core/model/consumers.py)
        if comp.compile_time_s is not None or comp.metrics:
            out[cid] = CompileTime(cid, comp.compile_time_s)
    for cid, events in model.chromium_steps().items():
        entry = out.setdefault(cid, CompileTime(cid, None))
        entry.phases, entry.graph_compiles = _attribute(events)
    return out


def _attribute(steps: list[Step]) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Self time per phase: each interval between two step boundaries goes to the innermost open
    step that has a phase. Also every finished `inductor_compile` (one graph through Inductor),
    with its duration and the cache state torch attached to it."""
    phases: dict[str, float] = {}
    graphs: list[dict[str, Any]] = []
    stack: list[tuple[str, float, str | None]] = []  # (step, start µs, phase)
    last: float | None = None
    for step in sorted(steps, key=lambda s: s.ts):
        ts = step.ts
        if last is not None and stack:
            phase = next((p for _, _, p in reversed(stack) if p), None) or "other"
            phases[phase] = phases.get(phase, 0.0) + max(0.0, ts - last) / 1e6
        last = ts
        name = step.name
        if step.ph == "B":
            stack.append((name, ts, phase_of(name)))
            continue
        for i in range(len(stack) - 1, -1, -1):
            if stack[i][0] == name:
                if name == "inductor_compile":
                    graphs.append(
                        {
                            "seconds": (ts - stack[i][1]) / 1e6,
                            "cache_state": step.cache_state,
                            "is_backward": step.is_backward,
                        }
                    )
                del stack[i:]
                break
    ordered = {name: phases[name] for name in (*PHASE_NAMES, "other") if name in phases}
    return ordered, graphs
