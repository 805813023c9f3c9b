"""Where one profiled call's time went: its profiler ranges split into parts that add up to the call.

Pure and torch-free. The recorder (core/recorder/compat_cost.py) keeps, for each profiled call, the
ranges of the call's thread (`cpu`: name, start, duration, in ns from the call's start) and the
device work they launched (`device`). torch names the pieces of a compiled call:

    tcx.call                                  the call (tcx's range)
      TorchDynamo Cache Lookup                Dynamo evaluates the guards of the frame's cache entries
      Torch-Compiled Region: 0/0              the transformed frame of compile 0/0 runs
        Pregraph bytecode                     Dynamo's prologue (the graph's inputs)
        tcx.graph 0/0                         the compiled graph (tcx's range around the backend's callable)
          ## Call CompiledFxGraph … ##        Inductor's call()
            graph_0_cpp_fused_add_0 / triton_…  a generated kernel
            aten::mm                          an extern call
        aten::mul …                           after a graph break: the frame's code runs eagerly
        TorchDynamo Cache Lookup
        Torch-Compiled Region: 1/0            … until it calls the resume function's compile

Every instant of the call goes to exactly one part: on the CPU, to the innermost range running then
(a range's own time, outside its children); on a GPU, to the kernels the device was running, and
the device's idle time to what the CPU was doing. So the parts add up to the call by construction.

How each range is attributed (`Key`): a kernel range and everything under it is `kernel`; an ATen
op inside a graph is `extern` under Inductor (a call outside its generated kernels) and `graph_op`
under a backend that generates none (its graph runs op by op); a cache lookup is `guards`, given to
the compile whose region follows it; inside a region but outside its graph — the code after a graph
break, up to the resume function — is `eager`, given to that compile's graph break (the break whose
region ended just before it); a call that entered no region ran eagerly as a whole (a frame Dynamo
skipped, or the recompile limit), given to the frame; what remains (Dynamo's prologue, the graph's
wrappers, torch.compile's call wrapper, Python in a frame without a break) is `other`, named.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CALL_SPAN = "tcx.call"
GRAPH_SPAN = "tcx.graph "
LOOKUP = "TorchDynamo Cache Lookup"
REGION = "Torch-Compiled Region: "
PROLOGUE = "Pregraph bytecode"
INDUCTOR_CALL = "## Call CompiledFxGraph"
# Ranges torch puts around a graph's call that are neither kernels nor ops.
WRAPPERS = ("AOTDispatcher Runtime Wrapper", "CompiledFunction", "autograd::", "## ")
_RUNTIME = re.compile(r"^(cuda|cu|hip)[A-Z]")  # CUDA runtime/driver calls on the CPU thread
_KERNEL_PREFIX = re.compile(r"^graph_\d+_")  # Inductor's C++ kernels record as graph_<n>_<kernel name>
PARTS = ("kernel", "extern", "graph_op", "eager", "guards", "other")
MAX_NS = 10**15  # a duration or offset past this (11 days) is not one: a recording is input from anywhere


def bounded(value: Any, low: int = 0) -> int | None:
    """`value` when it is an integer from `low` to MAX_NS (the schema admits 400-digit integers)."""
    return value if type(value) is int and low <= value <= MAX_NS else None


OTHER_CALL = "torch.compile's call wrapper and Python outside compiled regions"
OTHER_PROLOGUE = "Dynamo's prologue (the graph's inputs)"
OTHER_WRAPPER = "the graph's wrappers (AOTAutograd's runtime, Inductor's call())"
OTHER_FRAME = "Python of the compiled frame outside its graph"


@dataclass(frozen=True)
class Key:
    part: str  # one of PARTS
    compile_id: str | None
    name: str


@dataclass
class Piece:
    """One part of one call (or, summed, of several calls)."""

    key: Key
    ns: int = 0  # time attributed to it; the pieces of a call add up to the call
    launches: int = 0  # ranges that started it (kernel launches, op calls, lookups)
    own_ns: int = 0  # kernels and extern calls: their own duration (device time on a GPU)
    cpu_own_ns: int = 0  # the same on the CPU: the duration of the ranges that started it
    ops: Counter = field(default_factory=Counter)  # eager pieces: the ATen ops that ran
    device_kernels: Counter = field(default_factory=Counter)  # device kernels it launched
    bytes: int | None = None  # device launches: bytes of their tensor arguments, summed
    flops: int | None = None
    inductor_gb: float | None = None  # Inductor's own estimate (kernel_num_gb), summed
    inductor_flop: float | None = None
    dtype: str | None = None

    def add(self, other: Piece) -> None:
        self.ns += other.ns
        self.launches += other.launches
        self.own_ns += other.own_ns
        self.cpu_own_ns += other.cpu_own_ns
        self.ops.update(other.ops)
        self.device_kernels.update(other.device_kernels)
        for name in ("bytes", "flops", "inductor_gb", "inductor_flop"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if theirs is not None:
                setattr(self, name, (mine or 0) + theirs)
        self.dtype = self.dtype or other.dtype


@dataclass(frozen=True)
class Span:
    """A labelled range of one call, for the Chrome trace (`--trace`)."""

    name: str
    part: str
    start_ns: int
    dur_ns: int
    track: str  # "cpu" or "device <stream>"
    compile_id: str | None = None


@dataclass
class CallProfile:
    """One profiled call, attributed."""

    index: int
    function: str
    call_ns: int
    pieces: dict[Key, Piece]
    spans: list[Span]
    regions: list[str]  # compile ids whose region the call entered
    launch_ns: dict[str, int]  # compile id -> CPU time in kernel-launch calls of its graph
    on_device: bool
    truncated: int = 0


@dataclass
class Context:
    """What the run model knows that the profile does not: which break ended each compile's region,
    and why a frame ran eagerly."""

    eager_label: Callable[[str], str | None]  # compile id -> label of its graph break (None: no break)
    frame_label: Callable[[str], str]  # function -> why a call of it entered no region


@dataclass
class _Node:
    name: str
    start: int
    end: int
    index: int
    children: list[_Node] = field(default_factory=list)
    key: Key | None = None
    starts_key: bool = False


def attribute(event: dict[str, Any], ctx: Context) -> CallProfile | None:
    """The parts of one `cost_profile` event; None when it holds no call."""
    names = event.get("names") or []
    rows = event.get("cpu") or []
    nodes = [_node(names, row, i) for i, row in enumerate(rows)]
    nodes = [n for n in nodes if n is not None]
    root = next((n for n in nodes if n.name == CALL_SPAN), None)
    if root is None:
        return None
    _nest(root, [n for n in nodes if n is not root and root.start <= n.start and n.end <= root.end])
    function = str(event.get("function") or "?")
    regions: list[str] = []
    _classify(root, ctx, function, regions)
    by_index = {n.index: n for n in _walk(root)}
    pieces: dict[Key, Piece] = {}
    spans: list[Span] = []
    launch_ns: dict[str, int] = {}
    cpu_intervals = _self_intervals(root, pieces, spans, launch_ns)
    device = _device_rows(event, names, by_index)
    if device:
        _overlay_device(cpu_intervals, device, pieces, spans)
    else:
        for start, end, key in cpu_intervals:
            _piece(pieces, key).ns += end - start
    _launch_facts(event, by_index, pieces)
    for piece in pieces.values():  # a kernel's own time: on the device when it ran there, else the CPU's
        if not piece.device_kernels:
            piece.own_ns = piece.cpu_own_ns
    return CallProfile(
        index=int(event.get("index", -1)) if isinstance(event.get("index"), int) else -1,
        function=function,
        call_ns=root.end - root.start,
        pieces=pieces,
        spans=spans,
        regions=regions,
        launch_ns=launch_ns,
        on_device=bool(device),
        truncated=int(event.get("truncated") or 0),
    )


def _node(names: list[Any], row: Any, index: int) -> _Node | None:
    if not (isinstance(row, list) and len(row) >= 3 and all(bounded(v) is not None for v in row[:3])):
        return None
    if not row[0] < len(names):
        return None
    return _Node(str(names[row[0]]), row[1], row[1] + row[2], index)


def _nest(root: _Node, nodes: list[_Node]) -> None:
    """Ranges of one thread nest; sorted by start (longest first) a stack builds the tree. A range
    that overlaps its parent's end (clock rounding) is cut to it."""
    nodes.sort(key=lambda n: (n.start, -(n.end - n.start)))
    stack = [root]
    for node in nodes:
        while len(stack) > 1 and node.start >= stack[-1].end:
            stack.pop()
        parent = stack[-1]
        node.end = min(node.end, parent.end)
        if node.end < node.start:
            continue
        parent.children.append(node)
        stack.append(node)


