"""The codegen view's facts: every generated kernel, extern calls, the wrapper `call()` annotated,
and buffer lifetimes — read off Inductor's output code (`inductor_output_code` in the trace,
or the CUDA preview's wrapper), with provenance from the trace when it was recorded.

Pure and torch-free; works on live runs, saved recordings and TORCH_TRACE logs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tcx import __version__
from tcx.core.analysis import RunModel
from tcx.core.frames import innermost_user_frame, parse_stack_trace
from tcx.core.graphs_view import human_bytes

SCHEMA = "tcx.codegen/1"

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
_DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "float64": 8,
    "double": 8,
    "int64": 8,
    "long": 8,
    "int32": 4,
    "int": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "complex64": 8,
}
_NAME_KIND = {"poi": "pointwise", "red": "reduction", "per": "persistent reduction", "tem": "template"}
_NAME = re.compile(
    r"^(?P<backend>triton|cpp|cuda|halide|mps|pallas)_(?:(?P<cat>poi|red|per|tem|split_scan|scan)_)?"
    r"(?:fused_)?(?P<ops>.*?)(?:_(?P<n>\d+))?$"
)


@dataclass
class Kernel:
    name: str
    kind: str  # triton, cpp, template, ...
    compile_id: str | None
    graph: str  # forward, backward, inference
    source: str
    category: str  # pointwise, reduction, persistent reduction, template, C++ loop
    fused_ops: list[str]
    origins: dict[str, Any]
    ptx: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc = {
            "name": self.name,
            "kind": self.kind,
            "compile_id": self.compile_id,
            "graph": self.graph,
            "category": self.category,
            "fused_ops": self.fused_ops,
            "source": self.source,
            "origins": self.origins,
        }
        if self.ptx is not None:
            doc["ptx"] = self.ptx
        return doc


@dataclass
class Step:
    """One line of the wrapper's call() that matters: alloc, launch, extern, reuse, alias, del, return."""

    kind: str
    text: str
    line: int
    name: str | None = None  # kernel or extern function
    buffers: list[str] = field(default_factory=list)
    note: str = ""
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
class Wrapper:
    compile_id: str | None
    graph: str
    device: str  # cpu, cuda, cuda preview sm_90
    call_source: str
    steps: list[Step]
    launches: list[Step]
    buffers: list[Buffer]
    returns: list[str]
    inputs: list[str]

    @property
    def allocations(self) -> list[Buffer]:
        return [b for b in self.buffers if b.origin == "alloc"]

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "graph": self.graph,
            "device": self.device,
            "inputs": self.inputs,
            "returns": self.returns,
            "allocation_count": len(self.allocations),
            "allocated_bytes": sum(b.bytes or 0 for b in self.allocations),
            "reuse_count": sum(1 for b in self.buffers if b.origin == "reuse"),
            "launches": [s.name for s in self.launches],
            "steps": [s.to_json() for s in self.steps],
            "buffers": [b.to_json() for b in self.buffers],
            "source": self.call_source,
        }


@dataclass
class ExternCall:
    name: str
    compile_id: str | None
    graph: str
    text: str
    source_nodes: list[str]
    aten: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "compile_id": self.compile_id,
            "graph": self.graph,
            "call": self.text,
            "source_nodes": self.source_nodes,
            "aten": self.aten,
        }


@dataclass
class OutputCode:
    """One generated module: a graph's wrapper with its kernels, and the provenance maps."""

    compile_id: str | None
    graph: str
    source: str
    device: str
    node_map: dict[str, Any] = field(default_factory=dict)
    stack_traces: dict[str, Any] = field(default_factory=dict)
    ptx: dict[str, str] = field(default_factory=dict)
    seconds: float | None = None


@dataclass
class CodegenView:
    model: RunModel
    target: str  # "cpu" (what ran) or "cuda:sm_90" (preview)
    kernels: list[Kernel]
    extern_calls: list[ExternCall]
    wrappers: list[Wrapper]
    outputs: list[OutputCode]
    unavailable: str | None = None  # why the asked-for code is missing
    preview_errors: list[str] = field(default_factory=list)

    @property
    def is_preview(self) -> bool:
        return self.target.startswith("cuda:")

    @property
    def kernel_count(self) -> int:
        return len(self.kernels)


def graph_of(source: str) -> str:
    m = _AOT_ID.search(source[:400])
    aot = m.group("id") if m else ""
    for kind in ("forward", "backward", "inference"):
        if kind in aot:
            return kind
    return aot if aot else "inference"


