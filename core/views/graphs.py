"""The graphs view's facts: per compile, Dynamo's graph, AOTAutograd's joint, forward, backward
or inference graph, what the forward saves for the backward (shape, dtype, bytes, whether it
aliases an input) and what the backward recomputes.

Read off the structured trace's graph texts (`dynamo_output_graph`, `aot_*_graph`), so it works
on live runs, saved recordings and TORCH_TRACE logs alike. Pure and torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tcx.core.model import RunModel
from tcx.core.model.graph_texts import GraphTexts
from tcx.core.selection import Selection, whole_run
from tcx.core.torchtext.dtypes import human_bytes
from tcx.core.torchtext.fx_graph import FxNode, op_base, parse_graph_nodes, saved_for_backward
from tcx.core.views.envelope import envelope

SCHEMA = "tcx.graphs/1"

# ATen ops whose output is a view of their first argument (no new memory).
VIEW_OPS = frozenset(
    {
        "view",
        "_unsafe_view",
        "reshape",
        "permute",
        "t",
        "transpose",
        "expand",
        "slice",
        "select",
        "unsqueeze",
        "squeeze",
        "as_strided",
        "alias",
        "detach",
        "unfold",
        "diagonal",
        "narrow",
        "split",
        "split_with_sizes",
        "unbind",
        "view_as",
        "expand_as",
        "movedim",
        "unflatten",
        "flatten",
        "chunk",
        "real",
        "imag",
        "view_as_real",
        "view_as_complex",
    }
)


@dataclass
class Saved:
    name: str
    shape: list[str] | None
    dtype: str | None
    bytes: int | None
    aliases_input: str | None  # the forward input it is a view of (0 extra bytes), or None
    produced_by: str | None
    user_line: dict[str, Any] | None

    @property
    def extra_bytes(self) -> int | None:
        return 0 if self.aliases_input else self.bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": self.shape,
            "dtype": self.dtype,
            "bytes": self.bytes,
            "aliases_input": self.aliases_input is not None,
            "input": self.aliases_input,
            "extra_bytes": self.extra_bytes,
            "produced_by": self.produced_by,
            "user_line": self.user_line,
        }


@dataclass
class CompileGraphs:
    compile_id: str
    graphs: GraphTexts = field(default_factory=GraphTexts)
    partitioner_log: list[str] = field(default_factory=list)
    # (saved, recomputed), worked out from the graphs when first asked for: a view printing
    # many compiles streams each one as soon as it is analysed
    _analysis: tuple[list[Saved], list[dict[str, Any]]] | None = field(default=None, repr=False)

    @property
    def saved(self) -> list[Saved]:
        return self._analyzed()[0]

    @property
    def recomputed(self) -> list[dict[str, Any]]:
        return self._analyzed()[1]

    def _analyzed(self) -> tuple[list[Saved], list[dict[str, Any]]]:
        if self._analysis is None:
            if "forward" in self.graphs and "backward" in self.graphs:
                self._analysis = saved_and_recomputed(self.graphs["forward"], self.graphs["backward"])
            elif "forward" in self.graphs:
                self._analysis = saved_from_forward(self.graphs["forward"]), []
            else:
                self._analysis = [], []
        return self._analysis

    @property
    def training(self) -> bool:
        return "backward" in self.graphs or "forward" in self.graphs

    def verdict(self) -> str:
        if not self.training:
            if "inference" in self.graphs:
                return "inference graph: nothing is saved for a backward"
            return "no AOTAutograd graphs recorded for this compile"
        if "backward" not in self.graphs:
            return "forward graph only (the backward graph was not compiled in this run)"
        tensors = [s for s in self.saved if s.dtype != "SymInt"]
        total = sum(s.bytes or 0 for s in tensors)
        views = sum(s.bytes or 0 for s in tensors if s.aliases_input)
        unknown = any(s.bytes is None for s in tensors)
        text = f"saves {len(tensors)} tensor{'s' if len(tensors) != 1 else ''}, {human_bytes(total)}"
        if unknown:
            text += " (+ symbolic sizes)"
        if views:
            text += f", {human_bytes(views)} of them input views"
        syms = len(self.saved) - len(tensors)
        if syms:
            text += f", {syms} symbolic size{'s' if syms != 1 else ''}"
        if self.recomputed:
            text += "; recomputes " + ", ".join(op_base(r["op"]) or r["name"] for r in self.recomputed)
        else:
            text += "; recomputes nothing"
        return text

    @property
    def saved_bytes(self) -> int:
        return sum(s.bytes or 0 for s in self.saved)

    @property
    def saved_extra_bytes(self) -> int:
        """Bytes the saved values add on top of the inputs (views of an input add none)."""
        return sum(s.extra_bytes or 0 for s in self.saved)

    def to_json(self, include_graphs: bool = True) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "compile_id": self.compile_id,
            "verdict": self.verdict(),
            "saved": [s.to_json() for s in self.saved],
            "saved_bytes": self.saved_bytes,
            "saved_extra_bytes": self.saved_extra_bytes,
            "recomputed": self.recomputed,
            "partitioner_log": self.partitioner_log,
        }
        if include_graphs:
            doc["graphs"] = dict(self.graphs)
        return doc


@dataclass
class GraphsView:
    model: RunModel
    selection: Selection
    compiles: list[CompileGraphs]

    @property
    def compile_count(self) -> int:
        return len(self.compiles)


def build_graphs(model: RunModel, selection: Selection | None = None) -> GraphsView:
    selection = selection or whole_run(model)
    graphs = model.graphs
    compiles = [
        CompileGraphs(cid, texts, list(graphs.partitioner_log.get(cid, [])))
        for cid, texts in graphs.texts.items()
        if selection.includes(cid)
    ]
    return GraphsView(model, selection, compiles)


def saved_and_recomputed(forward: str, backward: str) -> tuple[list[Saved], list[dict[str, Any]]]:
    fw_nodes = parse_graph_nodes(forward)
    bw_nodes = parse_graph_nodes(backward)
    fw = {n.name: n for n in fw_nodes}
    saved = []
    for n in bw_nodes:
        if not n.placeholder or n.name.startswith("tangents"):
            continue
        saved.append(_saved(n, fw))
    fw_computed = {n.name for n in fw_nodes if not n.placeholder}
    recomputed = [
        {"name": n.name, "op": n.op, "user_line": n.user_line}
        for n in bw_nodes
        if not n.placeholder and n.name in fw_computed
    ]
    return saved, recomputed


def saved_from_forward(forward: str) -> list[Saved]:
    """Without a backward graph: the forward outputs marked SavedForBackwards."""
    fw = {n.name: n for n in parse_graph_nodes(forward)}
    return [_saved(fw[n], fw) for n in saved_for_backward(forward) if n in fw]


def _saved(node: FxNode, fw: dict[str, FxNode]) -> Saved:
    ttype = node.type
    src = fw.get(node.name)
    if ttype is None and src is not None:
        ttype = src.type
    return Saved(
        name=node.name,
        shape=ttype.shape if ttype else None,
        dtype=ttype.dtype if ttype else "SymInt",
        bytes=ttype.bytes if ttype else 0,
        aliases_input=_input_alias(node.name, fw),
        produced_by=src.op if src else None,
        user_line=src.user_line if src else None,
    )


def _input_alias(name: str, fw: dict[str, FxNode]) -> str | None:
    seen = set()
    while name in fw and name not in seen:
        seen.add(name)
        node = fw[name]
        if node.placeholder:
            return name
        if op_base(node.op) not in VIEW_OPS or not node.args:
            return None
        name = node.args[0]
    return None


def to_json(view: GraphsView, include_graphs: bool = True) -> dict[str, Any]:
    return {
        **envelope(SCHEMA, view.model, view.selection),
        "compile_count": view.compile_count,
        "compiles": [c.to_json(include_graphs) for c in view.compiles],
    }
