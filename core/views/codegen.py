"""The codegen view's facts: every generated kernel, extern calls, the wrapper `call()` annotated,
and buffer lifetimes — read off Inductor's output code (`inductor_output_code` in the trace,
or the CUDA preview's wrapper), with provenance from the trace when it was recorded.

Pure and torch-free; works on live runs, saved recordings and TORCH_TRACE logs.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tcx.core.analysis.preview_notes import (
    graph_devices,
    graph_differences,
    preview_device,
    preview_notes,
    recorded_preview,
    resolve_device,
)
from tcx.core.frames import innermost_user_frame, parse_stack_trace
from tcx.core.ingest.event_schema import seconds
from tcx.core.ingest.lazy_items import LazyItems, stream
from tcx.core.model import RunModel
from tcx.core.model.generated_code import GeneratedModule
from tcx.core.selection import Selection, whole_run
from tcx.core.torchtext import dtypes
from tcx.core.torchtext.dtypes import human_bytes
from tcx.core.torchtext.fx_graph import FxNode, parse_graph_nodes
from tcx.core.torchtext.output_code import (
    Buffer,
    Step,
    code_device,
    decode_name,
    graph_of,
    kernel_definitions,
    kernel_kind,
    parse_call,
    source_nodes,
)
from tcx.core.views.envelope import envelope

SCHEMA = "tcx.codegen/1"


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
    source_nodes: list[str]  # the nodes Inductor lists for the call: its input chain, then its own
    aten: list[str]
    node: str | None = None  # the post-grad node it computes (mm, addmm, bmm, ...)
    user_line: dict[str, Any] | None = None  # that node's line: the op's own, not its inputs'
    flops: int | None = None  # 2·M·N·K of a matmul, from that node's shapes (None: not a matmul or symbolic)
    dtype: str | None = None  # the node's output dtype, torch's name (bfloat16)
    handle: str | None = None  # Inductor's provenance debug handle (extern_kernels.mm:4), when logged

    @property
    def site(self) -> str | None:
        """How tcx names the call among its graph's: its node, else its debug handle."""
        return self.node or self.handle

    @property
    def op(self) -> str:
        """The ATen op as the profiler names its range (extern_kernels.mm -> aten::mm)."""
        return profiler_op(self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "compile_id": self.compile_id,
            "graph": self.graph,
            "call": self.text,
            "source_nodes": self.source_nodes,
            "aten": self.aten,
            "node": self.node,
            "user_line": self.user_line,
            "flops": self.flops,
            "handle": self.handle,
        }


def profiler_op(name: str) -> str:
    """The profiler's name for the ATen op a wrapper line calls: extern_kernels.mm -> aten::mm,
    torch.ops.aten._foo.default -> aten::_foo."""
    if name.startswith("extern_kernels."):
        return "aten::" + name[len("extern_kernels.") :]
    parts = name.split(".")
    if "aten" in parts[:-1]:
        op = parts[parts.index("aten") + 1]
        return f"aten::{op}"
    return name


def extern_call(step: Step, code: OutputCode, nodes: dict[str, FxNode]) -> ExternCall:
    """One extern call of a wrapper, with the graph node it computes: the provenance map's node for its
    debug handle, else the last of its source nodes whose op is the call's (Inductor lists the call's
    whole input chain, so the first ones are other ops' nodes), and that node's line and FLOPs."""
    call = ExternCall(step.name or "?", code.compile_id, code.graph, step.text, step.source_nodes, step.aten)
    call.handle = step.handle
    op = call.op.removeprefix("aten::")
    mapped = (code.node_map.get("cppCodeToPost") or {}).get(step.handle or "") or []
    candidates = [n for n in reversed(step.source_nodes) if _op_name(nodes.get(n)) == op]
    call.node = next((n for n in mapped if isinstance(n, str)), None) or (
        candidates[0] if candidates else None
    )
    traces = code.stack_traces.get(step.handle or "") if step.handle else None
    lines = _user_lines(traces) if traces else []
    node = nodes.get(call.node or "")
    call.user_line = lines[0] if lines else (node.user_line if node else None)
    call.flops = matmul_flops(node, nodes) if node else None
    call.dtype = dtypes.full_name(node.type.dtype) if node and node.type else None
    return call


def _extern_note(call: ExternCall) -> str:
    """What an extern line computes: its own node and line (its source nodes list its inputs too)."""
    line = call.user_line or {}
    where = f" at {os.path.basename(str(line['file']))}:{line.get('line')}" if line.get("file") else ""
    return f"computes {call.node}{where}" if call.node else (f"computes{where}" if where else "")


def _op_name(node: FxNode | None) -> str | None:
    """aten.mm.default -> mm."""
    if node is None or not node.op:
        return None
    parts = node.op.split(".")
    return parts[1] if len(parts) >= 2 and parts[0] == "aten" else None


