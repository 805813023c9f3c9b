"""Where one profiled step's time went: its profiler ranges split into parts that add up to the step.

Pure and torch-free. The recorder (core/recorder/compat_cost.py) keeps, for each profiled step, the
ranges of the step's thread (`cpu`: name, start, duration, in ns from the step's start) and the
device work they launched (`device`). tcx and torch name the pieces of a step:

    tcx.step                                  the step (tcx's range: a call's start to the next call's)
      tcx.call                                the compiled call (tcx's range; `tcx.call NAME`: another
                                              compiled callable called in the step)
        TorchDynamo Cache Lookup              Dynamo evaluates the guards of the frame's cache entries
        Torch-Compiled Region: 0/0            the transformed frame of compile 0/0 runs
          Pregraph bytecode                   Dynamo's prologue (the graph's inputs)
          tcx.graph 0/0                       the compiled graph (tcx's range around the backend's callable)
            ## Call CompiledFxGraph … ##      Inductor's call()
              graph_0_cpp_fused_add_0 / triton_…  a generated kernel
              aten::mm                        an extern call
          aten::mul …                         after a graph break: the frame's code runs eagerly
      tcx.backward                            loss.backward() (tcx's range)
        CompiledFunctionBackward              a compiled graph's backward (AOTAutograd)
          ## Call CompiledFxGraph … ##        … its Inductor code: kernels, extern calls
        torch::autograd::AccumulateGrad …     the autograd engine's own work, eager ops' backward
      Optimizer.step#AdamW.step               the optimizer step (torch's range)
      Optimizer.zero_grad#… / aten::…         what runs eagerly between the calls

Every instant of the step goes to exactly one part: on the CPU, to the innermost range running then
(a range's own time, outside its children); on a GPU, to the kernels the device was running, and
the device's idle time to what the CPU was doing. So the parts add up to the step by construction.
A profile whose window is not a whole step (the program ended, or the next call ran in the other
grad mode) is attributed from its call alone.

How each range is attributed (`Key`, with the phase of the step it ran in: call, backward,
optimizer, between): a kernel range and everything under it is `kernel`; an ATen op inside a graph
is `extern` under Inductor (a call outside its generated kernels, named by the graph node it
computes where the output code says which) and `graph_op` under a backend that generates none; a
cache lookup is `guards`, given to the compile whose region follows it; inside a region but outside
its graph — the code after a graph break, up to the resume function — is `eager`, given to that
compile's graph break; a call that entered no region ran eagerly as a whole (a frame Dynamo
skipped, or the recompile limit), given to the frame; in backward(), outside the compiled graphs'
backward, `autograd`; an eager optimizer step `optimizer`; the step's time outside the call,
backward and optimizer `between`; what remains (Dynamo's prologue, the graph's wrappers,
torch.compile's call wrapper, Python in a frame without a break) is `other`, named.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CALL_SPAN = "tcx.call"
STEP_SPAN = "tcx.step"
BACKWARD_SPAN = "tcx.backward"
GRAPH_SPAN = "tcx.graph "
LOOKUP = "TorchDynamo Cache Lookup"
REGION = "Torch-Compiled Region: "
PROLOGUE = "Pregraph bytecode"
INDUCTOR_CALL = "## Call CompiledFxGraph"
BACKWARD_NODE = "CompiledFunctionBackward"  # AOTAutograd's autograd node: a compiled graph's backward
OPTIMIZER_STEP = "Optimizer.step#"  # torch's range around an optimizer step
# Ranges torch puts around a graph's call that are neither kernels nor ops.
WRAPPERS = ("AOTDispatcher Runtime Wrapper", "CompiledFunction", "autograd::", "## ")
_RUNTIME = re.compile(r"^(cuda|cu|hip)[A-Z]")  # CUDA runtime/driver calls on the CPU thread
_KERNEL_PREFIX = re.compile(r"^graph_\d+_")  # Inductor's C++ kernels record as graph_<n>_<kernel name>
PARTS = ("kernel", "extern", "graph_op", "eager", "guards", "autograd", "optimizer", "between", "other")
PHASES = ("call", "backward", "optimizer", "between")
COUNTED_PARTS = ("eager", "autograd", "optimizer", "between")  # parts whose ATen ops are counted
MAX_NS = 10**15  # a duration or offset past this (11 days) is not one: a recording is input from anywhere


def bounded(value: Any, low: int = 0) -> int | None:
    """`value` when it is an integer from `low` to MAX_NS (the schema admits 400-digit integers)."""
    return value if type(value) is int and low <= value <= MAX_NS else None


OTHER_CALL = "torch.compile's call wrapper and Python outside compiled regions"
OTHER_PROLOGUE = "Dynamo's prologue (the graph's inputs)"
OTHER_WRAPPER = "the graph's wrappers (AOTAutograd's runtime, Inductor's call())"
OTHER_BACKWARD = "the backward graph's wrappers (AOTAutograd's CompiledFunctionBackward)"
OTHER_FRAME = "Python of the compiled frame outside its graph"
AUTOGRAD = "backward() outside the compiled graphs (autograd engine, AccumulateGrad, eager ops' backward)"
BETWEEN = "eager code between the calls (data, zero_grad, the loop's Python)"


@dataclass(frozen=True)
class Key:
    part: str  # one of PARTS
    compile_id: str | None
    name: str
    phase: str = "call"  # one of PHASES
    site: str | None = None  # an extern call: the graph node it computes (the output code's order)


@dataclass
class Piece:
    """One part of one step (or, summed, of several steps)."""

    key: Key
    ns: int = 0  # time attributed to it; the pieces of a step add up to the step
    launches: int = 0  # ranges that started it (kernel launches, op calls, lookups)
    own_ns: int = 0  # kernels and extern calls: their own duration (device time on a GPU)
    cpu_own_ns: int = 0  # the same on the CPU: the duration of the ranges that started it (launch cost)
    device_ns: int = 0  # on a GPU: the device time of the work it launched
    ops: Counter = field(default_factory=Counter)  # eager pieces: the ATen ops that ran
    device_kernels: Counter = field(default_factory=Counter)  # device kernels it launched (launches)
    device_kernel_ns: Counter = field(default_factory=Counter)  # their device time, by kernel name
    replayed: int = 0  # device kernels it ran in CUDA-graph replays (cudaGraphLaunch)
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
        self.device_ns += other.device_ns
        self.replayed += other.replayed
        self.ops.update(other.ops)
        self.device_kernels.update(other.device_kernels)
        self.device_kernel_ns.update(other.device_kernel_ns)
        for name in ("bytes", "flops", "inductor_gb", "inductor_flop"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if theirs is not None:
                setattr(self, name, (mine or 0) + theirs)
        self.dtype = self.dtype or other.dtype


@dataclass(frozen=True)
class Span:
    """A labelled range of one step, for the Chrome trace (`--trace`)."""

    name: str
    part: str
    start_ns: int
    dur_ns: int
    track: str  # "cpu" or "device <stream>"
    compile_id: str | None = None


@dataclass
class CallProfile:
    """One profiled step (or, when its window was not a whole step, its call), attributed."""

    index: int
    function: str
    call_ns: int  # the attributed window: the whole step, or the call
    pieces: dict[Key, Piece]
    spans: list[Span]
    regions: list[str]  # compile ids whose region the call entered
    launch_ns: dict[str, int]  # compile id -> CPU time in kernel-launch calls of its graph
    on_device: bool
    truncated: int = 0
    mode: str | None = None  # the grad mode of its call
    whole_step: bool = False  # False: its call alone (the window was not a step)
    device_busy_ns: int = 0  # on a GPU: time the device ran work (union of its kernels)


@dataclass
class Context:
    """What the run model knows that the profile does not: which break ended each compile's region,
    why a frame ran eagerly, which compile a backward graph belongs to, and which graph node each
    extern call of a generated module computes."""

    eager_label: Callable[[str], str | None]  # compile id -> label of its graph break (None: no break)
    frame_label: Callable[[str], str]  # function -> why a call of it entered no region
    # (kernel names run in a backward graph, forward graphs of the step in order) -> its compile id
    backward_graph: Callable[[frozenset[str], tuple[str, ...], int], str | None] = lambda k, f, i: None
    # (compile id, backward?, ATen op, its k-th call of that op in the graph) -> the node it computes
    extern_site: Callable[[str, bool, str, int], str | None] = lambda c, b, o, k: None
    # (compile id, backward?) -> the module's kernel names, and its extern calls in order [(op, node)]
    module: Callable[[str, bool], tuple[frozenset[str], list[tuple[str, str | None]]]] = lambda c, b: (
        frozenset(),
        [],
    )


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
    nodes = [n for i, row in enumerate(rows) if (n := _node(names, row, i)) is not None]
    step = next((n for n in nodes if n.name == STEP_SPAN), None)
    whole = step is not None and _whole_step(event)
    root = step if whole else next((n for n in nodes if n.name == CALL_SPAN), None)
    if root is None:
        return None
    _nest(root, [n for n in nodes if n is not root and root.start <= n.start and n.end <= root.end])
    function = str(event.get("function") or "?")
    regions: list[str] = []
    if whole:
        _classify_step(root, ctx, function, regions)
    else:
        _classify_call(root, ctx, function, regions, "call")
    by_index = {n.index: n for n in _walk(root)}
    pieces: dict[Key, Piece] = {}
    spans: list[Span] = []
    launch_ns: dict[str, int] = {}
    cpu_intervals = _self_intervals(root, pieces, spans, launch_ns)
    device = _device_rows(event, names, by_index)
    busy = 0
    if device:
        _rekey_replays(device, ctx)
        busy = _overlay_device(cpu_intervals, device, pieces, spans, root.start)
    else:
        for start, end, key in cpu_intervals:
            _piece(pieces, key).ns += end - start
    _launch_facts(event, by_index, pieces)
    for piece in pieces.values():  # a kernel's own time: on the device when it ran there, else the CPU's
        piece.own_ns = piece.device_ns if piece.device_kernels else piece.cpu_own_ns
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
        mode=event.get("mode") if isinstance(event.get("mode"), str) else None,
        whole_step=whole,
        device_busy_ns=busy,
    )


def _whole_step(event: dict[str, Any]) -> bool:
    """Is the window one step: it ended where the next call of its function started, in the same
    grad mode, or it was a call of the step function (`--step`)?"""
    ended = event.get("ended")
    return ended == "step" or (ended == "next_call" and event.get("next_mode") == event.get("mode"))


def _node(names: list[Any], row: Any, index: int) -> _Node | None:
    if not (isinstance(row, list) and len(row) >= 3 and all(bounded(v) is not None for v in row[:3])):
        return None
    if not row[0] < len(names):
        return None
    return _Node(str(names[row[0]]), row[1], row[1] + row[2], index)


def _nest(root: _Node, nodes: list[_Node]) -> None:
    """Ranges of one thread nest; sorted by start (longest first) a stack builds the tree. A range
    that overlaps its parent's end (clock rounding, or another thread's range) is cut to it."""
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


def _classify_step(root: _Node, ctx: Context, function: str, regions: list[str]) -> None:
    """The step's top-level ranges: its calls, its backward, its optimizer steps, what ran between."""
    between = Key("between", None, BETWEEN, "between")
    root.key, root.starts_key = between, True
    forwards: list[str] = []  # graphs the step's calls ran, in order (their backward runs in reverse)
    backward_graphs = 0
    for child in sorted(root.children, key=lambda c: c.start):
        name = child.name
        if name == CALL_SPAN or name.startswith(CALL_SPAN + " "):
            _classify_call(child, ctx, function, regions, "call")
            forwards += [n.name[len(GRAPH_SPAN) :] for n in _walk(child) if n.name.startswith(GRAPH_SPAN)]
        elif name == BACKWARD_SPAN:
            backward_graphs = _classify_backward(child, ctx, tuple(forwards), backward_graphs)
        elif name.startswith(OPTIMIZER_STEP):
            if any(n.name.startswith(REGION) for n in _walk(child)):
                _classify_call(child, ctx, function, regions, "optimizer")  # a compiled optimizer step
            else:
                label = f"optimizer step {name[len(OPTIMIZER_STEP) :]} (eager)"
                _inherit(child, Key("optimizer", None, label, "optimizer"))
        else:
            _inherit(child, between)


