"""The run model: facts built once from a recording or a log, read by every view.

facts.py (compiles, breaks, recompiles, sources), run.py (RunModel, Documents, Captures),
status.py (how the run went), conditions.py (backend and caches), failure.py (what failed and
where), consumers.py and build.py (the one pass that makes them), exports.py with
export_issues.py and aoti_provenance.py (torch.export and AOTInductor runs), ranks.py (one model
per rank of a multi-rank input), guard_sets.py (each compile's guards: live lists or torch's trees,
one parser for the guards, recompiles and ranks views), generated_code.py (Inductor's modules per
compile with their provenance: the kernels listed once for every count), cache_lookups.py (each
compile-cache lookup, its payload parsed once), graph_texts.py (each compile's graphs by stage),
fusion_decisions.py (Inductor's fusion decisions per scheduled graph), bytecode_pairs.py (each
compiled frame's original and transformed bytecode), cudagraph_decisions.py (CUDA-graph decisions
per graph), rank_facts.py (what ranks compare: per compile, and how far each rank logged),
traced_frames.py (the instructions Dynamo traced per compile attempt), process.py (the child process
a recording is of), numerics_captures.py (what a `tcx numerics` run recorded),
attempt_logs.py (what each compile attempt logged of why torch traced again), chromium_steps.py
(the steps torch timed per compile), shape_facts.py (what the shape environment logged: symbols,
specializations, sizes marked dynamic), promotions.py (sizes made symbolic on a recompile),
call_captures.py (the recompiles capture's per-call records), call_records.py (each call of a compiled
frame and its failed guards, typed), cost_capture.py (what `tcx cost`
recorded), payload_sizes.py (a payload's size without reading it).
The counts a budget can limit live in core/budgets.py, below the model, so `tcx --help` declares
`tcx check`'s options without importing it.

May import (tests/test_structure.py holds it): core/torchtext, core/ingest and core's top-level
basics. It and the readers (core/ingest) alone read raw events: they are private here
(`_documents`, `_captures`, `_recording`, `_run_start`, `_program_exit`...), and `tcx show --events`
reads them through one handle, RunModel.raw_trace_events().
"""

from tcx.core.model.build import KNOWN_EVENTS, build_model
from tcx.core.model.facts import Compile, Frame, GraphBreak, Recompile, Sources, resume_target
from tcx.core.model.run import RunModel

__all__ = [
    "KNOWN_EVENTS",
    "Compile",
    "Frame",
    "GraphBreak",
    "Recompile",
    "RunModel",
    "Sources",
    "build_model",
    "resume_target",
]