def matmul_flops(node: FxNode, nodes: dict[str, FxNode]) -> int | None:
    """2·M·N·K of an mm, addmm or bmm node: its output's shape and its first matrix's inner size."""
    op = _op_name(node)
    first = {"mm": 0, "bmm": 0, "addmm": 1, "baddbmm": 1}.get(op or "")
    out = node.type
    if first is None or out is None or len(node.args) <= first:
        return None
    a = nodes.get(node.args[first])
    a_type = a.type if a else None
    if a_type is None or not a_type.shape:
        return None
    try:
        sizes = [int(d) for d in out.shape] + [int(a_type.shape[-1])]
    except ValueError:
        return None  # a symbolic size
    total = 2
    for d in sizes:
        total *= d
    return total


@dataclass
class OutputCode:
    """One generated module: a graph's wrapper with its kernels, and the provenance maps."""

    compile_id: str | None
    graph: str
    code: str | GeneratedModule  # the module's code, or the module of the run it is read from when asked
    device: str
    node_map: dict[str, Any] = field(default_factory=dict)
    stack_traces: dict[str, Any] = field(default_factory=dict)
    ptx: dict[str, str] = field(default_factory=dict)
    seconds: float | None = None

    @property
    def source(self) -> str:
        """The code: a run's module is read from the log each time (a view of a large log holding
        every module's code held hundreds of MB; the reader keeps the last few read)."""
        return self.code if isinstance(self.code, str) else self.code.source


@dataclass
class CodeSection:
    """One generated module, parsed: its wrapper, its kernels (those `--kernel` asked for) and
    the extern calls the wrapper makes."""

    wrapper: Wrapper
    kernels: list[Kernel]
    extern_calls: list[ExternCall]


@dataclass
class CodegenView:
    model: RunModel
    selection: Selection
    device: str  # "run" (the code of what ran) or "cuda:sm_90" (a CUDA preview)
    # one per selected module, parsed when first read (core/ingest/lazy_items.py): printing streams
    sections: Sequence[CodeSection]
    outputs: list[OutputCode]
    unavailable: str | None = None  # why the asked-for code is missing
    preview_errors: list[str] = field(default_factory=list)
    preview_notes: dict[str, Any] | None = (
        None  # core/analysis/preview_notes: assumptions, GPU-only decisions
    )

    @property
    def is_preview(self) -> bool:
        return self.device.startswith("cuda:")

    @property
    def kernels(self) -> list[Kernel]:
        return [k for s in self.sections for k in s.kernels]

    @property
    def extern_calls(self) -> list[ExternCall]:
        return [e for s in self.sections for e in s.extern_calls]

    @property
    def wrappers(self) -> list[Wrapper]:
        return [s.wrapper for s in self.sections]

    @property
    def kernel_count(self) -> int:
        return len(self.kernels)

    def counts_by_compile(self) -> tuple[Counter[str | None], Counter[str | None]]:
        """Kernels and extern calls per compile id, in one pass that keeps no parsed section (the
        report's overview of a 1 GB log would otherwise hold every compile's code, hundreds of MB)."""
        kernels: Counter[str | None] = Counter()
        externs: Counter[str | None] = Counter()
        for s in stream(self.sections):
            kernels.update(k.compile_id for k in s.kernels)
            externs.update(e.compile_id for e in s.extern_calls)
        return kernels, externs


def output_codes(model: RunModel) -> list[OutputCode]:
    """The output-code modules of the run, in order, each with the provenance emitted after it."""
    out: list[OutputCode] = []
    for module in model.generated_code.modules:
        source = module.source
        if source:
            node_map, stack_traces = module.provenance()
            code = OutputCode(module.compile_id, graph_of(source), module, code_device(source))
            code.node_map, code.stack_traces = node_map, stack_traces
            out.append(code)
    return out


def preview_codes(model: RunModel, arch: str | None) -> tuple[list[OutputCode], list[str], list[str]]:
    """(wrappers, errors, archs recorded) from the CUDA preview's `cuda_preview` events."""
    out: list[OutputCode] = []
    errors: list[str] = []
    archs: list[str] = []
    provenance = model.generated_code.provenance_by_compile()
    seen: dict[str, int] = {}
    for module in model.preview.modules:
        cid = module.compile_id or ""
        index = seen[cid] = seen.get(cid, -1) + 1
        logged = provenance.get(cid, [])
        maps = logged[index] if index < len(logged) else {}
        archs.append(str(module.arch))
        if arch and module.arch != arch:
            continue
        if module.error:
            errors.append(f"{module.compile_id} {module.graph}: {module.error}")
        if module.source:
            code = OutputCode(
                module.compile_id,
                module.graph or graph_of(module.source),
                module.source,
                # a module of CPU tensors in a preview is the CPU's code, not the GPU's
                f"cuda preview {module.arch}" if preview_device(module) == "cuda" else "cpu",
                node_map=maps.get("node_map") or {},
                stack_traces=maps.get("stack_traces") or {},
                ptx=dict(module.ptx),
                seconds=seconds(module.seconds),
            )
            out.append(code)
    return out, errors, list(dict.fromkeys(archs))


