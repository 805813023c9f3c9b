"""torch.export's text: a printed ExportedProgram (`str(ep)`, the `exported_program` trace event)
and the symbolic expressions its guards are written in.

    ExportedProgram:
        class GraphModule(torch.nn.Module):
            def forward(self, p_lin_weight: "f32[4, 3]", x: "f32[s77, 3]", n):
                ...
                return (add, sum_1)

    Graph signature:
        # inputs
        p_lin_weight: PARAMETER target='lin.weight'
        b_tmp: BUFFER target='tmp' persistent=False
        x: USER_INPUT
        # outputs
        add: USER_OUTPUT
    Range constraints: {s77: VR[0, 64]}

Before torch 2.6 the signature was printed as its dataclass repr
(`ExportGraphSignature(input_specs=[InputSpec(kind=<InputKind.USER_INPUT: 1>, arg=TensorArgument(name='a'),
target=None, persistent=None)], output_specs=[...])`); both are read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tcx.core.torchtext.commas import split_top_level
from tcx.core.torchtext.fx_graph import parse_graph_nodes, parse_type

_SIGNATURE_LINE = re.compile(
    r"^\s*(?P<name>[A-Za-z_]\w*): (?P<kind>[A-Z_]+)(?: target=(?P<target>'[^']*'|\S+))?"
    r"(?: persistent=(?P<persistent>True|False))?\s*$"
)
_SPEC_REPR = re.compile(
    r"(?P<which>Input|Output)Spec\(kind=<(?:Input|Output)Kind\.(?P<kind>\w+): \d+>, "
    r"arg=\w+\(name='(?P<name>[^']*)'[^)]*\), target=(?P<target>None|'[^']*')"
    r"(?:, persistent=(?P<persistent>\w+))?\)"
)
# Payload text is input from anywhere: every pattern here runs in time linear in the text (a name
# starts only where a word starts, `\b`, so a 40,000-character word is tried once, not once per
# character; a bound stops at the next delimiter). tests/test_bad_input_round3.py times them.
_PARAM = re.compile(r'\b(?P<name>[A-Za-z_]\w*)(?:\s*:\s*"(?P<ann>[^"]*)")?')
_RANGE = re.compile(r"\b(?P<sym>[A-Za-z_]\w*): VR\[(?P<lo>[^,\[\]]+), (?P<hi>[^,\[\]]+)\]")
_SYMBOL = re.compile(r"^[A-Za-z_]\w*$")


@dataclass
class SignatureEntry:
    name: str
    kind: str  # USER_INPUT, PARAMETER, BUFFER, CONSTANT_TENSOR, CUSTOM_OBJ, TOKEN, USER_OUTPUT, ...
    target: str | None = None
    persistent: bool | None = None
    dtype: str | None = None
    shape: list[str] | None = None  # sizes as printed: "3", "s77"; None for a non-tensor

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "target": self.target,
            "persistent": self.persistent,
            "dtype": self.dtype,
            "shape": self.shape,
        }


@dataclass
class ExportedProgramText:
    inputs: list[SignatureEntry] = field(default_factory=list)  # every input spec, in order
    outputs: list[SignatureEntry] = field(default_factory=list)
    range_constraints: dict[str, tuple[str, str]] = field(default_factory=dict)  # symbol -> (min, max)
    graph: str = ""  # the printed graph module


def parse_exported_program(text: str) -> ExportedProgramText:
    """The signature, shapes and range constraints of a printed ExportedProgram."""
    graph, _, rest = text.partition("Graph signature:")
    signature, _, ranges = rest.partition("Range constraints:")
    out = ExportedProgramText(graph=graph.replace("ExportedProgram:", "", 1).strip("\n"))
    for m in _SPEC_REPR.finditer(signature):
        entry = SignatureEntry(m["name"], m["kind"], _target(m["target"]), _bool(m["persistent"]))
        (out.inputs if m["which"] == "Input" else out.outputs).append(entry)
    if not out.inputs and not out.outputs:
        section = out.inputs
        for line in signature.splitlines():
            if line.strip() == "# outputs":
                section = out.outputs
            m = _SIGNATURE_LINE.match(line)
            if m:
                section.append(
                    SignatureEntry(m["name"], m["kind"], _target(m["target"]), _bool(m["persistent"]))
                )
    out.range_constraints = {m["sym"]: (m["lo"].strip(), m["hi"].strip()) for m in _RANGE.finditer(ranges)}
    _attach_types(out)
    return out


def _target(text: str | None) -> str | None:
    if text is None or text == "None":
        return None
    return text[1:-1] if text.startswith("'") and text.endswith("'") else text


def _bool(text: str | None) -> bool | None:
    return {"True": True, "False": False}.get(text or "")


def _attach_types(ep: ExportedProgramText) -> None:
    """Shapes and dtypes: inputs from the forward's annotations, outputs from the nodes returned."""
    params: dict[str, str | None] = {}
    for line in ep.graph.splitlines():
        stripped = line.strip()
        if stripped.startswith("def forward(self"):
            inner = stripped.partition("(")[2].rpartition(")")[0]
            params = {m["name"]: m["ann"] for m in _PARAM.finditer(inner) if m["name"] != "self"}
            break
    nodes = {n.name: n.type for n in parse_graph_nodes(ep.graph)}
    for entry in ep.inputs:
        _set_type(entry, params.get(entry.name))
    for entry in ep.outputs:
        ttype = nodes.get(entry.name)
        if ttype is not None:
            entry.dtype, entry.shape = ttype.dtype, ttype.shape


def _set_type(entry: SignatureEntry, annotation: str | None) -> None:
    ttype = parse_type(f'"{annotation}"') if annotation else None
    if ttype is not None:
        entry.dtype, entry.shape = ttype.dtype, ttype.shape


def is_symbol(size: str) -> bool:
    """A printed size that is a symbol (`s77`, `u0`), not a number or an expression."""
    return bool(_SYMBOL.match(size)) and not size.isdigit()


def python_condition(expr: str) -> str:
    """sympy's printing as Python: `Eq(u0, 1)` -> `u0 == 1`, `Ne(s0, 3)` -> `s0 != 3`; `((x//3))`
    keeps its floor division. Anything else is returned as it is."""
    for name, op in (("Eq", "=="), ("Ne", "!=")):
        if expr.startswith(f"{name}(") and expr.endswith(")"):
            args = split_top_level(expr[len(name) + 1 : -1])
            if len(args) == 2:
                return f"{python_condition(args[0])} {op} {python_condition(args[1])}"
    return expr


def negated(condition: str) -> str:
    """`a == b` -> `a != b` (and back); anything else -> `not (...)`."""
    for op, other in ((" == ", " != "), (" != ", " == ")):
        left, sep, right = condition.partition(op)
        if sep and op not in right:
            return f"{left}{other}{right}"
    return f"not ({condition})"


def symbols_in(expr: str) -> list[str]:
    """The shape symbols an expression names (`s77`, `u0`), in order of appearance."""
    return list(dict.fromkeys(re.findall(r"\b[su]\d+\b", expr)))