def _inherit(node: _Node, key: Key) -> None:
    """`node` starts `key`; everything under it belongs to it."""
    node.key, node.starts_key = key, True
    for n in _walk(node)[1:]:
        n.key = key


def _classify_backward(node: _Node, ctx: Context, forwards: tuple[str, ...], seen: int) -> int:
    """backward(): each compiled graph's backward (AOTAutograd's CompiledFunctionBackward) as a graph
    of its compile, the rest autograd's. Returns the backward graphs seen so far in the step."""
    autograd = Key("autograd", None, AUTOGRAD, "backward")
    node.key, node.starts_key = autograd, True
    todo = [node]
    while todo:
        parent = todo.pop()
        for child in parent.children:
            if child.name == BACKWARD_NODE:
                inside = _walk(child)
                calls = [n for n in inside if n.name.startswith(INDUCTOR_CALL)]
                kernels = frozenset(
                    kernel_name(n.name)
                    for c in calls
                    for n in _walk(c)[1:]
                    if not (is_op(n.name) or n.name.startswith(WRAPPERS) or _RUNTIME.match(n.name))
                )
                cid = ctx.backward_graph(kernels, forwards, seen)
                seen += 1
                inductor = bool(calls)
                child.key, child.starts_key = Key("other", cid, OTHER_BACKWARD, "backward"), True
                _classify_graph(child, ctx, cid, inductor, "backward")
            else:
                child.key = autograd
                todo.append(child)
    return seen