def build_codegen(
    model: RunModel,
    selection: Selection | None = None,
    *,
    device: str = "run",
    graph: str | None = None,
) -> CodegenView:
    selection = selection or whole_run(model)
    device = resolve_device(model, device)
    unavailable = None
    errors: list[str] = []
    if device.startswith("cuda:"):
        arch = device.split(":", 1)[1]
        outputs, errors, archs = preview_codes(model, arch)
        if not outputs:
            why = model.status.features.why("cuda_preview")
            if why:
                unavailable = why
            elif archs and arch not in archs:
                unavailable = f"this recording has a CUDA preview for {', '.join(archs)}, not {arch}"
            elif errors:
                unavailable = "the CUDA preview failed: " + errors[0]
            elif graph_devices(model)[1]:
                unavailable = (
                    f"no GPU code to show: the {graph_devices(model)[1]} graph(s) this program compiled "
                    "are of CPU tensors (above)"
                )
            elif recorded_preview(model):
                stopped = model.status.program.exit_status not in (None, "ok")
                unavailable = (
                    "Inductor generated no module: the program stopped before it compiled a graph "
                    "(where and why: above)"
                    if stopped
                    else "Inductor generated no module in this preview (nothing compiled with Inductor)"
                )
            else:
                unavailable = "this recording has no CUDA preview (record it with --target cuda:sm_XX)"
    else:
        outputs = output_codes(model)
        if not outputs:
            unavailable = (
                "no Inductor output code was recorded (the run used another backend, "
                "or nothing compiled; run with --backend inductor)"
            )
    post_grad = PostGradNodes(model)

    ordinal = _ordinals(outputs)

    def section(code: OutputCode) -> CodeSection:
        ks = parse_kernels(code, post_grad.of(code.compile_id))
        wrapper = parse_wrapper(code, {k.name for k in ks})
        _attach_call_origins(ks, wrapper, code)
        own = post_grad.module(code.compile_id, ordinal.get(id(code), 0))
        steps = [s for s in wrapper.launches if s.kind in ("extern", "fallback")]
        externs = [extern_call(s, code, own) for s in steps]
        for step, call in zip(steps, externs, strict=True):
            step.note = _extern_note(call)
        return CodeSection(wrapper, [k for k in ks if selection.shows_kernel(k.name)], externs)

    chosen = [c for c in outputs if not (graph and c.graph != graph) and selection.includes(c.compile_id)]
    outputs = [o for o in outputs if selection.includes(o.compile_id)]
    notes = preview_notes(model, device.split(":", 1)[1]) if device.startswith("cuda:") else None
    if notes:
        notes["decisions"] = [d for d in notes["decisions"] if selection.includes(d["compile_id"])]
    return CodegenView(
        model, selection, device, LazyItems(chosen, section), outputs, unavailable, errors, notes
    )


def _ordinals(outputs: list[OutputCode]) -> dict[int, int]:
    """Each module's place among its compile's modules (0 its forward or inference graph, 1 its
    backward): the post-grad graphs come in the same order."""
    seen: dict[str | None, int] = {}
    out = {}
    for code in outputs:
        out[id(code)] = seen[code.compile_id] = seen.get(code.compile_id, -1) + 1
    return out


# --- kernels -------------------------------------------------------------------------------------


def parse_kernels(code: OutputCode, post_grad: dict[str, FxNode]) -> list[Kernel]:
    kernels = []
    for name, kind, src, header in kernel_definitions(code.source):
        kkind = kernel_kind(kind, src)
        category, ops = decode_name(name)
        origins: dict[str, Any] = {
            "post_grad_nodes": [],
            "aten_ops": [],
            "source_nodes": [],
            "user_lines": [],
        }
        from_comment = source_nodes(header)
        if from_comment:
            origins["source_nodes"], origins["aten_ops"] = from_comment
        for key, nodes in (code.node_map.get("cppCodeToPost") or {}).items():
            if key.rsplit(":", 1)[0] == name:
                origins["post_grad_nodes"] = list(nodes)
        for key, traces in code.stack_traces.items():
            if key.rsplit(":", 1)[0] == name:
                origins["user_lines"] = _user_lines(traces)
        _fill_from_post_grad(origins, post_grad)
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