def output_codes(model: RunModel) -> list[OutputCode]:
    """The output-code modules of the run, in order, each with the provenance emitted after it."""
    out: list[OutputCode] = []
    for ev in model.trace_events:
        if ev.name == "inductor_output_code" and ev.payload:
            device = (
                "cuda" if "empty_strided_cuda(" in ev.payload or "device_str='cuda'" in ev.payload else "cpu"
            )
            out.append(OutputCode(ev.compile_id, graph_of(ev.payload), ev.payload, device))
        elif ev.name.startswith("artifact:inductor_provenance_tracking") and ev.payload:
            target = next((o for o in reversed(out) if o.compile_id == ev.compile_id), None)
            if target is None:
                continue
            try:
                data = json.loads(ev.payload)
            except ValueError:
                continue
            if ev.name.endswith("node_mappings"):
                target.node_map = data if isinstance(data, dict) else {}
            else:
                target.stack_traces = data if isinstance(data, dict) else {}
    return out


def preview_codes(model: RunModel, arch: str | None) -> tuple[list[OutputCode], list[str], list[str]]:
    """(wrappers, errors, archs recorded) from the CUDA preview's `cuda_preview` events."""
    out, errors, archs = [], [], []
    for ev in getattr(model, "recorder_events", []):
        if ev.get("kind") != "cuda_preview":
            continue
        archs.append(str(ev.get("arch")))
        if arch and ev.get("arch") != arch:
            continue
        if ev.get("error"):
            errors.append(f"{ev.get('compile_id')} {ev.get('graph')}: {ev['error']}")
        if ev.get("source"):
            code = OutputCode(
                ev.get("compile_id"),
                ev.get("graph") or graph_of(ev["source"]),
                ev["source"],
                f"cuda preview {ev.get('arch')}",
                ptx=ev.get("ptx") or {},
                seconds=ev.get("seconds"),
            )
            out.append(code)
    return out, errors, list(dict.fromkeys(archs))


def build_codegen(
    model: RunModel,
    target: str = "cpu",
    *,
    graph: str | None = None,
    kernel: str | None = None,
) -> CodegenView:
    unavailable = None
    errors: list[str] = []
    if target.startswith("cuda:"):
        arch = target.split(":", 1)[1]
        outputs, errors, archs = preview_codes(model, arch)
        if not outputs:
            why = _feature_note(model, "cuda_preview")
            if why:
                unavailable = why
            elif archs:
                unavailable = f"this recording has a CUDA preview for {', '.join(archs)}, not {arch}"
            elif errors:
                unavailable = "the CUDA preview failed: " + errors[0]
            else:
                unavailable = "this recording has no CUDA preview (record it with --target cuda:sm_XX)"
    else:
        outputs = output_codes(model)
        if not outputs:
            unavailable = (
                "no Inductor output code was recorded (the run used another backend, "
                "or nothing compiled; run with --backend inductor)"
            )
    post_grad = post_grad_index(model)
    kernels: list[Kernel] = []
    externs: list[ExternCall] = []
    wrappers: list[Wrapper] = []
    for code in outputs:
        if graph and code.graph != graph:
            continue
        ks = parse_kernels(code, post_grad)
        wrapper = parse_wrapper(code, {k.name for k in ks})
        _attach_call_origins(ks, wrapper, code)
        kernels.extend(ks)
        wrappers.append(wrapper)
        externs.extend(
            ExternCall(s.name or "?", code.compile_id, code.graph, s.text, s.source_nodes, s.aten)
            for s in wrapper.launches
            if s.kind in ("extern", "fallback")
        )
    if kernel:
        kernels = [k for k in kernels if k.name == kernel or kernel in k.name]
    return CodegenView(model, target, kernels, externs, wrappers, outputs, unavailable, errors)


def _feature_note(model: RunModel, prefix: str) -> str | None:
    features = (model.run_start or {}).get("features") or {}
    for name, why in features.items():
        if name.split("=")[0] == prefix and why:
            return str(why)
    return None


# --- kernels -------------------------------------------------------------------------------------


def kernel_definitions(source: str) -> list[tuple[str, str, str, str]]:
    """(name, async_compile kind, kernel source, comment block above it) for a module."""
    out = []
    for m in _KERNEL_DEF.finditer(source):
        header = []
        lines = source[: m.start()].splitlines()
        for line in reversed(lines):
            if line.startswith("#"):
                header.append(line)
            elif line.strip() or header:
                break
        out.append((m.group("name"), m.group("kind"), m.group("src"), "\n".join(reversed(header))))
    return out


