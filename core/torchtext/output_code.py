"""Inductor's output code (`inductor_output_code`, or a CUDA preview's wrapper module): its
kernels, the wrapper's `call()` line by line, launches and buffers.

    # kernel path: /tmp/.../cpp_fused_addmm_relu_0.py        (a comment block above each kernel)
    cpp_fused_addmm_relu_0 = async_compile.cpp_pybinding(['float*', ...], r'''...''')
    triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', '''...''', device_str='cuda')

    def call(args):                       (`def call(self, args):` in newer torch)
        primals_1, primals_2 = args
        buf0 = empty_strided_cpu((128, 64), (64, 1), torch.float32)
        # Topologically Sorted Source Nodes: [y], Original ATen: [aten.addmm]
        extern_kernels.mm(primals_1, primals_2, out=buf0)
        buf1 = buf0; del buf0  # reuse
        triton_poi_fused_relu_0.run(buf1, 8192, stream=stream0)
        return (buf1, primals_1, )

Structure only: what each line does and which buffers it touches; the words a view shows
about it are the view's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tcx.core.torchtext import dtypes

_KERNEL_DEF = re.compile(
    r"^(?P<name>[A-Za-z_]\w*) = async_compile\.(?P<kind>\w+)\((?P<pre>[^\n]*?)r?'''(?P<src>.*?)'''",
    re.S | re.M,
)
_AOT_ID = re.compile(r"#\s*AOT ID:\s*\[?'?(?P<id>[^'\]\n]*)")
_CALL_DEF = re.compile(r"^(?P<indent>[ \t]*)def call\((?:self, )?args\):\s*$", re.M)
_ALLOC = re.compile(
    r"^(?P<buf>\w+) = (?P<fn>empty_strided\w*)\(\((?P<shape>[^)]*)\),"
    r"\s*\((?P<stride>[^)]*)\),"
    r"\s*(?:torch\.)?(?P<dtype>\w+)"
)
_REUSE = re.compile(r"^(?P<new>\w+) = (?P<old>\w+); del (?P=old)\s*#\s*reuse")
_ALIAS = re.compile(r"^(?P<new>\w+) = (?P<fn>reinterpret_tensor|alloc_from_pool|as_strided)\((?P<src>\w+)")
_DEL = re.compile(r"^del (?P<names>[\w, ]+)$")
_EXTERN = re.compile(r"^(?:(?P<lhs>[\w, ]+) = )?(?P<fn>extern_kernels\.\w+)\((?P<args>.*)\)\s*$")
_FALLBACK = re.compile(r"^(?:(?P<lhs>[\w, ]+) = )?(?P<fn>(?:torch\.ops\.)?aten\.[\w.]+)\((?P<args>.*)\)\s*$")
_LAUNCH = re.compile(r"^(?P<fn>[A-Za-z_]\w*)(?:\.run)?\((?P<args>.*)\)\s*$")
_SOURCE_NODES = re.compile(
    r"#\s*Topologically Sorted Source Nodes:\s*\[(?P<nodes>[^\]]*)\],\s*Original ATen:\s*\[(?P<aten>[^\]]*)\]"
)
_HANDLE = re.compile(r"#\s*\[Provenance debug handles\]\s*(?P<handle>[\w.]+:\d+)")
_WORD = re.compile(r"\b[A-Za-z_]\w*\b")
_NAME_KIND = {"poi": "pointwise", "red": "reduction", "per": "persistent reduction", "tem": "template"}
_NAME = re.compile(
    r"^(?P<backend>triton|cpp|cuda|halide|mps|pallas)_(?:(?P<cat>poi|red|per|tem|split_scan|scan)_)?"
    r"(?:fused_)?(?P<ops>.*?)(?:_(?P<n>\d+))?$"
)


class KernelDef(NamedTuple):
    name: str
    kind: str  # what `async_compile.<kind>(...)` says: triton, cpp_pybinding, cuda, ...
    source: str
    header: str  # the comment block above the definition


def kernel_definitions(source: str) -> list[KernelDef]:
    """Every kernel a module defines, in order."""
    out = []
    for m in _KERNEL_DEF.finditer(source):
        header = []
        for line in _lines_before(source, m.start()):
            if line.startswith("#"):
                header.append(line)
            elif line.strip() or header:
                break
        out.append(KernelDef(m.group("name"), m.group("kind"), m.group("src"), "\n".join(reversed(header))))
    return out


def _lines_before(source: str, end: int) -> Iterator[str]:
    """The lines of source[:end] (`end` is a line start), last first, without splitting all of it:
    a module defines many kernels, each preceded by its comment."""
    stop = end
    while stop > 0:
        stop -= 1  # the newline that ends this line
        start = source.rfind("\n", 0, stop) + 1
        yield source[start:stop].rstrip("\r")
        stop = start


def count_kernels(source: str) -> int:
    return len(kernel_definitions(source))


def kernel_kind(async_kind: str, source: str) -> str:
    """What a kernel is: triton, template (a Triton template), cpp, cuda_template, ..."""
    if async_kind in ("cpp", "cpp_pybinding"):
        return "cpp"
    if async_kind == "triton" and "triton_heuristics.template(" in source:
        return "template"
    if async_kind == "cuda":
        return "cuda_template"
    return async_kind


def source_nodes(comment: str) -> tuple[list[str], list[str]] | None:
    """`# Topologically Sorted Source Nodes: [y, z], Original ATen: [aten.mm]` -> (nodes, ATen ops)."""
    m = _SOURCE_NODES.search(comment)
    return (_split_list(m.group("nodes")), _split_list(m.group("aten"))) if m else None


def code_device(source: str) -> str:
    """The device a module's code runs on: cuda or cpu."""
    return "cuda" if "empty_strided_cuda(" in source or "device_str='cuda'" in source else "cpu"


