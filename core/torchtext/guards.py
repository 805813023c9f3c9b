"""Torch's guard text: failure messages, `check_tensor` lines and the guard tree.

Failure messages (one per cache entry that failed; torch's `recompile_reasons` artifact, and
`guard_manager.check_verbose(...).verbose_code_parts[0]` for a live check). The offline form
has every `L['x']` replaced by `x` (torch's `strip_local_scope`); the live form keeps it. Known
shapes, torch 2.6 to 2.14:

    tensor 'SOURCE' size mismatch at index 1. expected 7, actual 8
    tensor 'SOURCE' stride mismatch at index 0. expected 4, actual 8
    tensor 'SOURCE' dtype mismatch. expected Float, actual Double
    tensor 'SOURCE' rank mismatch. expected 1, actual 2
    tensor 'SOURCE' requires_grad mismatch. expected requires_grad=0
    tensor 'SOURCE' dispatch key set mismatch. expected DispatchKeySet(CPU, ...), actual DispatchKeySet(...)
    tensor 'SOURCE' Tensor device index mismatch. Expected device index to be 0, actual 1
    GUARD CODE    # USER LINE  # FILE:LINE in FN          (e.g. `G['SCALE'] == 2`, `5 <= x.size()[0]`,
                                                            `___check_obj_id(...)`, `len(xs) == 2`)
    GLOBAL_STATE changed: grad_mode
    Duplicate tensors found: ["a", "b"]
    BACKEND_MATCH failure: torch.compile detected different backend callables. ...

SOURCE is a guard source, which may itself hold quotes and brackets
(`model_kwargs['position_ids']`, `L['model_kwargs']['position_ids']`): it is read as everything
between `tensor '` and the `' <check> mismatch` that ends the message shape, never up to the
next quote.

The guard tree (`dynamo_cpp_guards_str`, and each guard's text in a live `guards` event):

    +- RootGuardManager
    | +- GuardManager: source=L['x'], accessed_by=FrameLocalsGuardAccessor(...), type=...
    | | +- TENSOR_MATCH: check_tensor(L['x'], Tensor, DispatchKeySet(CPU, ...), torch.float32,
    |          device=None, requires_grad=False, size=[3], stride=[1])  # x + 1  # prog.py:7 in f
    +- LAMBDA_GUARD: 2 <= L['x'].size()[0]  # ...        (symbolic-shape guards, at the root)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tcx.core.torchtext.locations import Location, guard_location

# A guard source expression: a scope (`L['x']`, `G['SCALE']`) or a bare name, then attributes,
# indexes and keys (`.lin.weight`, `[0]`, `['position_ids']`, `.size()`).
_SCOPE_EXPR = r"\b[LG]\[['\"][^'\"]+['\"]\]"
# At most MAX_ACCESSES attributes, indexes and keys: a search for `SOURCE.size()[d]` tries every
# word of the text, and an unbounded repeat would scan the rest of it from each (quadratic on a
# payload of `x.x.x.…`); torch's deepest module paths have about a dozen.
_ACCESS = r"(?:\.[A-Za-z_]\w*(?:\(\))?|\[-?\d+\]|\[['\"][^'\"]*['\"]\]){0,64}"
_SOURCE_EXPR = rf"(?:{_SCOPE_EXPR}|\b[A-Za-z_]\w*){_ACCESS}"
_SCOPED_SOURCE = re.compile(_SCOPE_EXPR + _ACCESS)
_SIZE = re.compile(rf"(?P<src>{_SOURCE_EXPR})\.size\(\)\[(?P<dim>\d+)\]")
_LOCAL_SCOPE = re.compile(r"L\[\s*['\"](.*?)['\"]\s*\]")  # torch's strip_local_scope
_GLOBAL_SCOPE = re.compile(r"^G\[\s*['\"](?P<name>.*?)['\"]\s*\]")
_DYNAMO_SITE = re.compile(r"\((?:torch/)?_dynamo/")
_ENTRY = re.compile(r"^\s*(\d+/\d+|[\w!/]+/\d+): (.*)$", re.S)
_TENSOR_FAIL = re.compile(
    r"^tensor '(?P<source>.+)' "
    r"(?P<what>size|stride|dtype|device|requires_grad|rank|dispatch key set|Tensor device index)"
    r" mismatch(?: at index (?P<dim>\d+))?\.?\s*"
    r"(?:[Ee]xpected (?:device index to be )?(?P<expected>.+?)(?:, actual (?P<actual>.+))?)?$"
)
_TENSOR_KIND = {
    "size": "shape",
    "stride": "stride",
    "dtype": "dtype",
    "device": "device",
    "Tensor device index": "device",
    "requires_grad": "requires_grad",
    "rank": "rank",
    "dispatch key set": "dispatch",
}
_VALUE_EQ = re.compile(r"^(?P<source>[^=<>!]+?) == (?P<expected>.+)$")
_COMPARISON = re.compile(r"<=|>=|<|>|==|!=")
_CHECK_TENSOR = re.compile(
    r"check_tensor\((?P<source>.+?), (?P<type>\w+), DispatchKeySet\([^)]*\), (?P<dtype>[\w.]+), "
    r"device=(?P<device>[^,]+), requires_grad=(?P<grad>\w+), size=(?P<size>\[[^\]]*\]), "
    r"stride=(?P<stride>\[[^\]]*\])"
)
# A tree line is `| ` once per level above it, `+- `, then (matched from there) a leaf or a manager.
_TREE_LEAF = re.compile(r"\b(?P<kind>[A-Z_]+): ")  # the guard's text is the rest of the line
_TREE_MANAGER = re.compile(r"\b\w*GuardManager: source=(?P<source>.+?), accessed_by=")


# ---------------------------------------------------------------- sources


def strip_local_scope(text: str) -> str:
    """`L['x'].size()[0]` -> `x.size()[0]`: what torch does to recompile reasons before printing."""
    return _LOCAL_SCOPE.sub(r"\1", text)


def source_name(source: str) -> str:
    """A source as the user names it: `L['x']` -> `x`, `G['SCALE']` -> `SCALE`, `L['m']['k']` -> `m['k']`,
    `len(L['xs'])` -> `len(xs)`."""
    s = strip_local_scope(source.strip())
    m = _GLOBAL_SCOPE.match(s)
    return m["name"] + s[m.end() :] if m else s


def scoped_sources(code: str) -> list[str]:
    """The `L[...]`/`G[...]` sources a guard's code reads (`L['x'].size()[0]`), in order, once each."""
    return list(dict.fromkeys(m.group() for m in _SCOPED_SOURCE.finditer(code)))