def _walk(node: _Node) -> list[_Node]:
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        out.append(n)
        todo.extend(n.children)
    return out


def is_op(name: str) -> bool:
    return "::" in name and not name.startswith("autograd::")


def kernel_name(name: str) -> str:
    """A kernel's name as Inductor's output code spells it (graph_0_cpp_fused_add_0 -> cpp_fused_add_0)."""
    return _KERNEL_PREFIX.sub("", name)


def _classify(root: _Node, ctx: Context, function: str, regions: list[str]) -> None:
    entered = any(n.name.startswith(REGION) for n in _walk(root))
    call_key = Key("other", None, OTHER_CALL) if entered else Key("eager", None, ctx.frame_label(function))
    root.key, root.starts_key = call_key, True
    # (node, region compile id, graph compile id or None, inductor graph, key of the region's eager code)
    todo: list[tuple[_Node, str | None, str | None, bool, Key]] = [(root, None, None, False, call_key)]
    while todo:
        node, region, graph, inductor, eager = todo.pop()
        for i, child in enumerate(node.children):
            c_region, c_graph, c_inductor, c_eager = region, graph, inductor, eager
            name = child.name
            key: Key | None = None
            if name == LOOKUP:
                following = node.children[i + 1].name if i + 1 < len(node.children) else ""
                cid = following[len(REGION) :] if following.startswith(REGION) else None
                key = Key("guards", cid, "Dynamo cache lookup (guard evaluation)")
            elif name.startswith(REGION):
                c_region, c_graph = name[len(REGION) :], None
                regions.append(c_region)
                label = ctx.eager_label(c_region)
                c_eager = Key("eager", c_region, label) if label else Key("other", c_region, OTHER_FRAME)
                key = c_eager
            elif name == PROLOGUE:
                key = Key("other", region, OTHER_PROLOGUE)
            elif name.startswith(GRAPH_SPAN) or (name.startswith(INDUCTOR_CALL) and graph is None):
                c_graph = name[len(GRAPH_SPAN) :] if name.startswith(GRAPH_SPAN) else region
                c_inductor = inductor or any(n.name.startswith(INDUCTOR_CALL) for n in _walk(child))
                key = Key("other", c_graph, OTHER_WRAPPER)
            elif graph is not None and name.startswith(WRAPPERS):
                key = None  # inherits the graph's wrapper key
            elif _RUNTIME.match(name):
                key = None  # a CUDA runtime call belongs to what made it
            elif is_op(name):
                if (
                    node.key is not None
                    and node.key.part in ("kernel", "extern", "graph_op")
                    and node.name != name
                ):
                    key = None  # an op inside a kernel or an extern call is part of it
                elif graph is not None:
                    key = Key("extern" if inductor else "graph_op", graph, name)
                elif node.key is not None and node.key.part == "eager" and is_op(node.name):
                    key = None  # an op called by an eager op is part of it
                else:
                    key = eager
            elif graph is not None and (node.key is None or node.key.part == "other"):
                key = Key("kernel", graph, kernel_name(name))
            if key is None:
                child.key = node.key
            else:
                child.key, child.starts_key = key, True
            todo.append((child, c_region, c_graph, c_inductor, c_eager))