def count_kernels(source: str) -> int:
    return len(kernel_definitions(source))


def parse_kernels(code: OutputCode, post_grad: dict[str, dict[str, Any]]) -> list[Kernel]:
    kernels = []
    for name, kind, src, header in kernel_definitions(code.source):
        if kind in ("cpp", "cpp_pybinding"):
            kkind = "cpp"
        elif kind == "triton" and "triton_heuristics.template(" in src:
            kkind = "template"
        elif kind == "cuda":
            kkind = "cuda_template"
        else:
            kkind = kind
        category, ops = decode_name(name)
        origins: dict[str, Any] = {
            "post_grad_nodes": [],
            "aten_ops": [],
            "source_nodes": [],
            "user_lines": [],
        }
        m = _SOURCE_NODES.search(header)
        if m:
            origins["source_nodes"] = _split_list(m.group("nodes"))
            origins["aten_ops"] = _split_list(m.group("aten"))
        for key, nodes in (code.node_map.get("cppCodeToPost") or {}).items():
            if key.rsplit(":", 1)[0] == name:
                origins["post_grad_nodes"] = list(nodes)
        for key, traces in code.stack_traces.items():
            if key.rsplit(":", 1)[0] == name:
                origins["user_lines"] = _user_lines(traces)
        _fill_from_post_grad(origins, post_grad.get(code.compile_id or "", {}))
        if category == "?" and kkind == "cpp":
            category = "C++ loop (reduction)" if "reduction" in src or "tmp_acc" in src else "C++ loop"
        kernels.append(
            Kernel(
                name=name,
                kind=kkind,
                compile_id=code.compile_id,
                graph=code.graph,
                source=src.strip("\n"),
                category=category,
                fused_ops=ops,
                origins=origins,
                ptx=code.ptx.get(name),
            )
        )
    return kernels


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


def _user_lines(traces: Any) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for text in traces if isinstance(traces, list) else [traces]:
        entry = innermost_user_frame(parse_stack_trace(str(text)))
        if entry is not None and entry not in lines:
            lines.append(entry)
    return sorted(lines, key=lambda e: (e["file"], e["line"]))


def post_grad_index(model: RunModel) -> dict[str, dict[str, Any]]:
    """compile_id -> post-grad node name -> {"op", "line": {file, line, code}} from the post-grad graphs."""
    from tcx.core.graphs_view import parse_graph_nodes

    index: dict[str, dict[str, Any]] = {}
    for ev in model.trace_events:
        if ev.name == "artifact:inductor_post_grad_graph" and ev.payload:
            nodes = index.setdefault(ev.compile_id or "", {})
            for node in parse_graph_nodes(ev.payload):
                nodes.setdefault(node["name"], node)
    return index


def _fill_from_post_grad(origins: dict[str, Any], nodes: dict[str, Any]) -> None:
    names = origins["post_grad_nodes"] or origins["source_nodes"]
    if not origins["aten_ops"]:
        ops = [nodes[n]["op"] for n in names if n in nodes and nodes[n].get("op")]
        origins["aten_ops"] = list(dict.fromkeys(ops))
    if not origins["user_lines"]:
        lines = [nodes[n]["user_line"] for n in names if n in nodes and nodes[n].get("user_line")]
        uniq: list[dict[str, Any]] = []
        for entry in lines:
            if entry not in uniq:
                uniq.append(entry)
        origins["user_lines"] = uniq


def _attach_call_origins(kernels: list[Kernel], wrapper: Wrapper, code: OutputCode) -> None:
    """Kernels without a header comment (C++) take the source-node comment of their launch."""
    by_name = {k.name: k for k in kernels}
    for step in wrapper.launches:
        k = by_name.get(step.name or "")
        if k is None:
            continue
        if not k.origins["source_nodes"] and step.source_nodes:
            k.origins["source_nodes"] = step.source_nodes
        if not k.origins["aten_ops"] and step.aten:
            k.origins["aten_ops"] = step.aten
        if step.handle and not k.origins["user_lines"]:
            k.origins["user_lines"] = _user_lines(code.stack_traces.get(step.handle) or [])


# --- the wrapper ---------------------------------------------------------------------------------