def _classify_call(call: _Node, ctx: Context, function: str, regions: list[str], phase: str) -> None:
    entered = any(n.name.startswith(REGION) for n in _walk(call))
    if phase == "optimizer":
        call_key = Key("optimizer", None, f"optimizer step {call.name[len(OPTIMIZER_STEP) :]}", phase)
    elif entered:
        call_key = Key("other", None, OTHER_CALL, phase)
    else:
        call_key = Key("eager", None, ctx.frame_label(function), phase)
    call.key, call.starts_key = call_key, True
    _classify_under(call, ctx, regions, phase, call_key)


def _classify_under(top: _Node, ctx: Context, regions: list[str], phase: str, eager_key: Key) -> None:
    """Classify every range under `top` (a compiled call): lookups, regions, graphs, kernels, ops."""
    # (node, region compile id, graph compile id or None, inductor graph, key of the region's eager
    # code, the graph call's extern-call counter)
    todo: list[tuple[_Node, str | None, str | None, bool, Key, Counter | None]] = [
        (top, None, None, False, eager_key, None)
    ]
    while todo:
        node, region, graph, inductor, eager, counter = todo.pop()
        for i, child in enumerate(node.children):
            c_region, c_graph, c_inductor, c_eager, c_counter = region, graph, inductor, eager, counter
            name = child.name
            key: Key | None = None
            if name == LOOKUP:
                following = node.children[i + 1].name if i + 1 < len(node.children) else ""
                cid = following[len(REGION) :] if following.startswith(REGION) else None
                key = Key("guards", cid, "Dynamo cache lookup (guard evaluation)", phase)
            elif name.startswith(REGION):
                c_region, c_graph = name[len(REGION) :], None
                regions.append(c_region)
                label = ctx.eager_label(c_region)
                c_eager = (
                    Key("eager", c_region, label, phase)
                    if label
                    else Key("other", c_region, OTHER_FRAME, phase)
                )
                key = c_eager
            elif name == PROLOGUE:
                key = Key("other", region, OTHER_PROLOGUE, phase)
            elif name.startswith(GRAPH_SPAN) or (name.startswith(INDUCTOR_CALL) and graph is None):
                c_graph = name[len(GRAPH_SPAN) :] if name.startswith(GRAPH_SPAN) else region
                c_inductor = inductor or any(n.name.startswith(INDUCTOR_CALL) for n in _walk(child))
                c_counter = Counter()
                key = Key("other", c_graph, OTHER_WRAPPER, phase)
            else:
                key = _graph_key(child, node, graph, inductor, eager, phase, ctx, counter)
            if key is None:
                child.key = node.key
            else:
                child.key, child.starts_key = key, True
            todo.append((child, c_region, c_graph, c_inductor, c_eager, c_counter))