def _piece(pieces: dict[Key, Piece], key: Key) -> Piece:
    piece = pieces.get(key)
    if piece is None:
        piece = pieces[key] = Piece(key)
    return piece


def _self_intervals(
    root: _Node, pieces: dict[Key, Piece], spans: list[Span], launch_ns: dict[str, int]
) -> list[tuple[int, int, Key]]:
    """Each range's own time (outside its children), with its key; they partition the call.
    Also counts launches, kernels' own time, eager ops, and makes the trace's labelled spans."""
    out: list[tuple[int, int, Key]] = []
    todo = [(root, None)]
    while todo:
        node, parent = todo.pop()
        key = node.key or Key("other", None, OTHER_CALL)
        piece = _piece(pieces, key)
        if node.starts_key:
            piece.launches += 1
            if key.part in ("kernel", "extern", "graph_op"):
                piece.cpu_own_ns += node.end - node.start
        if key.part == "eager" and is_op(node.name) and not (parent is not None and is_op(parent.name)):
            piece.ops[node.name] += 1
        if _RUNTIME.match(node.name) and "Launch" in node.name and key.compile_id is not None:
            launch_ns[key.compile_id] = launch_ns.get(key.compile_id, 0) + node.end - node.start
        label = _label(node, key)
        if label is not None:
            spans.append(Span(label, key.part, node.start, node.end - node.start, "cpu", key.compile_id))
        cursor = node.start
        for child in sorted(node.children, key=lambda c: c.start):
            if child.start > cursor:
                out.append((cursor, child.start, key))
            cursor = max(cursor, child.end)
            todo.append((child, node))
        if node.end > cursor:
            out.append((cursor, node.end, key))
        if node.name.startswith(REGION) and key.part == "eager":
            spans.extend(_eager_stretches(node, key))
    out.sort(key=lambda t: t[0])
    return out


def _label(node: _Node, key: Key) -> str | None:
    """The trace's name for a range tcx understands (None: shown only through its parent)."""
    name = node.name
    if name == CALL_SPAN:
        return "call"
    if name == LOOKUP:
        return "guards: Dynamo cache lookup"
    if name.startswith(REGION):
        return f"compiled region {name[len(REGION) :]}"
    if name.startswith(GRAPH_SPAN):
        return f"graph {name[len(GRAPH_SPAN) :]}"
    if node.starts_key and key.part in ("kernel", "extern", "graph_op"):
        return f"{key.part}: {key.name}"
    if node.starts_key and key.part == "eager" and is_op(name):
        return f"eager: {name}"
    if name == PROLOGUE:
        return "Dynamo prologue"
    return None