def graph_of(source: str) -> str:
    """forward, backward or inference: from the `# AOT ID:` comment at the top of the module."""
    m = _AOT_ID.search(source[:400])
    aot = m.group("id") if m else ""
    for kind in ("forward", "backward", "inference"):
        if kind in aot:
            return kind
    return aot if aot else "inference"


def decode_name(name: str) -> tuple[str, list[str]]:
    """`triton_poi_fused_add_relu_0` -> ("pointwise", ["add", "relu"]) (op names as Inductor wrote them)."""
    m = _NAME.match(name)
    if not m:
        return "?", []
    cat = m.group("cat")
    category = _NAME_KIND.get(cat or "", cat or "?")
    ops = [p for p in (m.group("ops") or "").split("_") if p]
    return category, _join_op_words(ops)


_KNOWN_MULTIWORD = (
    "threshold_backward",
    "native_layer_norm",
    "native_layer_norm_backward",
    "native_dropout",
    "scalar_tensor",
    "_softmax",
    "_log_softmax",
    "embedding_dense_backward",
    "gelu_backward",
    "silu_backward",
    "sigmoid_backward",
    "tanh_backward",
    "_to_copy",
    "index_put",
    "new_zeros",
    "mean_pow",
    "rsqrt",
    "slice_scatter",
    "select_scatter",
    "constant_pad_nd",
    "native_batch_norm_backward",
    "_native_batch_norm_legit_functional",
    "avg_pool2d_backward",
    "max_pool2d_with_indices_backward",
    "convolution_backward",
    "clamp_min",
    "clamp_max",
    "masked_fill",
    "full_like",
    "zeros_like",
    "ones_like",
    "scatter_add",
    "_unsafe_view",
    "_unsafe_index",
    "_safe_softmax",
)


def _join_op_words(words: list[str]) -> list[str]:
    known = sorted((k.strip("_").split("_") for k in _KNOWN_MULTIWORD), key=len, reverse=True)
    out, i = [], 0
    while i < len(words):
        for k in known:
            if len(k) > 1 and words[i : i + len(k)] == k:
                out.append("_".join(k))
                i += len(k)
                break
        else:
            out.append(words[i])
            i += 1
    return out


def _split_list(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


@dataclass
class Step:
    """One line of the wrapper's call() that matters: alloc, launch, extern, reuse, alias, del, return."""

    kind: str
    text: str
    line: int
    name: str | None = None  # kernel or extern function
    buffers: list[str] = field(default_factory=list)
    note: str = ""  # what a view says about the line (the parser leaves it empty)
    source_nodes: list[str] = field(default_factory=list)
    aten: list[str] = field(default_factory=list)
    handle: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "text": self.text,
            "line": self.line,
            "name": self.name,
            "buffers": self.buffers,
            "note": self.note,
            "source_nodes": self.source_nodes,
            "aten": self.aten,
        }