def size_source(text: str) -> tuple[str, int] | None:
    """`L['x'].size()[0]` (anywhere in `text`) -> ("x", 0)."""
    m = _SIZE.search(text)
    return (source_name(m["src"]), int(m["dim"])) if m else None


def without_dynamo_site(where: str) -> str:
    """A symbolic-shape guard's origin without the Dynamo frame torch appends to the user's:
    `if x.shape[0] > 64:  # seed_f.py:12 in f (_dynamo/variables/tensor.py:1304 in evaluate_expr)`."""
    text = where.rstrip()
    if not text.endswith(")"):
        return where
    last = text.rfind(")", 0, len(text) - 1) + 1  # the site's "(" is after the ")" before its own
    m = _DYNAMO_SITE.search(text, last)
    return text[: m.start()].rstrip() if m else where


def guard_code(text: str) -> str:
    """A guard's code, without the comment torch appends after two blanks (`code  # where`)."""
    return text.partition("  #")[0].strip()


def split_entry(text: str) -> tuple[str, str]:
    """`0/1: tensor 'x' ...` -> ("0/1", "tensor 'x' ..."); ("?", text) without an entry prefix."""
    m = _ENTRY.match(text)
    return (m.group(1), m.group(2)) if m else ("?", text)


def recompile_reasons(payload: str) -> list[tuple[str, str]]:
    """A `recompile_reasons` artifact (a JSON list, or one string) as (entry, failure text) pairs,
    the entries in the order Dynamo checked them, without the `User stack trace:` torch appends."""
    try:
        value = json.loads(payload)
    except ValueError:
        value = payload
    items = value if isinstance(value, list) else [value]
    return [split_entry(str(item).split("\nUser stack trace:", 1)[0]) for item in items]


# ---------------------------------------------------------------- failures


@dataclass
class GuardFailure:
    """One failing guard, read from torch's message."""

    guard: str  # the guard as shown: torch's text without the comment, L['...'] scopes stripped
    kind: str  # shape, stride, dtype, device, requires_grad, rank, dispatch, dynamic_shape,
    # global, closure, attribute, int, length, value, identity, type, global_state, backend,
    # aliasing, other
    arg: str | None = None  # the source the guard reads, as the user names it
    dim: int | None = None
    expected: str | None = None
    actual: str | None = None
    location: Location | None = None


def parse_failure(text: str) -> GuardFailure:
    """One failing guard as torch prints it (a recompile reason without its entry prefix, or a
    `check_verbose` part)."""
    head = guard_code(text.strip())
    g = GuardFailure(guard=strip_local_scope(head), kind="other", location=guard_location(text))
    tensor = _TENSOR_FAIL.match(head)
    if tensor:
        _tensor_failure(g, tensor)
    elif "GLOBAL_STATE" in head or "___check_global_state" in head:
        g.kind = "global_state"
        changed = head.partition("GLOBAL_STATE changed:")[2].strip()
        g.arg = changed or None
    elif "___check_obj_id" in head or "ID_MATCH" in head:
        g.kind, g.arg = "identity", _first_argument(head)
    elif "___check_type_id" in head:
        g.kind, g.arg = "type", _first_argument(head)
    elif "BACKEND_MATCH" in head:
        g.kind = "backend"
    elif "torch_function_mode" in head or "TORCH_FUNCTION" in head:
        g.kind = "global_state"
    elif "Duplicate tensor" in head or "aliasing" in head.lower():
        g.kind = "aliasing"
    elif (size := size_source(head)) and _COMPARISON.search(head):
        g.kind = "dynamic_shape"
        g.arg, g.dim = size
        g.expected = g.guard
    elif eq := _VALUE_EQ.match(head):
        _value_failure(g, eq["source"].strip(), eq["expected"].strip())
    return g