def _eager_stretches(region: _Node, key: Key) -> list[Span]:
    """The stretches of a region after its graph that are neither lookups nor nested regions: the code
    that ran eagerly because of the graph break, labelled with it."""
    out, cursor = [], None
    for child in sorted(region.children, key=lambda c: c.start):
        if (
            child.name.startswith(GRAPH_SPAN)
            or child.name.startswith(INDUCTOR_CALL)
            or child.name == PROLOGUE
        ):
            cursor = child.end
        elif child.name == LOOKUP or child.name.startswith(REGION):
            if cursor is not None and child.start > cursor:
                out.append(
                    Span(f"eager: {key.name}", "eager", cursor, child.start - cursor, "cpu", key.compile_id)
                )
            cursor = None
    if cursor is not None and region.end > cursor:
        out.append(Span(f"eager: {key.name}", "eager", cursor, region.end - cursor, "cpu", key.compile_id))
    return out


@dataclass
class _DeviceRow:
    name: str
    start: int
    end: int
    stream: int
    launcher: _Node


def _device_rows(event: dict[str, Any], names: list[Any], by_index: dict[int, _Node]) -> list[_DeviceRow]:
    out = []
    for row in event.get("device") or []:
        if not (isinstance(row, list) and len(row) >= 5 and all(bounded(v) is not None for v in row[:5])):
            continue
        launcher = by_index.get(row[4])
        if launcher is None or not row[0] < len(names):
            continue
        out.append(_DeviceRow(str(names[row[0]]), row[1], row[1] + row[2], row[3], launcher))
    return out


def _overlay_device(
    cpu: list[tuple[int, int, Key]], device: list[_DeviceRow], pieces: dict[Key, Piece], spans: list[Span]
) -> None:
    """On a GPU: while the device runs kernels the time is theirs (split between kernels that overlap);
    while it is idle, the time is what the CPU was doing."""
    for row in device:
        key = row.launcher.key or Key("other", None, OTHER_CALL)
        piece = _piece(pieces, key)
        piece.own_ns += row.end - row.start
        piece.device_kernels[row.name] += 1
        spans.append(
            Span(row.name, key.part, row.start, row.end - row.start, f"device {row.stream}", key.compile_id)
        )
    bounds = sorted({t for s, e, _ in cpu for t in (s, e)} | {t for r in device for t in (r.start, r.end)})
    cpu_at = _Cursor([(s, e, k) for s, e, k in cpu])
    active = sorted(device, key=lambda r: r.start)
    running: list[_DeviceRow] = []
    j = 0
    for a, b in itertools.pairwise(bounds):
        while j < len(active) and active[j].start <= a:
            running.append(active[j])
            j += 1
        running = [r for r in running if r.end > a]
        if running:
            share = (b - a) / len(running)
            for r in running:
                _piece(pieces, r.launcher.key or Key("other", None, OTHER_CALL)).ns += round(share)
        else:
            key = cpu_at.at(a)
            if key is not None:
                _piece(pieces, key).ns += b - a


class _Cursor:
    """The CPU key active at increasing instants (the intervals partition the call)."""

    def __init__(self, intervals: list[tuple[int, int, Key]]) -> None:
        self.intervals, self.i = intervals, 0

    def at(self, t: int) -> Key | None:
        while self.i < len(self.intervals) and self.intervals[self.i][1] <= t:
            self.i += 1
        if self.i < len(self.intervals) and self.intervals[self.i][0] <= t:
            return self.intervals[self.i][2]
        return None


def _launch_facts(event: dict[str, Any], by_index: dict[int, _Node], pieces: dict[Key, Piece]) -> None:
    for row in event.get("extra") or []:
        if not (isinstance(row, list) and len(row) == 2 and isinstance(row[1], dict)):
            continue
        node = by_index.get(row[0]) if isinstance(row[0], int) else None
        if node is None or node.key is None:
            continue
        piece = _piece(pieces, node.key)
        facts = row[1]
        for name, attr in (("bytes", "bytes"), ("flops", "flops")):
            value = bounded(facts.get(name))
            if value is not None:
                setattr(piece, attr, (getattr(piece, attr) or 0) + value)
        for name, attr in (("kernel_num_gb", "inductor_gb"), ("kernel_flop", "inductor_flop")):
            value = facts.get(name)
            if type(value) in (int, float) and 0 <= value <= MAX_NS:
                setattr(piece, attr, (getattr(piece, attr) or 0.0) + float(value))
        if isinstance(facts.get("dtype"), str):
            piece.dtype = piece.dtype or facts["dtype"]