def _classify_graph(top: _Node, ctx: Context, graph: str | None, inductor: bool, phase: str) -> None:
    """Classify the ranges of one compiled graph's call (a backward graph's): kernels and ops."""
    counter: Counter = Counter()
    todo = [top]
    while todo:
        node = todo.pop()
        for child in node.children:
            eager = top.key or Key("other", graph, OTHER_BACKWARD, phase)
            key = _graph_key(child, node, graph or "?", inductor, eager, phase, ctx, counter)
            if key is None:
                child.key = node.key
            else:
                child.key, child.starts_key = key, True
            todo.append(child)
    if graph is None:  # the compile is not known: its kernels and ops are named, not placed
        for n in _walk(top):
            if n.key is not None and n.key.compile_id == "?":
                n.key = Key(n.key.part, None, n.key.name, n.key.phase, n.key.site)


def _graph_key(
    child: _Node,
    node: _Node,
    graph: str | None,
    inductor: bool,
    eager: Key,
    phase: str,
    ctx: Context,
    counter: Counter | None,
) -> Key | None:
    """A range under a graph's call (or under eager code): its key, or None when it belongs to its
    parent (a wrapper, a runtime call, an op inside a kernel or an extern call)."""
    name = child.name
    if graph is not None and name.startswith(WRAPPERS):
        return None  # inherits the graph's wrapper key
    if _RUNTIME.match(name):
        return None  # a CUDA runtime call belongs to what made it
    if is_op(name):
        if node.key is not None and node.key.part in ("kernel", "extern", "graph_op") and node.name != name:
            return None  # an op inside a kernel or an extern call is part of it
        if graph is not None:
            site = None
            if inductor and counter is not None:
                site = ctx.extern_site(graph, phase == "backward", name, counter[name])
                counter[name] += 1
            return Key("extern" if inductor else "graph_op", graph, name, phase, site)
        if node.key is not None and node.key.part == "eager" and is_op(node.name):
            return None  # an op called by an eager op is part of it
        return eager
    if graph is not None and (node.key is None or node.key.part == "other"):
        return Key("kernel", graph, kernel_name(name), phase)
    return None