def _tensor_failure(g: GuardFailure, m: re.Match[str]) -> None:
    what = m["what"]
    g.kind = _TENSOR_KIND[what]
    g.arg = source_name(m["source"])
    g.dim = int(m["dim"]) if m["dim"] else None
    g.expected, g.actual = _value(m["expected"]), _value(m["actual"])
    if what == "requires_grad" and g.expected and g.actual is None:
        # `expected requires_grad=0`: the tensor now has the other value.
        want = g.expected.rpartition("=")[2].strip()
        g.expected = "True" if want in ("1", "True") else "False"
        g.actual = "False" if g.expected == "True" else "True"


def _value_failure(g: GuardFailure, source: str, expected: str) -> None:
    g.expected = expected
    g.arg = source_name(source)
    inner = source.replace("L['", "").split("]", 1)[-1] if "]" in source else source
    if source.startswith("G["):
        g.kind = "global"
    elif "closure" in source or "__closure__" in source or "cell_contents" in source:
        g.kind = "closure"
    elif source.startswith("len("):
        g.kind = "length"
    elif "." in inner:
        g.kind = "attribute"
    else:
        g.kind = "int" if re.fullmatch(r"-?\d+", expected) else "value"


def _first_argument(head: str) -> str:
    return source_name(head.split("(", 1)[-1].split(",", 1)[0])


def _value(v: str | None) -> str | None:
    return v.strip().rstrip(".") if v else v


# ---------------------------------------------------------------- check_tensor and the tree


@dataclass
class TensorCheck:
    """`check_tensor(L['x'], Tensor, DispatchKeySet(...), torch.float32, device=None,
    requires_grad=False, size=[128, 32], stride=[32, 1])`; None in size/stride is a dynamic dim."""

    source: str
    type: str
    dtype: str  # without the `torch.` prefix
    device: str
    requires_grad: bool
    size: str  # as printed: `[128, 32]`, `[None, 32]`
    stride: str

    def describe(self) -> str:
        """`Tensor float32 size=[128, 32] stride=[32, 1] requires_grad=False device=None`."""
        return (
            f"{self.type} {self.dtype} size={self.size} stride={self.stride} "
            f"requires_grad={self.requires_grad} device={self.device}"
        )


def parse_check_tensor(text: str) -> TensorCheck | None:
    m = _CHECK_TENSOR.search(text)
    if not m:
        return None
    return TensorCheck(
        source=m["source"],
        type=m["type"],
        dtype=m["dtype"].removeprefix("torch."),
        device=m["device"],
        requires_grad=m["grad"] == "True",
        size=m["size"],
        stride=m["stride"],
    )


def tensor_match_text(text: str) -> str | None:
    """A TENSOR_MATCH guard's `check_tensor(...)` in a line (None if it has none)."""
    check = parse_check_tensor(text)
    return check.describe() if check else None


@dataclass
class TreeLeaf:
    """One guard of the tree: its kind (TENSOR_MATCH, LAMBDA_GUARD ...), text, and depth; `source`
    is the source of the nearest GuardManager above it ("" at the root)."""

    kind: str
    text: str
    depth: int
    source: str


def guard_tree_leaves(text: str) -> list[TreeLeaf]:
    """The leaves of torch's `TREE_GUARD_MANAGER` dump, in order (a large model's trees have
    thousands of lines each, and every recompile has one: found with str methods, not a regex
    over the indentation)."""
    leaves: list[TreeLeaf] = []
    sources: list[tuple[int, str]] = []  # (depth, source) of the managers above, deepest last
    for raw in text.splitlines():
        at = raw.find("+- ")
        if at < 0 or raw.count("| ", 0, at) * 2 != at:  # only `| `s before the first `+- `
            continue
        depth = at // 2
        m = _TREE_LEAF.match(raw, at + 3)  # never a manager: their kinds have lower-case letters
        if m:
            source = next((s for d, s in reversed(sources) if d < depth), "")
            leaves.append(TreeLeaf(m["kind"], raw[m.end() :], depth, source))
            continue
        m = _TREE_MANAGER.match(raw, at + 3)
        if m:
            while sources and sources[-1][0] >= depth:
                sources.pop()
            sources.append((depth, m["source"]))
    return leaves


def shape_guard_text(g: dict[str, Any]) -> str:
    """`s77 > 64  ← if x.shape[0] > 64:  # seed_f.py:12 in f` (torch's own site, minus Dynamo's frame)."""
    where = without_dynamo_site(str(g.get("where") or ""))
    return f"{g.get('expr')}  ← {where}" if where else str(g.get("expr"))
