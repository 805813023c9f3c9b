"""Printed FX graphs: `dynamo_output_graph`, AOTAutograd's joint/forward/backward/inference graphs
and Inductor's post-grad graph, as torch writes them to the structured trace.

    def forward(self, primals_1: "f32[128, 32][32, 1]cpu", ...):
         # File: /p/seed_f.py:12 in f, code: y = x @ weight + bias
        mm: "f32[128, 64][64, 1]cpu" = torch.ops.aten.mm.default(primals_1, primals_2)
        return (relu, primals_1, le)  # with `# SavedForBackwards` markers in some versions

Each value is `NAME: "DTYPE[SHAPE][STRIDE]DEVICE" = OP(ARGS)`, a `Sym(...)` annotation for a
symbolic int, and the `# File:` comment above a node names the user line it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tcx.core.torchtext import dtypes
from tcx.core.torchtext.locations import fx_node_location

_TYPE = re.compile(
    r'"(?P<type>(?P<dtype>[a-z]\w*)\[(?P<shape>[^\]]*)\](?:\[(?P<stride>[^\]]*)\])?(?P<device>[\w:]*)|Sym\([^)]*\))"'
)
_ASSIGN = re.compile(
    r"^\s*(?P<name>[A-Za-z_]\w*)\s*:\s*(?P<ann>\"[^\"]*\"|[\w.\[\], ]+?)"
    r"(?P<rest>\s*=\s*(?P<expr>.*))?,?\s*(?:#.*)?$"
)
_CALL = re.compile(r"^(?:torch\.ops\.)?(?P<op>[\w.]+?)\((?P<args>.*)\)")
_PARAM = re.compile(r'\b(?P<name>[A-Za-z_]\w*)\s*:\s*(?P<ann>"[^"]*")')  # \b: linear on a long word
_SAVED = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*),\s*#\s*SavedForBackwards")
_WORD = re.compile(r"\b[A-Za-z_]\w*\b")


@dataclass
class TensorType:
    """`f32[128, 32][32, 1]cpu` -> dtype f32, shape ["128", "32"], device cpu."""

    dtype: str
    shape: list[str]
    device: str

    @property
    def bytes(self) -> int | None:
        return dtypes.nbytes(self.shape, self.dtype)


@dataclass
class FxNode:
    """One named value of a printed graph: a placeholder (signature) or an assignment."""

    name: str
    annotation: str  # the type as printed, `"f32[128, 32][32, 1]cpu"` (read when asked: `type`)
    op: str | None  # `aten.mm.default` (None for placeholders)
    args: list[str] = field(default_factory=list)  # names the expression uses
    placeholder: bool = False
    user_line: dict[str, Any] | None = None  # {file, line, function, code} of the `# File:` above

    @cached_property
    def type(self) -> TensorType | None:
        return parse_type(self.annotation)


def parse_type(annotation: str) -> TensorType | None:
    m = _TYPE.search(annotation)
    if not m or not m.group("dtype"):
        return None
    shape = [s.strip() for s in (m.group("shape") or "").split(",") if s.strip()]
    return TensorType(m.group("dtype"), shape, m.group("device") or "")


def parse_graph_nodes(text: str) -> list[FxNode]:
    """Every named value of a printed FX graph, in order (signature first)."""
    nodes: list[FxNode] = []
    current_line = None
    for raw in text.splitlines():
        stripped = raw.strip()
        loc = fx_node_location(stripped)
        if loc is not None:
            current_line = loc.to_json()
            continue
        if stripped.startswith(("def forward", "class ", "return", "#")) or not stripped:
            if stripped.startswith("def forward(") and stripped.endswith("):") and len(stripped) > 14:
                nodes.extend(_signature_nodes(stripped))
            continue
        m = _ASSIGN.match(raw)
        if not m:
            continue
        ann = m.group("ann")
        expr = m.group("expr")
        if expr is None:
            nodes.append(FxNode(m.group("name"), ann, None, placeholder=True))
            continue
        expr = expr.split(";  ")[0].strip()
        call = _CALL.match(expr)
        op = call.group("op") if call else None
        args = _WORD.findall(call.group("args")) if call else _WORD.findall(expr)
        nodes.append(FxNode(m.group("name"), ann, op or expr[:60], args, False, current_line))
    return nodes


def _signature_nodes(line: str) -> list[FxNode]:
    inner = line[line.index("(") + 1 : -2]
    return [FxNode(m.group("name"), m.group("ann"), None, placeholder=True) for m in _PARAM.finditer(inner)]


def saved_for_backward(forward: str) -> list[str]:
    """Names a forward graph marks `# SavedForBackwards` in its return (torch versions that mark them)."""
    return [m.group("name") for m in map(_SAVED.match, forward.splitlines()) if m]


def op_base(op: str | None) -> str:
    """`aten.permute.default` -> `permute`."""
    if not op:
        return ""
    parts = op.split(".")
    if parts[0] in ("aten", "prims", "torch") and len(parts) >= 2:
        return parts[1]
    return parts[0]