def _piece(pieces: dict[Key, Piece], key: Key) -> Piece:
    piece = pieces.get(key)
    if piece is None:
        piece = pieces[key] = Piece(key)
    return piece


def _self_intervals(
    root: _Node, pieces: dict[Key, Piece], spans: list[Span], launch_ns: dict[str, int]
) -> list[tuple[int, int, Key]]:
    """Each range's own time (outside its children), with its key; they partition the window.
    Also counts launches, kernels' own time, eager ops, and makes the trace's labelled spans."""
    out: list[tuple[int, int, Key]] = []
    todo: list[tuple[_Node, _Node | None]] = [(root, None)]
    while todo:
        node, parent = todo.pop()
        key = node.key or Key("other", None, OTHER_CALL)
        piece = _piece(pieces, key)
        if node.starts_key:
            piece.launches += 1
            if key.part in ("kernel", "extern", "graph_op"):
                piece.cpu_own_ns += node.end - node.start
        counted = key.part in COUNTED_PARTS and is_op(node.name)
        if counted and not (parent is not None and is_op(parent.name)):
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
    if name == STEP_SPAN:
        return "step"
    if name == CALL_SPAN or name.startswith(CALL_SPAN + " "):
        return "call" if name == CALL_SPAN else f"call {name[len(CALL_SPAN) + 1 :]}"
    if name == BACKWARD_SPAN:
        return "backward"
    if name == BACKWARD_NODE:
        return f"backward graph {key.compile_id or '?'}"
    if name.startswith(OPTIMIZER_STEP):
        return f"optimizer: {name[len(OPTIMIZER_STEP) :]}"
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
    replayed: bool  # launched by cudaGraphLaunch (a CUDA-graph replay)
    key: Key | None = None
    starts_call: bool = False  # a replayed kernel that counts as one call of its key (no CPU range did)