def call_body(source: str) -> tuple[str, list[tuple[int, str]]]:
    """The text of `def call(...)` and its body lines (line number in the module, stripped text)."""
    # the last call() is the graph's (earlier ones may belong to subgraphs)
    m = next(reversed(list(_CALL_DEF.finditer(source))), None)
    if m is None:
        return "", []
    indent = len(m.group("indent").expandtabs())
    start_line = source.count("\n", 0, m.start()) + 1
    lines = source[m.start() :].splitlines()
    body = [lines[0]]
    for line in lines[1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    while body and not body[-1].strip():
        body.pop()
    numbered = [(start_line + i, line.strip()) for i, line in enumerate(body) if i > 0 and line.strip()]
    return "\n".join(body), numbered


def parse_wrapper(code: OutputCode, kernel_names: set[str]) -> Wrapper:
    text, lines = call_body(code.source)
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
            buf = Buffer(m.group("buf"), m.group("buf"), shape, dtype, _nbytes(shape, dtype))
            buffers[buf.name] = buf
            steps.append(Step("alloc", line, lineno, buffers=[buf.name], note=_size_note(buf)))
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
            steps.append(
                Step("reuse", line, lineno, buffers=[new, old], note=f"{new} takes over {old}'s memory")
            )
            continue
        m = _ALIAS.match(line)
        if m and m.group("src") in buffers:
            src = buffers[m.group("src")]
            buffers[m.group("new")] = Buffer(m.group("new"), src.storage, origin="view")
            steps.append(
                Step("alias", line, lineno, buffers=[m.group("new"), src.name], note=f"a view of {src.name}")
            )
            continue
        m = _DEL.match(line)
        if m:
            names = [n.strip() for n in m.group("names").split(",") if n.strip()]
            for n in names:
                if n in buffers and not buffers[n].end:
                    buffers[n].end = "del"
            steps.append(Step("del", line, lineno, buffers=names, note="freed" if names else ""))
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
    return Wrapper(
        compile_id=code.compile_id,
        graph=code.graph,
        device=code.device,
        call_source=text,
        steps=steps,
        launches=launches,
        buffers=ordered,
        returns=returns,
        inputs=inputs,
    )


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


def _nbytes(shape: list[str], dtype: str) -> int | None:
    size = _DTYPE_BYTES.get(dtype)
    if size is None:
        return None
    n = 1
    for s in shape:
        if not s.lstrip("-").isdigit():
            return None
        n *= int(s)
    return n * size


def _size_note(buf: Buffer) -> str:
    shape = "x".join(buf.shape or []) or "scalar"
    size = human_bytes(buf.bytes) if buf.bytes is not None else "symbolic size"
    return f"{shape} {buf.dtype} ({size})"


# --- lifetimes -----------------------------------------------------------------------------------


@dataclass
class LifetimeRow:
    name: str
    storage: str
    label: str
    first: int
    last: int
    end: str  # del, reused, returned, live, input


def lifetimes(wrapper: Wrapper) -> list[LifetimeRow]:
    """One row per buffer used by a launch: from its first to its last launch (to the end if returned)."""
    n = len(wrapper.launches)
    rows = []
    for b in wrapper.buffers:
        if b.first is None:
            if b.end == "returned" and b.origin in ("view", "reuse"):
                first = n - 1
            else:
                continue
        else:
            first = b.first
        last = n - 1 if b.end == "returned" else (b.last if b.last is not None else first)
        label = b.name
        if b.origin == "reuse":
            label = f"{b.name} = {b.storage}"
        elif b.origin == "view":
            label = f"{b.name} (view of {b.storage})"
        elif b.origin == "input":
            label = f"{b.name} (input)"
        rows.append(LifetimeRow(b.name, b.storage, label, max(first, 0), max(last, 0), b.end or b.origin))
    return rows


def device_envelope(schema: str, model: RunModel, target: str, unavailable: str | None) -> dict[str, Any]:
    """The keys the codegen and fusion documents start with: which device's code, preview or real."""
    return {
        "schema": schema,
        "tcx_version": __version__,
        "torch_version": model.torch_version,
        "target": target,
        "preview": target.startswith("cuda:"),
        "unavailable": unavailable,
    }


def to_json(view: CodegenView) -> dict[str, Any]:
    return {
        **device_envelope(SCHEMA, view.model, view.target, view.unavailable),
        "kernel_count": view.kernel_count,
        "kernels": [k.to_json() for k in view.kernels],
        "extern_calls": [e.to_json() for e in view.extern_calls],
        "wrappers": [w.to_json() | {"lifetimes": [r.__dict__ for r in lifetimes(w)]} for w in view.wrappers],
        "preview_errors": view.preview_errors,
        "preview_seconds": [o.seconds for o in view.outputs if o.seconds is not None],
    }