@dataclass
class Buffer:
    name: str
    storage: str  # the allocation it lives in (itself, or what it reuses / views)
    shape: list[str] | None = None
    dtype: str | None = None
    bytes: int | None = None
    origin: str = "alloc"  # alloc, reuse, view, input
    first: int | None = None  # index into launches
    last: int | None = None
    end: str = ""  # del, reused, returned, live

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "storage": self.storage,
            "shape": self.shape,
            "dtype": self.dtype,
            "bytes": self.bytes,
            "origin": self.origin,
            "first_launch": self.first,
            "last_launch": self.last,
            "end": self.end,
        }


@dataclass
class CallCode:
    """The wrapper's `call()`: its text, the lines that matter, the launches, the buffers."""

    source: str
    steps: list[Step]
    launches: list[Step]
    buffers: list[Buffer]
    returns: list[str]
    inputs: list[str]


def call_body(source: str) -> tuple[str, list[tuple[int, str]]]:
    """The text of `def call(...)` and its body lines (line number in the module, stripped text).

    With graph partitions (Inductor splits a graph where CUDA graphs cannot capture it), call()
    only hands each partition its arguments (`(buf0,) = self.partitions[0](partition0_args)`): that
    line stands for the body of the partition function it runs, in place, so the kernels and
    extern calls are listed in the order they run, each at its own line of the module."""
    # the last call() is the graph's (earlier ones may belong to subgraphs)
    m = next(reversed(list(_CALL_DEF.finditer(source))), None)
    if m is None:
        return "", []
    text, numbered = _def_body(source, m.start(), len(m.group("indent").expandtabs()))
    partitions = _partition_names(source)
    if not partitions:
        return text, numbered
    texts, lines = [text], []
    handed: set[str] = set()  # names call() put in a partition's argument list: the partition frees them
    for lineno, line in numbered:
        args = _PARTITION_ARGS.match(line)
        if args:
            handed |= {args.group("list")} | {n.strip() for n in args.group("names").split(",") if n.strip()}
            continue
        dels = _DEL.match(line)
        if dels and {n.strip() for n in dels.group("names").split(",") if n.strip()} <= handed:
            continue
        call = _PARTITION_CALL.match(line)
        index = int(call.group("index")) if call else len(partitions)
        name = partitions[index] if index < len(partitions) else None
        d = re.search(rf"^def {re.escape(name)}\(args\):\s*$", source, re.M) if name else None
        if d is None:
            lines.append((lineno, line))
            continue
        part_text, part_lines = _def_body(source, d.start(), 0)
        texts.append(part_text)
        lines.extend((n, ln) for n, ln in part_lines if not _PARTITION_OWN.match(ln))
    return "\n\n".join(texts), lines


# call()'s hand-over to a partition, the partitions in order, and a partition's own argument lines
_PARTITION_CALL = re.compile(r"^[\w(), ]*=\s*self\.partitions\[(?P<index>\d+)\]\(\w+\)\s*$")
_PARTITIONS = re.compile(r"^\w+ = Runner\(partitions=\[(?P<names>[\w, ]*)\]\)", re.M)
_PARTITION_ARGS = re.compile(r"^(?P<list>partition\d+_args) = \[(?P<names>[\w, ]*)\]$")
_PARTITION_OWN = re.compile(r"^(?:[\w, ]+ = args|args\.clear\(\)|return\b.*)$")


def _partition_names(source: str) -> list[str]:
    m = _PARTITIONS.search(source)
    return [n.strip() for n in m.group("names").split(",") if n.strip()] if m else []