def _user_lines(traces: Any) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for text in traces if isinstance(traces, list) else [traces]:
        entry = innermost_user_frame(parse_stack_trace(str(text)))
        if entry is not None and entry not in lines:
            lines.append(entry)
    return sorted(lines, key=lambda e: (e["file"], e["line"]))


class PostGradNodes:
    """Per compile id, post-grad node name -> its node (op, user line), from the post-grad
    graphs; a compile's graphs are parsed when its code is. Only the last compile's are kept:
    a compile's modules (forward, backward) come one after the other, and a view printed
    compile by compile then holds one compile's graphs, not the whole run's."""

    def __init__(self, model: RunModel) -> None:
        self._graphs = model.graphs.post_grad
        self._last: tuple[str, dict[str, FxNode]] | None = None

    def module(self, compile_id: str | None, ordinal: int) -> dict[str, FxNode]:
        """The nodes of one post-grad graph of a compile (its forward, then its backward), whose names
        another graph of the compile may reuse."""
        graphs = self._graphs.get(compile_id or "", [])
        if ordinal >= len(graphs):
            return {}
        return {n.name: n for n in parse_graph_nodes(graphs[ordinal].text)}

    def of(self, compile_id: str | None) -> dict[str, FxNode]:
        cid = compile_id or ""
        if self._last is None or self._last[0] != cid:
            nodes: dict[str, FxNode] = {}
            for graph in self._graphs.get(cid, []):
                for node in parse_graph_nodes(graph.text):
                    nodes.setdefault(node.name, node)
            self._last = (cid, nodes)
        return self._last[1]


def _fill_from_post_grad(origins: dict[str, Any], nodes: dict[str, FxNode]) -> None:
    names = origins["post_grad_nodes"] or origins["source_nodes"]
    if not origins["aten_ops"]:
        ops = [nodes[n].op for n in names if n in nodes and nodes[n].op]
        origins["aten_ops"] = list(dict.fromkeys(ops))
    if not origins["user_lines"]:
        lines = [nodes[n].user_line for n in names if n in nodes]
        uniq: list[dict[str, Any]] = []
        for entry in lines:
            if entry and entry not in uniq:
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


def parse_wrapper(code: OutputCode, kernel_names: set[str]) -> Wrapper:
    """The module's `call()` (torchtext.output_code), each line that matters annotated."""
    call = parse_call(code.source, kernel_names)
    buffers = {b.name: b for b in call.buffers}
    for step in call.steps:
        step.note = _note(step, buffers)
    return Wrapper(
        compile_id=code.compile_id,
        graph=code.graph,
        device=code.device,
        call_source=call.source,
        steps=call.steps,
        launches=call.launches,
        buffers=call.buffers,
        returns=call.returns,
        inputs=call.inputs,
    )


def _note(step: Step, buffers: dict[str, Buffer]) -> str:
    if step.kind == "alloc" and step.buffers[0] in buffers:
        return _size_note(buffers[step.buffers[0]])
    if step.kind == "reuse":
        return f"{step.buffers[0]} takes over {step.buffers[1]}'s memory"
    if step.kind == "alias":
        return f"a view of {step.buffers[1]}"
    if step.kind == "del":
        return "freed" if step.buffers else ""
    return ""


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


def device_envelope(schema: str, view: CodegenView, unavailable: str | None) -> dict[str, Any]:
    """The envelope of the codegen and fusion documents: `device` is the device whose code is shown
    (a CUDA preview's `cuda:sm_XX`, or the device the generated code runs on)."""
    shown = view.device if view.is_preview else ",".join(dict.fromkeys(o.device for o in view.outputs))
    return {
        **envelope(schema, view.model, view.selection, device=shown or None),
        "preview": view.is_preview,
        "unavailable": unavailable,
    }


def wrapper_differences(view: CodegenView, w: Wrapper) -> list[dict[str, Any]]:
    """What may make this module of a preview differ from a GPU run's (core/analysis/preview_notes)."""
    if not view.preview_notes:
        return []
    return graph_differences(view.preview_notes, w.compile_id, w.graph)


def to_json(view: CodegenView) -> dict[str, Any]:
    return {
        **device_envelope(SCHEMA, view, view.unavailable),
        "kernel_count": view.kernel_count,
        "kernels": [k.to_json() for k in view.kernels],
        "extern_calls": [e.to_json() for e in view.extern_calls],
        "wrappers": [
            w.to_json()
            | {"lifetimes": [r.__dict__ for r in lifetimes(w)]}
            | ({"preview_differences": wrapper_differences(view, w)} if view.is_preview else {})
            for w in view.wrappers
        ],
        "preview_errors": view.preview_errors,
        "preview_notes": view.preview_notes,
        "preview_seconds": [o.seconds for o in view.outputs if o.seconds is not None],
    }
