"""AOTInductor compiles in a trace: the C++ wrapper and kernel code it wrote, and the provenance
from each kernel to the post-grad FX nodes it computes, their pre-grad nodes and the user's lines
(torch-free).

An AOTInductor compile (`aoti_compile_and_package`, `aot_compile`) logs its code as `graph_dump`
events (`inductor_aot_wrapper_code`, `inductor_aot_kernel_code`), not as `inductor_output_code`;
with provenance tracking on, Inductor logs `inductor_provenance_tracking_node_mappings`
(`preToPost`, `postToPre`, `cppCodeToPost` — kernel or extern call -> post-grad nodes —, and
`postToCppCode`; a `version` 2 map names kernels `name:debug_handle`) and, on newer torch,
`inductor_provenance_tracking_kernel_stack_traces` (kernel -> the user stacks it came from).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tcx.core.frames import innermost_user_frame, parse_stack_trace
from tcx.core.torchtext.fx_graph import parse_graph_nodes
from tcx.core.torchtext.json_object import json_object

PRE_GRAD_GRAPHS = (
    "artifact:before_pre_grad_graph",
    "inductor_pre_grad_graph",
    "artifact:after_pre_grad_graph",
)
EXTERN_PREFIXES = ("aoti_torch_", "extern_kernels.")


@dataclass
class AotiKernel:
    name: str
    kind: str  # "kernel" (generated: cpp_fused_*, triton_*) or "extern" (a library call)
    post_grad_nodes: list[str]
    pre_grad_nodes: list[str]
    user_lines: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class AotiCompile:
    """One AOTInductor compile: its code files and the kernels' provenance."""

    wrapper_file: str | None = None
    kernel_file: str | None = None
    wrapper_lines: int = 0
    kernel_code_lines: int = 0
    kernels: list[AotiKernel] = field(default_factory=list)
    provenance: bool = False  # a node-mappings artifact was logged
    export_index: int | None = None  # the live aoti_compile_and_package call it belongs to
    pre_grad: str = ""  # the pre-grad graph the mappings name nodes of

    @property
    def kernel_count(self) -> int:
        return sum(1 for k in self.kernels if k.kind == "kernel")

    @property
    def extern_count(self) -> int:
        return sum(1 for k in self.kernels if k.kind == "extern")

    def to_json(self) -> dict[str, Any]:
        return {
            "export_index": self.export_index,
            "wrapper_file": self.wrapper_file,
            "kernel_file": self.kernel_file,
            "wrapper_lines": self.wrapper_lines,
            "kernel_code_lines": self.kernel_code_lines,
            "provenance": self.provenance,
            "kernel_count": self.kernel_count,
            "extern_count": self.extern_count,
            "kernels": [k.to_json() for k in self.kernels],
        }


def add_code(compile_: AotiCompile, body: dict[str, Any], payload: str | None) -> None:
    """A `graph_dump` of AOTInductor's wrapper or kernel code."""
    lines = len((payload or "").splitlines())
    if body.get("name") == "inductor_aot_wrapper_code":
        compile_.wrapper_file, compile_.wrapper_lines = _text(body.get("filename")), lines
    else:
        compile_.kernel_file, compile_.kernel_code_lines = _text(body.get("filename")), lines


def add_mappings(compile_: AotiCompile, payload: str | None) -> None:
    """The node-mappings artifact: one AotiKernel per kernel or extern call it maps."""
    data = json_object(payload)
    code_to_post = data.get("cppCodeToPost") or data.get("tritonKernelToPost") or {}
    post_to_pre = data.get("postToPre") or {}
    if not isinstance(code_to_post, dict):
        return
    compile_.provenance = True
    pre_lines = {n.name: n.user_line for n in parse_graph_nodes(compile_.pre_grad) if n.user_line}
    compile_.kernels = []
    for key, posts in code_to_post.items():
        name = str(key).split(":", 1)[0]  # `name:debug_handle` in version 2 maps
        posts = [str(p) for p in posts or []]
        pres = list(dict.fromkeys(str(q) for p in posts for q in post_to_pre.get(p) or []))
        lines = list({(ln["file"], ln["line"]): ln for ln in (pre_lines.get(p) for p in pres) if ln}.values())
        kind = "extern" if name.startswith(EXTERN_PREFIXES) else "kernel"
        compile_.kernels.append(AotiKernel(name, kind, posts, pres, lines))


def add_stack_traces(compile_: AotiCompile, payload: str | None) -> None:
    """Kernel -> the user stacks it came from (newer torch): each kernel's user lines from them."""
    data = json_object(payload)
    for kernel in compile_.kernels:
        stacks = next((v for k, v in data.items() if str(k).split(":", 1)[0] == kernel.name), None)
        if not isinstance(stacks, list):
            continue
        lines = [innermost_user_frame(parse_stack_trace(str(s).replace("\\n", "\n"))) for s in stacks]
        found = [ln for ln in lines if ln]
        if found:
            kernel.user_lines = list({(ln["file"], ln["line"]): ln for ln in found}.values())


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
