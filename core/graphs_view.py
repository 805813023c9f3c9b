"""The graphs view's facts: per compile, Dynamo's graph, AOTAutograd's joint, forward, backward
or inference graph, what the forward saves for the backward (shape, dtype, bytes, whether it
aliases an input) and what the backward recomputes.

Read off the structured trace's graph texts (`dynamo_output_graph`, `aot_*_graph`), so it works
on live runs, saved recordings and TORCH_TRACE logs alike. Pure and torch-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tcx import __version__
from tcx.core.analysis import RunModel

SCHEMA = "tcx.graphs/1"

GRAPH_EVENTS = {
    "dynamo_output_graph": "dynamo",
    "aot_joint_graph": "joint",
    "aot_forward_graph": "forward",
    "aot_backward_graph": "backward",
    "aot_inference_graph": "inference",
    "artifact:inductor_post_grad_graph": "post_grad",
}
DTYPE_BYTES = {
    "f64": 8,
    "f32": 4,
    "f16": 2,
    "bf16": 2,
    "i64": 8,
    "i32": 4,
    "i16": 2,
    "i8": 1,
    "u8": 1,
    "u16": 2,
    "u32": 4,
    "u64": 8,
    "b8": 1,
    "c64": 8,
    "c128": 16,
    "c32": 4,
    "f8e4m3fn": 1,
    "f8e5m2": 1,
    "f8e4m3fnuz": 1,
    "f8e5m2fnuz": 1,
}
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

_TYPE = re.compile(
    r'"(?P<type>(?P<dtype>[a-z]\w*)\[(?P<shape>[^\]]*)\](?:\[(?P<stride>[^\]]*)\])?(?P<device>[\w:]*)|Sym\([^)]*\))"'
)
_ASSIGN = re.compile(
    r"^\s*(?P<name>[A-Za-z_]\w*)\s*:\s*(?P<ann>\"[^\"]*\"|[\w.\[\], ]+?)"
    r"(?P<rest>\s*=\s*(?P<expr>.*))?,?\s*(?:#.*)?$"
)
_CALL = re.compile(r"^(?:torch\.ops\.)?(?P<op>[\w.]+?)\((?P<args>.*)\)")
_FILE = re.compile(r"#\s*File:\s*(?P<file>.+?):(?P<line>\d+) in (?P<fn>[^,]+), code: (?P<code>.*)$")
_SAVED = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*),\s*#\s*SavedForBackwards")
_WORD = re.compile(r"\b[A-Za-z_]\w*\b")


@dataclass
class TensorType:
    dtype: str
    shape: list[str]
    device: str

    @property
    def bytes(self) -> int | None:
        size = DTYPE_BYTES.get(self.dtype)
        if size is None:
            return None
        n = 1
        for s in self.shape:
            if not s.strip().lstrip("-").isdigit():
                return None
            n *= int(s)
        return n * size


def parse_type(annotation: str) -> TensorType | None:
    m = _TYPE.search(annotation)
    if not m or not m.group("dtype"):
        return None
    shape = [s.strip() for s in (m.group("shape") or "").split(",") if s.strip()]
    return TensorType(m.group("dtype"), shape, m.group("device") or "")


def parse_graph_nodes(text: str) -> list[dict[str, Any]]:
    """Every named value of a printed FX graph: placeholders (signature) and assignments.

    Each: name, type (TensorType or None), op (`aten.mm.default`; None for placeholders),
    args (names used), placeholder (bool), user_line ({file, line, function, code} or None).
    """
    nodes: list[dict[str, Any]] = []
    current_line = None
    for raw in text.splitlines():
        stripped = raw.strip()
        fm = _FILE.search(stripped)
        if fm and stripped.startswith("#"):
            current_line = {
                "file": fm["file"],
                "line": int(fm["line"]),
                "function": fm["fn"].strip(),
                "code": fm["code"].strip(),
            }
            continue
        if stripped.startswith(("def forward", "class ", "return", "#")) or not stripped:
            if stripped.startswith("def forward(") and stripped.endswith("):") and len(stripped) > 14:
                nodes.extend(_signature_nodes(stripped))
            continue
        m = _ASSIGN.match(raw)
        if not m:
            continue
        ann = m.group("ann")
        ttype = parse_type(ann)
        expr = m.group("expr")
        if expr is None:
            nodes.append(_node(m.group("name"), ttype, None, [], True, None))
            continue
        expr = expr.split(";  ")[0].strip()
        call = _CALL.match(expr)
        op = call.group("op") if call else None
        if op and op.endswith(".default"):
            pass
        args = _WORD.findall(call.group("args")) if call else _WORD.findall(expr)
        nodes.append(_node(m.group("name"), ttype, op or expr[:60], args, False, current_line))
    return nodes


def _signature_nodes(line: str) -> list[dict[str, Any]]:
    inner = line[line.index("(") + 1 : -2]
    out = []
    for m in re.finditer(r'(?P<name>[A-Za-z_]\w*)\s*:\s*(?P<ann>"[^"]*")', inner):
        out.append(_node(m.group("name"), parse_type(m.group("ann")), None, [], True, None))
    return out


def _node(name: str, ttype: TensorType | None, op: str | None, args: list[str], ph: bool, line: Any) -> dict:
    return {"name": name, "type": ttype, "op": op, "args": args, "placeholder": ph, "user_line": line}


def op_base(op: str | None) -> str:
    """`aten.permute.default` -> `permute`."""
    if not op:
        return ""
    parts = op.split(".")
    if parts[0] in ("aten", "prims", "torch") and len(parts) >= 2:
        return parts[1]
    return parts[0]


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
    graphs: dict[str, str] = field(default_factory=dict)  # dynamo/joint/forward/backward/inference/post_grad*
    saved: list[Saved] = field(default_factory=list)
    recomputed: list[dict[str, Any]] = field(default_factory=list)
    partitioner_log: list[str] = field(default_factory=list)

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

    def to_json(self, include_graphs: bool = True) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "compile_id": self.compile_id,
            "verdict": self.verdict(),
            "saved": [s.to_json() for s in self.saved],
            "saved_bytes": sum(s.bytes or 0 for s in self.saved),
            "saved_extra_bytes": sum(s.extra_bytes or 0 for s in self.saved),
            "recomputed": self.recomputed,
            "partitioner_log": self.partitioner_log,
        }
        if include_graphs:
            doc["graphs"] = self.graphs
        return doc


def human_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.4g} KiB"
    return f"{n / 1024 / 1024:.4g} MiB"


@dataclass
class GraphsView:
    model: RunModel
    compiles: list[CompileGraphs]


def build_graphs(model: RunModel) -> GraphsView:
    by_id: dict[str, CompileGraphs] = {}
    for ev in model.trace_events:
        kind = GRAPH_EVENTS.get(ev.name)
        if kind is None or not ev.payload:
            continue
        cid = ev.compile_id or "?"
        comp = by_id.setdefault(cid, CompileGraphs(cid))
        if kind == "post_grad":
            kind = "post_grad_backward" if "post_grad_forward" in comp.graphs else "post_grad_forward"
            if "forward" not in comp.graphs and "backward" not in comp.graphs:
                kind = "post_grad_inference"
        comp.graphs.setdefault(kind, ev.payload)
    for ev in getattr(model, "recorder_events", []):
        if ev.get("kind") == "partitioner_log" and ev.get("compile_id") in by_id:
            by_id[ev["compile_id"]].partitioner_log.append(str(ev.get("message", "")))
    for comp in by_id.values():
        if "forward" in comp.graphs and "backward" in comp.graphs:
            comp.saved, comp.recomputed = saved_and_recomputed(
                comp.graphs["forward"], comp.graphs["backward"]
            )
        elif "forward" in comp.graphs:
            comp.saved = saved_from_forward(comp.graphs["forward"])
    return GraphsView(model, list(by_id.values()))


def saved_and_recomputed(forward: str, backward: str) -> tuple[list[Saved], list[dict[str, Any]]]:
    fw_nodes = parse_graph_nodes(forward)
    bw_nodes = parse_graph_nodes(backward)
    fw = {n["name"]: n for n in fw_nodes}
    saved = []
    for n in bw_nodes:
        if not n["placeholder"] or n["name"].startswith("tangents"):
            continue
        saved.append(_saved(n, fw))
    fw_computed = {n["name"] for n in fw_nodes if not n["placeholder"]}
    recomputed = [
        {"name": n["name"], "op": n["op"], "user_line": n["user_line"]}
        for n in bw_nodes
        if not n["placeholder"] and n["name"] in fw_computed
    ]
    return saved, recomputed


def saved_from_forward(forward: str) -> list[Saved]:
    """Without a backward graph: the forward outputs marked SavedForBackwards."""
    fw = {n["name"]: n for n in parse_graph_nodes(forward)}
    names = [m.group("name") for m in map(_SAVED.match, forward.splitlines()) if m]
    return [_saved(fw[n], fw) for n in names if n in fw]


def _saved(node: dict[str, Any], fw: dict[str, dict[str, Any]]) -> Saved:
    ttype: TensorType | None = node["type"]
    src = fw.get(node["name"])
    if ttype is None and src is not None:
        ttype = src["type"]
    aliases = _input_alias(node["name"], fw)
    return Saved(
        name=node["name"],
        shape=ttype.shape if ttype else None,
        dtype=ttype.dtype if ttype else "SymInt",
        bytes=ttype.bytes if ttype else 0,
        aliases_input=aliases,
        produced_by=(src or {}).get("op"),
        user_line=(src or {}).get("user_line"),
    )


def _input_alias(name: str, fw: dict[str, dict[str, Any]]) -> str | None:
    seen = set()
    while name in fw and name not in seen:
        seen.add(name)
        node = fw[name]
        if node["placeholder"]:
            return name
        if op_base(node["op"]) not in VIEW_OPS or not node["args"]:
            return None
        name = node["args"][0]
    return None


def to_json(view: GraphsView, include_graphs: bool = True) -> dict[str, Any]:
    m = view.model
    return {
        "schema": SCHEMA,
        "tcx_version": __version__,
        "torch_version": m.torch_version,
        "compile_count": len(view.compiles),
        "compiles": [c.to_json(include_graphs) for c in view.compiles],
    }
