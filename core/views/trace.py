"""The trace view's facts: what Dynamo did instruction by instruction while it traced a frame.

Pure and torch-free. Input: the `trace_instructions` events a live run records when `tcx trace`
asks for the per-instruction capture (one per compile id and attempt), plus the `guards`
events and torch's own compile metrics. TORCH_TRACE logs do not carry the simulated stack,
so for them the view says it needs a live run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tcx.core.analysis.restarts import restarts_by_attempt
from tcx.core.model import RunModel
from tcx.core.model.traced_frames import TracedFrame
from tcx.core.selection import Selection, whole_run
from tcx.core.torchtext.guards import shape_guard_text, tensor_match_text
from tcx.core.views.envelope import envelope

SCHEMA = "tcx.trace/1"
NEEDS_LIVE = (
    "the per-instruction trace needs a live run: Dynamo's simulated stack is not in TORCH_TRACE logs "
    "or in recordings made without it (run `tcx trace SCRIPT` or save one with `tcx trace ... --save`)"
)
_SOURCE_IN_ITEM = re.compile(r"(?:@|lazy \S+ )(?P<src>[LG]\[.*)$")


@dataclass
class TraceCompile:
    """One traced compile attempt as the view shows it: the model's frame (core/model/traced_frames.py)
    with its instructions annotated (nodes, guards, branch decisions, folding) and where it ended."""

    frame: TracedFrame
    instructions: list[dict[str, Any]]  # the frame's, annotated
    graph_break: dict[str, Any] | None = None
    compiled_at: dict[str, Any] | None = None
    error: str | None = None
    restarted: bool = False  # a later attempt of the same compile id exists
    restart_reason: str | None = None  # why torch traced it again (core/analysis/restarts.py)

    @property
    def graph_nodes(self) -> list[str]:
        """Nodes of the output graph, in creation order (final names; erased and subgraph nodes left out)."""
        return [
            n["name"]
            for ins in self.instructions
            for n in ins.get("node_details", [])
            if not n.get("erased") and not n.get("subgraph")
        ]


@dataclass
class TraceView:
    model: RunModel
    selection: Selection
    compiles: list[TraceCompile]
    unavailable: str | None
    total_compiles: int  # traced compiles (attempts included) of the selection


def build_trace(model: RunModel, selection: Selection | None = None) -> TraceView:
    selection = selection or whole_run(model)
    events = model.traced
    reason = None
    if not events:
        reason = model.status.features.why("instructions") or NEEDS_LIVE
    guard_sources = _guard_texts(model)
    compiles = [_compile(e, guard_sources.get(e.compile_id, {})) for e in events]
    seen: dict[str | None, TraceCompile] = {}
    for c in compiles:
        cid = c.frame.compile_id
        if cid in seen and seen[cid].frame.attempt < c.frame.attempt:
            seen[cid].restarted = True
        seen[cid] = c
    if any(c.restarted for c in compiles):
        why = restarts_by_attempt(model)
        for c in compiles:
            restart = why.get((c.frame.compile_id or "", c.frame.attempt)) if c.restarted else None
            c.restart_reason = restart.reason if restart else None
    compiles = [c for c in compiles if selection.includes(c.frame.compile_id)]
    return TraceView(
        model=model, selection=selection, compiles=compiles, unavailable=reason, total_compiles=len(compiles)
    )


def _guard_texts(model: RunModel) -> dict[str | None, dict[str, list[str]]]:
    """compile id -> guard source -> the guard texts Dynamo recorded for it (the model's live guard
    lists)."""
    out: dict[str | None, dict[str, list[str]]] = {}
    for entry in model.guard_sets.live:
        per = out.setdefault(entry.compile_id, {})
        for g in entry.guards:
            per.setdefault(g.source, []).append(f"{g.kind}: {_first(g.text)}")
    return out


def _first(texts: Any) -> str:
    if not texts:
        return ""
    return str(texts[0]).split("  #", 1)[0].strip()


def _compile(event: TracedFrame, guards: dict[str, list[str]]) -> TraceCompile:
    ins_out: list[dict[str, Any]] = []
    graph_break = None
    compiled_at = None
    error = None
    records = event.instructions
    for i, rec in enumerate(records):
        details = list(rec.get("nodes") or [])
        item: dict[str, Any] = {
            "offset": rec.get("offset"),
            "opname": rec.get("opname"),
            "argval": rec.get("argval"),
            "argrepr": rec.get("argrepr"),
            "line": rec.get("line"),
            "depth": rec.get("depth", 0),
            "function": rec.get("function"),
            "file": rec.get("file"),
            "stack": list(rec.get("stack") or []),
            "nodes": [n["name"] for n in details if not n.get("erased")],
            "erased_nodes": [n["name"] for n in details if n.get("erased")],
            "node_details": details,
            "guards": list(rec.get("guards") or []),
            "shape_guards": list(rec.get("shape_guards") or []),
            "decided": None,
            "graph_break": rec.get("graph_break"),
            "compiled": any(n.get("op") == "output" and not n.get("subgraph") for n in details),
            "error": rec.get("exc"),
        }
        branch = rec.get("branch")
        if branch and not item["graph_break"]:
            item["decided"] = _decided(branch, rec, records[:i], guards)
        if item["graph_break"] and graph_break is None:
            graph_break = {
                "offset": item["offset"],
                "opname": item["opname"],
                "line": item["line"],
                "function": item["function"],
                "file": item["file"],
                "reason": item["graph_break"].get("reason"),
                "type": item["graph_break"].get("gb_type"),
            }
        if item["compiled"] and compiled_at is None:
            compiled_at = {"offset": item["offset"], "opname": item["opname"], "line": item["line"]}
        ins_out.append(item)
    for i, item in enumerate(ins_out):
        item["folded"] = _folded(item, ins_out[i + 1] if i + 1 < len(ins_out) else None)
    if records and records[-1].get("exc") and compiled_at is None:
        error = records[-1]["exc"]
    return TraceCompile(
        frame=event, instructions=ins_out, graph_break=graph_break, compiled_at=compiled_at, error=error
    )


def _decided(
    branch: dict[str, Any], rec: dict[str, Any], before: list[dict[str, Any]], guards: dict[str, list[str]]
) -> dict[str, Any]:
    """A jump Dynamo decided while tracing: the value it saw, the way it went, the guard keeping it true."""
    implied = [shape_guard_text(g) for g in rec.get("shape_guards") or []]
    if not implied:
        # A constant condition: it was computed from inputs Dynamo specialized on; their guards keep it true.
        sources: list[str] = []
        for prev in reversed(before):
            if prev.get("function") != rec.get("function") or prev.get("depth") != rec.get("depth"):
                continue
            if prev.get("line") != rec.get("line"):
                break
            for item in prev.get("stack") or []:
                m = _SOURCE_IN_ITEM.search(item)
                if m and m.group("src") not in sources:
                    sources.append(m.group("src"))
        for src in sources:
            texts = [t for t in guards.get(src, []) if t.startswith("TENSOR_MATCH")] or guards.get(src, [])
            texts = [f"{src} {tensor_match_text(t) or t}" for t in texts]
            implied += texts[:1] or [f"guards on {src}"]
    return {
        "condition": branch.get("condition"),
        "jumped": bool(branch.get("jumped")),
        "target": rec.get("argval"),
        "guards": implied,
    }


FOLDABLE = {"COMPARE_OP", "BINARY_OP", "BINARY_SUBSCR", "CONTAINS_OP", "IS_OP", "UNARY_NOT", "LOAD_ATTR"}


def _folded(ins: dict[str, Any], nxt: dict[str, Any] | None) -> str | None:
    """A Python-level operation Dynamo computed while tracing: its result is a constant on the next stack."""
    if ins["opname"] not in FOLDABLE or ins["node_details"] or nxt is None or not nxt.get("stack"):
        return None
    if nxt.get("depth") != ins["depth"] or nxt.get("function") != ins["function"]:
        return None
    top = str(nxt["stack"][-1])
    if top.startswith(("T(", "Sym(", "lazy ", "NULL", "fn ", "module ", "attr ", "builtin ")):
        return None
    return top


def to_json(view: TraceView, limit: int | None = None) -> dict[str, Any]:
    """`limit`: at most this many instructions per compile (None or 0: all); the rest are counted
    in `elided_instructions`."""
    return {
        **envelope(SCHEMA, view.model, view.selection),
        "available": view.unavailable is None,
        "unavailable_reason": view.unavailable,
        "compile_count": view.total_compiles,
        "compiles": [_compile_json(c, limit) for c in view.compiles],
    }


def _compile_json(c: TraceCompile, limit: int | None = None) -> dict[str, Any]:
    shown = c.instructions[:limit] if limit else c.instructions
    keep = (
        "offset",
        "opname",
        "argval",
        "line",
        "depth",
        "function",
        "stack",
        "nodes",
        "erased_nodes",
        "guards",
        "shape_guards",
        "decided",
        "folded",
        "graph_break",
        "compiled",
        "error",
    )
    return {
        "compile_id": c.frame.compile_id,
        "attempt": c.frame.attempt,
        "function": c.frame.function,
        "file": c.frame.file,
        "firstlineno": c.frame.firstlineno,
        "restarted": c.restarted,
        "restart_reason": c.restart_reason,
        "graph_break": c.graph_break,
        "compiled_at": c.compiled_at,
        "error": c.error,
        "elided_instructions": c.frame.elided + len(c.instructions) - len(shown),
        "graph_nodes": c.graph_nodes,
        "instructions": [{k: ins[k] for k in keep} for ins in shown],
    }
