"""Compatibility layer for AOTAutograd and Inductor captures (private torch APIs, feature-detected).

Installers for `core/recorder/captures.py`. Each returns None when installed or a one-line
reason ("... is not available on torch X.Y (...)") when this torch cannot provide it. Most
of what the graphs/fusion/codegen views show already comes from the structured trace
(aot_* graphs, inductor_post_grad_graph, inductor_output_code); these add what the trace
lacks:

    aot_graphs  the partitioner's own debug log (what it banned from recomputation, sizes)
    fusion      Inductor's fusion decisions (WhyNoFuse reasons as fields, not text) and the
                scheduler nodes before/after `Scheduler.fuse_nodes`, per graph
    codegen     provenance tracking (kernel <-> post-grad node <-> user line maps in the trace)
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import threading
from typing import Any

from tcx.core.frames import frame_origin, parse_stack_trace
from tcx.core.ingest.recording import RecordingWriter
from tcx.core.recorder.compat import current_compile_id, unavailable

MAX_NODES_PER_GRAPH = 2000
MAX_DECISIONS_PER_GRAPH = 4000


def graph_device() -> str | None:
    """The device type(s) of the graph being lowered ("cpu", "cuda")."""
    try:
        from torch._inductor.virtualized import V

        return ",".join(sorted(V.graph.device_types)) or None
    except Exception:
        return None


def graph_kind() -> str | None:
    """forward/backward/inference for the graph Inductor is lowering now (None outside one)."""
    try:
        from torch._inductor.virtualized import V

        graph = V.graph
    except Exception:  # no graph being lowered
        return None
    if getattr(graph, "is_backward", False):
        return "backward"
    if getattr(graph, "is_inference", False):
        return "inference"
    return "forward"


def install_aot_graphs(writer: RecordingWriter) -> str | None:
    """The partitioner's INFO log (banned ops, activation sizes, remat counts) as `log` events."""
    try:
        import torch._functorch.partitioners as parts
    except ImportError as exc:
        return unavailable("the partitioner debug log", exc)
    if not hasattr(parts, "AOT_PARTITIONER_DEBUG"):
        return "the partitioner debug log is not available on this torch (no AOT_PARTITIONER_DEBUG)"
    parts.AOT_PARTITIONER_DEBUG = True

    class PartitionerHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                message = record.getMessage()
            except Exception:
                message = str(record.msg)
            cid, _ = current_compile_id()
            writer.write("partitioner_log", compile_id=cid, message=message[:20000])

    logger = logging.getLogger("torch._functorch.partitioners")
    logger.setLevel(logging.INFO)
    logger.addHandler(PartitionerHandler(logging.INFO))
    logger.propagate = False
    return None


def install_codegen(writer: RecordingWriter) -> str | None:
    """Provenance tracking: the trace then maps each kernel to post-grad nodes and user lines."""
    try:
        import torch._inductor.config as inductor_config

        inductor_config.trace.provenance_tracking_level = 1
        return None
    except (ImportError, AttributeError) as exc:
        return unavailable("kernel provenance", exc)


class _FusionState(threading.local):
    def __init__(self) -> None:
        self.decisions: list[dict[str, Any]] | None = None