def _def_body(source: str, start: int, indent: int) -> tuple[str, list[tuple[int, str]]]:
    """A `def` at `start` (indented `indent` columns): its text and its body's numbered lines."""
    start_line = source.count("\n", 0, start) + 1
    lines = source[start:].splitlines()
    body = [lines[0]]
    for line in lines[1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    while body and not body[-1].strip():
        body.pop()
    numbered = [(start_line + i, line.strip()) for i, line in enumerate(body) if i > 0 and line.strip()]
    return "\n".join(body), numbered


def parse_call(source: str, kernel_names: set[str]) -> CallCode:
    """The last `def call` of a module; `kernel_names` tells a kernel launch from other calls."""
    text, lines = call_body(source)
    steps: list[Step] = []
    launches: list[Step] = []
    buffers: dict[str, Buffer] = {}
    inputs: list[str] = []
    returns: list[str] = []
    pending_nodes: tuple[list[str], list[str]] = ([], [])
    pending_handle: str | None = None
    for lineno, line in lines:
        m = _SOURCE_NODES.match(line)
        if m:
            pending_nodes = (_split_list(m.group("nodes")), _split_list(m.group("aten")))
            continue
        m = _HANDLE.match(line)
        if m:
            pending_handle = m.group("handle")
            continue
        if line.startswith("#"):
            continue
        if line.endswith("= args") and not inputs:
            inputs = [n.strip() for n in line[: -len("= args")].split(",") if n.strip()]
            for n in inputs:
                buffers[n] = Buffer(n, n, origin="input")
            continue
        m = _ALLOC.match(line)
        if m:
            shape = [s.strip() for s in m.group("shape").split(",") if s.strip()]
            dtype = m.group("dtype")
            buf = Buffer(m.group("buf"), m.group("buf"), shape, dtype, dtypes.nbytes(shape, dtype))
            buffers[buf.name] = buf
            steps.append(Step("alloc", line, lineno, buffers=[buf.name]))
            continue
        m = _REUSE.match(line)
        if m:
            old, new = m.group("old"), m.group("new")
            prev = buffers.get(old)
            buffers[new] = Buffer(
                new,
                prev.storage if prev else old,
                prev.shape if prev else None,
                prev.dtype if prev else None,
                None,
                origin="reuse",
            )
            if prev:
                prev.end = "reused"
            steps.append(Step("reuse", line, lineno, buffers=[new, old]))
            continue
        m = _ALIAS.match(line)
        if m and m.group("src") in buffers:
            src = buffers[m.group("src")]
            buffers[m.group("new")] = Buffer(m.group("new"), src.storage, origin="view")
            steps.append(Step("alias", line, lineno, buffers=[m.group("new"), src.name]))
            continue
        m = _DEL.match(line)
        if m:
            names = [n.strip() for n in m.group("names").split(",") if n.strip()]
            for n in names:
                if n in buffers and not buffers[n].end:
                    buffers[n].end = "del"
            steps.append(Step("del", line, lineno, buffers=names))
            continue
        if line.startswith("return"):
            returns = [w for w in _WORD.findall(line[len("return") :]) if w in buffers]
            for n in returns:
                buffers[n].end = "returned"
            steps.append(Step("return", line, lineno, buffers=returns))
            continue
        step = _launch_step(line, lineno, kernel_names, buffers)
        if step is not None:
            step.source_nodes, step.aten = pending_nodes
            step.handle = pending_handle
            pending_nodes, pending_handle = ([], []), None
            index = len(launches)
            launches.append(step)
            steps.append(step)
            for n in step.buffers:
                b = buffers[n]
                b.first = index if b.first is None else b.first
                b.last = index
    _propagate_storage_use(buffers)
    ordered = [b for b in buffers.values() if b.origin != "input" or b.first is not None]
    return CallCode(text, steps, launches, ordered, returns, inputs)


def _launch_step(line: str, lineno: int, kernel_names: set[str], buffers: dict[str, Buffer]) -> Step | None:
    for kind, pattern in (("extern", _EXTERN), ("fallback", _FALLBACK), ("launch", _LAUNCH)):
        m = pattern.match(line)
        if not m:
            continue
        fn = m.group("fn")
        if kind == "launch" and fn not in kernel_names:
            return None
        used = [w for w in dict.fromkeys(_WORD.findall(m.group("args"))) if w in buffers]
        lhs = m.groupdict().get("lhs")
        if lhs:
            for n in (x.strip() for x in lhs.split(",")):
                if n and n not in buffers:
                    buffers[n] = Buffer(n, n, origin="alloc")  # allocated by the call itself
                if n:
                    used.append(n)
        return Step(kind, line, lineno, name=fn, buffers=list(dict.fromkeys(used)))
    return None


def _propagate_storage_use(buffers: dict[str, Buffer]) -> None:
    """A reused or viewed buffer's storage lives until the last use of any name on it."""
    for b in buffers.values():
        if b.end == "" and b.origin != "input":
            b.end = "live"
