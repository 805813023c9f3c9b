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

from tcx.core.model import RunModel
from tcx.core.model.fusion_decisions import FusionGraph
from tcx.core.model.payload_sizes import PayloadSize
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
    for size in model.payload_sizes(*names) if names else ():
        if selection.includes(size.compile_id):
            lines += payload_lines(size)
    for compile_id, n in _recorded_lengths(view, model):
        if selection.includes(compile_id):
            lines += min(n, TRACE_TEXT_LIMIT) if view == "trace" else n
    return lines


def _recorded_lengths(view: str, model: RunModel) -> list[tuple[str | None, int]]:
    """What a live run recorded for `view` that grows with the compile: (compile id, its lines)."""
    if view == "trace":
        return [(t.compile_id, len(t.instructions)) for t in model.traced]
    if view == "guards":
        return [(g.compile_id, len(g.guards)) for g in model.guard_sets.live]
    if view == "bytecode":
        return [(b.compile_id, len(b.transformed)) for b in model.live_bytecode]
    if view == "fusion":
        return [(f.compile_id, fusion_lines(f)) for f in model.fusion]
    return []


def fusion_lines(graph: FusionGraph) -> int:
    """About how many lines `tcx fusion` prints for one graph: a node's line or two and one per line
    of the user's that made it, a line per group and per reason a pair was not fused."""
    nodes = graph.nodes
    made_by = sum(len(n.get("user_lines") or []) for n in nodes if isinstance(n, dict))
    reasons = {d.get("reason") for d in graph.decisions if isinstance(d, dict)}
    return 2 * len(nodes) + made_by + len(graph.groups) + len(reasons)


def payload_lines(size: PayloadSize) -> int:
    """About how many lines the payload has, from its size alone (a lazy payload stays on disk)."""
    if size.lines is not None:
        return size.lines
    if size.compressed_bytes:
        return size.compressed_bytes * PACKED_RATIO // BYTES_PER_LINE
    return size.disk_bytes // BYTES_PER_LINE


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