def install_fusion(writer: RecordingWriter) -> str | None:
    """Wrap `Scheduler.fuse_nodes` and route the `fusion` log artifact into `fusion` events."""
    try:
        import torch._inductor.scheduler as sched

        original = sched.Scheduler.fuse_nodes
        why_no_fuse = sched.WhyNoFuse
    except (ImportError, AttributeError) as exc:
        return unavailable("fusion decisions", exc)
    install_codegen(writer)  # which kernel each group became comes from provenance
    state = _FusionState()

    class FusionHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                decision = _decision(record, why_no_fuse)
            except Exception:
                return
            if decision is None:
                return
            if state.decisions is not None:
                if len(state.decisions) < MAX_DECISIONS_PER_GRAPH:
                    state.decisions.append(decision)
            else:
                cid, _ = current_compile_id()
                writer.write("fusion_note", compile_id=cid, graph=graph_kind(), **decision)

    handler = FusionHandler(logging.DEBUG)
    for name in ("torch._inductor.scheduler.__fusion",):
        logger = logging.getLogger(name)
        for h in list(logger.handlers):
            logger.removeHandler(h)
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False

    @functools.wraps(original)
    def fuse_nodes(self: Any, nodes: list[Any]) -> list[Any]:
        before = _describe_nodes(nodes)
        outer, state.decisions = state.decisions, []
        try:
            result = original(self, nodes)
        finally:
            decisions, state.decisions = state.decisions or [], outer
        try:
            cid, _ = current_compile_id()
            writer.write(
                "fusion",
                compile_id=cid,
                graph=graph_kind(),
                device=graph_device(),
                preview=bool(
                    getattr(sys.modules.get("tcx.core.recorder.compat_fakecuda"), "PREVIEW_ACTIVE", False)
                ),
                nodes=before,
                groups=[
                    {"name": _name(n), "type": type(n).__name__, "members": [_name(s) for s in _members(n)]}
                    for n in result
                ],
                decisions=decisions,
            )
        except Exception as exc:  # recording must never change what Inductor does
            writer.write("fusion", error=f"{type(exc).__name__}: {exc}")
        return result

    sched.Scheduler.fuse_nodes = fuse_nodes
    return None


def _decision(record: logging.LogRecord, why_no_fuse: type) -> dict[str, Any] | None:
    msg = record.msg
    if isinstance(msg, why_no_fuse):
        reason = msg.reason % msg.args if msg.args else msg.reason
        return {"kind": "no_fuse", "node1": msg.name1, "node2": msg.name2, "reason": str(reason)}
    if not isinstance(msg, str):
        return None
    if msg.startswith("fusing %s with %s") and len(record.args or ()) >= 2:
        return {"kind": "fuse", "node1": str(record.args[0]), "node2": str(record.args[1])}
    if msg.startswith("cannot fuse"):
        return {"kind": "no_fuse_text", "text": record.getMessage()[:500]}
    return None


def _name(node: Any) -> str:
    try:
        return str(node.get_name())
    except Exception:
        return "?"


def _members(node: Any) -> list[Any]:
    try:
        return list(node.get_nodes())
    except Exception:
        return [node]


def _describe_nodes(nodes: list[Any]) -> list[dict[str, Any]]:
    out = []
    for node in nodes[:MAX_NODES_PER_GRAPH]:
        try:
            out.append(_describe_node(node))
        except Exception as exc:
            out.append({"name": _name(node), "error": f"{type(exc).__name__}: {exc}"})
    return out


def _prefer_user(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user's own frames when the stack has any: a torch wrapper (a device mode) is not "your line"."""
    mine = [entry for entry in lines if frame_origin(entry["file"]) == "user"]
    return mine or lines


def _describe_node(node: Any) -> dict[str, Any]:
    ir = getattr(node, "node", None)
    kind = "extern" if node.is_extern() else "template" if node.is_template() else None
    if kind is None:
        data = getattr(ir, "data", None)
        kind = (
            "reduction" if node.is_reduction() else type(data).__name__.lower() if data is not None else "?"
        )
    origins = []
    try:
        origin_nodes = sorted(ir.get_origins(), key=lambda n: n.name) if ir is not None else []
    except Exception:
        origin_nodes = []
    lines: list[dict[str, Any]] = []
    for fx in origin_nodes:
        target = getattr(fx, "target", None)
        origins.append({"node": fx.name, "op": _op_name(target)})
        for entry in parse_stack_trace(str(fx.meta.get("stack_trace") or "")):
            if entry not in lines:
                lines.append(entry)
    desc: dict[str, Any] = {
        "name": _name(node),
        "type": type(node).__name__,
        "kind": kind,
        "origins": origins,
        "user_lines": _prefer_user(lines)[-4:],
        "buffers": sorted(getattr(node, "get_buffer_names", lambda: [])()),
    }
    if kind == "extern":
        desc["kernel"] = str(getattr(ir, "python_kernel_name", None) or type(ir).__name__)
    with contextlib.suppress(Exception):
        desc["size"] = [str(s) for s in ir.get_size()]
    return desc


def _op_name(target: Any) -> str:
    name = getattr(target, "__name__", None) or str(target)
    module = getattr(target, "namespace", None)
    if module:  # an OpOverload: aten.add.Tensor
        return f"{module}.{name}"
    return str(name)