def _device_rows(event: dict[str, Any], names: list[Any], by_index: dict[int, _Node]) -> list[_DeviceRow]:
    out = []
    for row in event.get("device") or []:
        if not (isinstance(row, list) and len(row) >= 5 and all(bounded(v) is not None for v in row[:5])):
            continue
        launcher = by_index.get(row[4])
        if launcher is None or not row[0] < len(names):
            continue
        replayed = len(row) > 5 and row[5] == 1
        out.append(
            _DeviceRow(str(names[row[0]]), row[1], row[1] + row[2], row[3], launcher, replayed, launcher.key)
        )
    return out


def _rekey_replays(device: list[_DeviceRow], ctx: Context) -> None:
    """Kernels a CUDA-graph replay ran have no op of their own on the CPU (one cudaGraphLaunch ran
    them all): each goes to its graph's kernel of that name, and a kernel the graph did not generate
    (cuBLAS, cuDNN) to the graph's extern calls, in the order the output code makes them (kernels
    between two generated ones belong to the extern calls between them; several kernels of one
    extern call stay with it)."""
    by_launch: dict[int, list[_DeviceRow]] = {}
    for row in device:
        if row.replayed:
            by_launch.setdefault(id(row.launcher), []).append(row)
    for rows in by_launch.values():
        rows.sort(key=lambda r: r.start)
        launcher_key = rows[0].key or Key("other", None, OTHER_CALL)
        cid = launcher_key.compile_id
        if cid is None:
            continue
        backward = launcher_key.phase == "backward"
        kernels, externs = ctx.module(cid, backward)
        pending = list(externs)
        last: tuple[str, str | None] | None = None
        for row in rows:
            name = kernel_name(row.name)
            if name in kernels:
                row.key, row.starts_call = Key("kernel", cid, name, launcher_key.phase), True
                continue
            row.starts_call = bool(pending)
            if pending:
                last = pending.pop(0)
            if last is not None:
                row.key = Key("extern", cid, last[0], launcher_key.phase, last[1])


def _overlay_device(
    cpu: list[tuple[int, int, Key]],
    device: list[_DeviceRow],
    pieces: dict[Key, Piece],
    spans: list[Span],
    origin: int,
) -> int:
    """On a GPU: while the device runs kernels the time is theirs (split between kernels that overlap);
    while it is idle, the time is what the CPU was doing. Returns the device's busy time."""
    end = max((e for _, e, _ in cpu), default=origin)
    for row in device:
        key = row.key or Key("other", None, OTHER_CALL)
        piece = _piece(pieces, key)
        piece.device_ns += row.end - row.start
        piece.device_kernels[row.name] += 1
        piece.device_kernel_ns[row.name] += row.end - row.start
        piece.replayed += int(row.replayed)
        piece.launches += int(row.starts_call)
        spans.append(
            Span(row.name, key.part, row.start, row.end - row.start, f"device {row.stream}", key.compile_id)
        )
    bounds = sorted({t for s, e, _ in cpu for t in (s, e)} | {t for r in device for t in (r.start, r.end)})
    cpu_at = _Cursor([(s, e, k) for s, e, k in cpu])
    active = sorted(device, key=lambda r: r.start)
    running: list[_DeviceRow] = []
    busy = 0
    j = 0
    for a, b in itertools.pairwise(bounds):
        while j < len(active) and active[j].start <= a:
            running.append(active[j])
            j += 1
        running = [r for r in running if r.end > a]
        if running:
            if a < end:
                busy += min(b, end) - a
            share = (b - a) / len(running)
            for r in running:
                _piece(pieces, r.key or Key("other", None, OTHER_CALL)).ns += round(share)
        else:
            at = cpu_at.at(a)
            if at is not None:
                _piece(pieces, at).ns += b - a
    return busy


class _Cursor:
    """The CPU key active at increasing instants (the intervals partition the window)."""

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
