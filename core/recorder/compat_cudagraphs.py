"""Compatibility layer: CUDA graphs under `mode="reduce-overhead"` — what torch decided, from torch.

Inductor decides per compiled graph whether CUDA graphs may wrap it (at compile time:
mutated inputs, CPU tensors, symbolic shapes, incompatible ops ...), and CUDA-graph trees
decide more when the graph runs (recording on a later call, mutation of non-static inputs,
re-recording for new shapes). Every "skipping cudagraphs due to ..." goes through torch's
`log_cudagraph_skip_and_bump_counter` (the `cudagraphs` log and the `cudagraph_skips`
counter); tcx wraps it, and the points where a graph is handed to CUDA graphs and where a
tree records one, into `cudagraph` events:

    event=cudagraphified  compile_id, graph: Inductor wrapped the graph for CUDA graphs
    event=captured        compile_id, graph: a CUDA-graph tree recorded it (on the GPU)
    event=skip            compile_id, graph, message (torch's text, with the user line), when
                          ("compile" or "runtime")
    event=partitions      compile_id, graph, cudagraphable, nodes: Inductor split the graph
                          (graph partitions) and kept these nodes out of CUDA graphs, each with
                          torch's `should_partition` reason and its user line
    event=decided         compile_id, graph, fail_reasons, disabled_reason, partitions: what
                          Inductor's post-compile step read before wrapping (or silently not
                          wrapping) the graph; torch logs none of it when partitions are on
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from typing import Any

from tcx.core.ingest.recording import RecordingWriter
from tcx.core.recorder.compat import current_compile_id, unavailable

MAX_EVENTS = 2000


class _Runtime(threading.local):
    compile_id: str | None = None
    graph: str | None = None


def install(writer: RecordingWriter) -> str | None:
    try:
        import torch._inductor.compile_fx as cfx
        import torch._inductor.cudagraph_utils as cgu
    except ImportError as exc:
        return unavailable("CUDA-graph decisions", exc)
    original_log = getattr(cgu, "log_cudagraph_skip_and_bump_counter", None)
    if original_log is None:
        return (
            "CUDA-graph skip reasons are not available on this torch (no log_cudagraph_skip_and_bump_counter)"
        )
    runtime = _Runtime()
    count = [0]

    def write(**fields: Any) -> None:
        if count[0] < MAX_EVENTS:
            count[0] += 1
            writer.write("cudagraph", **fields)

    def restart() -> None:  # an in-process recording counts its own events
        count[0] = 0

    from tcx.core.recorder.captures import at_start

    at_start(restart)

    @functools.wraps(original_log)
    def log_skip(msg: str) -> None:
        try:
            from tcx.core.recorder.compat_inductor import graph_kind

            cid, _ = current_compile_id()
            if cid is not None:
                write(
                    event="skip", compile_id=cid, graph=graph_kind(), message=str(msg)[:8000], when="compile"
                )
            else:
                write(
                    event="skip",
                    compile_id=runtime.compile_id,
                    graph=runtime.graph,
                    message=str(msg)[:8000],
                    when="runtime",
                )
        except Exception as exc:  # recording must never change what Inductor does
            write(event="error", message=f"{type(exc).__name__}: {exc}")
        return original_log(msg)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("torch"):
            for key, value in list(vars(module).items()):
                if value is original_log:
                    setattr(module, key, log_skip)

    original_cudagraphify = getattr(cfx, "cudagraphify", None)
    if original_cudagraphify is not None:

        @functools.wraps(original_cudagraphify)
        def cudagraphify(*args: Any, **kwargs: Any) -> Any:
            cid, _ = current_compile_id()
            graph = (
                "backward"
                if kwargs.get("is_backward")
                else "inference"
                if kwargs.get("is_inference")
                else "forward"
            )
            write(event="cudagraphified", compile_id=cid, graph=graph)
            return original_cudagraphify(*args, **kwargs)

        cfx.cudagraphify = cudagraphify
    _install_tree_hooks(write, runtime)
    _install_partition_hooks(write)
    return None


def _user_line(stack_trace: str | None) -> dict[str, Any] | None:
    from tcx.core.frames import innermost_user_frame, parse_stack_trace

    return innermost_user_frame(parse_stack_trace(stack_trace or "")) if stack_trace else None


def _install_partition_hooks(write: Any) -> None:
    """Graph partitions (on by default since torch 2.9): which nodes stay out of CUDA graphs, and
    the reasons post-compile reads (it disables CUDA graphs for a graph without logging them)."""
    try:
        import torch._inductor.output_code as oc
        from torch._inductor.scheduler import Scheduler
    except ImportError:
        return
    from tcx.core.recorder.compat_inductor import graph_kind

    original_partition = getattr(Scheduler, "graph_partition", None)
    if original_partition is not None and hasattr(Scheduler, "should_partition"):

        @functools.wraps(original_partition)
        def graph_partition(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original_partition(self, *args, **kwargs)
            try:
                partitions, signatures = result
                nodes = []
                for partition, signature in zip(partitions, signatures, strict=False):
                    if not getattr(signature, "skip_cudagraph", False):
                        continue
                    for node in partition:
                        reason = self.should_partition(node)
                        if not reason or len(nodes) >= 50:
                            continue
                        fx = node.node.get_origin_node() if node.node is not None else None
                        nodes.append(
                            {
                                "node": node.get_name(),
                                "reason": str(reason),
                                "op": str(getattr(fx, "target", "") or ""),
                                "user_line": _user_line(
                                    fx.meta.get("stack_trace") if fx is not None else None
                                ),
                            }
                        )
                cid, _ = current_compile_id()
                write(
                    event="partitions",
                    compile_id=cid,
                    graph=graph_kind(),
                    partitions=len(partitions),
                    cudagraphable=sum(1 for s in signatures if not getattr(s, "skip_cudagraph", False)),
                    nodes=nodes,
                )
            except Exception as exc:  # recording must never change what Inductor does
                write(event="error", message=f"{type(exc).__name__}: {exc}")
            return result

        Scheduler.graph_partition = graph_partition

    for name in ("cudagraph_post_compile", "cudagraph_partition_post_compile"):
        original = getattr(oc, name, None)
        if original is None:
            continue
        setattr(oc, name, _decided(original, write))


def _decided(original: Any, write: Any) -> Any:
    @functools.wraps(original)
    def post_compile(example_inputs: Any, compiled_graph: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            info = getattr(compiled_graph, "cudagraph_info", None)
            fx_kwargs = getattr(compiled_graph, "fx_kwargs", {}) or {}
            maps = getattr(compiled_graph, "partition_maps", None)
            mutated = sorted(getattr(compiled_graph, "mutated_input_idxs", []) or [])
            lines = []
            if info is not None and mutated:
                from torch._inductor.cudagraph_utils import get_mutating_use_stack_trace

                for idx in mutated[:5]:
                    with contextlib.suppress(Exception):
                        line = _user_line(get_mutating_use_stack_trace(info.placeholders[idx]))
                        if line:
                            lines.append(line)
            cid, _ = current_compile_id()
            write(
                event="decided",
                compile_id=cid,
                graph="backward"
                if fx_kwargs.get("is_backward")
                else "inference"
                if fx_kwargs.get("is_inference")
                else "forward",
                fail_reasons=list(getattr(info, "cudagraph_fail_reasons", []) or []),
                disabled_reason=getattr(compiled_graph, "disabled_cudagraphs_reason", None),
                partitions=None if maps is None else len(maps),
                mutated_inputs=len(mutated),
                mutation_lines=lines,
            )
        except Exception as exc:  # recording must never change what Inductor does
            write(event="error", message=f"{type(exc).__name__}: {exc}")
        return original(example_inputs, compiled_graph, *args, **kwargs)

    return post_compile


def _install_tree_hooks(write: Any, runtime: _Runtime) -> None:
    """Which compile id a CUDA-graph tree runs or records (the tree knows it since torch 2.6)."""
    try:
        from torch._inductor.cudagraph_trees import CUDAGraphTreeManager
    except ImportError:
        return

    def describe(manager: Any, function_id: Any) -> tuple[str | None, str | None]:
        cid = getattr(manager, "id_to_compile_id", {}).get(function_id)
        mode = getattr(manager, "id_to_mode", {}).get(function_id)
        name = getattr(mode, "name", "") or ""
        return (str(cid) if cid is not None else None), (name.lower() or None)

    original_run = CUDAGraphTreeManager.run
    original_record = CUDAGraphTreeManager.record_function

    @functools.wraps(original_run)
    def run(self: Any, new_inputs: Any, function_id: Any) -> Any:
        saved = runtime.compile_id, runtime.graph
        runtime.compile_id, runtime.graph = describe(self, function_id)
        try:
            return original_run(self, new_inputs, function_id)
        finally:
            runtime.compile_id, runtime.graph = saved

    @functools.wraps(original_record)
    def record_function(self: Any, new_inputs: Any, function_id: Any) -> Any:
        cid, graph = describe(self, function_id)
        write(event="captured", compile_id=cid, graph=graph)
        return original_record(self, new_inputs, function_id)

    CUDAGraphTreeManager.run = run
    CUDAGraphTreeManager.record_function = record_function
