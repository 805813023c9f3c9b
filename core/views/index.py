"""Summary first on big runs: one row per compile id, and the command that drills into it.

A per-compile view (codegen, graphs, guards, trace, bytecode, fusion) that would print more
than INDEX_ABOVE_LINES lines about several compiles, asked with no selector, prints this index
instead; `--all` prints everything. The size is estimated from what the view would print (the
payloads it shows, read as sizes only: nothing is parsed or read from disk for it).

Pure and torch-free.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from tcx.core.ingest.trace_events import TraceEvent
from tcx.core.model import RunModel
from tcx.core.selection import Selection
from tcx.core.selectors import rank_of

INDEX_ABOVE_LINES = 400  # about eight screens
INDEX_MIN_COMPILES = 3  # an index of one or two rows says nothing the view would not
BYTES_PER_LINE = 40  # generated code and graph text, on average
PACKED_RATIO = 4  # zlib (level 1) shrinks graphs and code at least this much
# The views the index stands in for, and the payloads (trace events) each prints.
SHOWN_EVENTS: dict[str, tuple[str, ...]] = {
    "codegen": ("inductor_output_code",),
    "graphs": ("dynamo_output_graph", "aot_forward_graph", "aot_backward_graph", "aot_inference_graph"),
    "guards": ("dynamo_cpp_guards_str",),
    "bytecode": ("artifact:*_BYTECODE",),  # *_ORIGINAL_BYTECODE / *_MODIFIED_BYTECODE
    "fusion": (),
    "trace": (),
}
LINES_PER_COMPILE = 12  # titles, tables and notes around the payloads
# Recorder events (live runs) a view prints, and their list that grows with the compile.
SHOWN_RECORDER = {"trace": ("trace_instructions", "instructions"), "guards": ("guards", "guards"),
                  "bytecode": ("bytecode", "transformed"), "fusion": ("fusion", "nodes")}  # fmt: skip
TRACE_TEXT_LIMIT = 400  # `tcx trace` prints at most this many instructions per compile


@dataclass
class IndexRow:
    compile_id: str
    function: str
    graphs: int
    breaks: int
    kernels: int | None  # None: no Inductor output code for this compile
    compile_time_s: float | None
    failed: bool
    command: str

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def wants_index(view: str, model: RunModel, selection: Selection) -> bool:
    """Would `view` print more than a few screens about several compiles?"""
    if view not in SHOWN_EVENTS or len(selection.compile_ids) < INDEX_MIN_COMPILES:
        return False
    return estimated_lines(view, model, selection) > INDEX_ABOVE_LINES


def estimated_lines(view: str, model: RunModel, selection: Selection) -> int:
    names = SHOWN_EVENTS.get(view, ())
    lines = LINES_PER_COMPILE * len(selection.compile_ids)
    for ev in model.documents.of(*names) if names else ():
        if selection.includes(ev.compile_id):
            lines += payload_lines(ev)
    kind, field = SHOWN_RECORDER.get(view, ("", ""))
    for e in model.captures.of(kind) if kind else ():
        if selection.includes(e.get("compile_id")):
            n = len(e.get(field) or [])
            if view == "trace":
                lines += min(n, TRACE_TEXT_LIMIT)
            elif view == "fusion":
                lines += fusion_lines(e)
            else:
                lines += n
    return lines


def fusion_lines(event: dict[str, Any]) -> int:
    """About how many lines `tcx fusion` prints for one graph: a node's line or two and one per line
    of the user's that made it, a line per group and per reason a pair was not fused."""
    nodes = event.get("nodes") or []
    made_by = sum(len(n.get("user_lines") or []) for n in nodes if isinstance(n, dict))
    reasons = {d.get("reason") for d in event.get("decisions") or [] if isinstance(d, dict)}
    return 2 * len(nodes) + made_by + len(event.get("groups") or []) + len(reasons)


def payload_lines(ev: TraceEvent) -> int:
    """About how many lines the payload has, from its size alone (a lazy payload stays on disk)."""
    packed = ev.packed
    if packed is None:
        return 0
    if isinstance(packed, str):
        return packed.count("\n") + 1
    if isinstance(packed, bytes):
        return len(packed) * PACKED_RATIO // BYTES_PER_LINE
    return len(packed) // BYTES_PER_LINE


def index_rows(model: RunModel, selection: Selection, view: str, target: str) -> list[IndexRow]:
    breaks: dict[str | None, int] = {}
    for b in model.graph_breaks:
        breaks[b.compile_id] = breaks.get(b.compile_id, 0) + 1
    kernels = kernel_counts(model, selection)
    rows = []
    for cid in selection.compile_ids:
        comp = model.compiles.get(cid)
        rows.append(
            IndexRow(
                compile_id=cid,
                function=comp.display_name if comp and comp.co_name else "?",
                graphs=comp.graph_count if comp else 0,
                breaks=breaks.get(cid, 0),
                kernels=kernels.get(cid),
                compile_time_s=comp.compile_time_s if comp else None,
                failed=bool(comp and comp.failed),
                command=drill_command(view, target, cid, model),
            )
        )
    return rows


def kernel_counts(model: RunModel, selection: Selection) -> dict[str, int]:
    """Kernels Inductor generated per compile id (only compiles with output code)."""
    return {cid: n for cid, n in model.generated_code.kernel_counts().items() if selection.includes(cid)}


def drill_command(view: str, target: str, compile_id: str, model: RunModel) -> str:
    """`tcx VIEW TARGET --compile ID` (with `--rank N` for a compile of a multi-rank input)."""
    rank = rank_of(compile_id, model) if len(model.ranks) > 1 else None
    local = compile_id.split(":", 1)[1] if rank is not None else compile_id
    where = f" --rank {rank}" if rank is not None else ""
    return f"tcx {view} {shlex.quote(target)}{where} --compile {local}"
