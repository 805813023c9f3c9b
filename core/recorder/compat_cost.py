"""Compatibility layer for `tcx cost`: every call of every compiled callable, timed; steady calls profiled.

The only place that touches the private torch APIs behind the cost view; each is feature-detected
and a missing one becomes a one-line "not available" reason in `cost_config`:

- `torch._dynamo.eval_frame.OptimizeContext.__call__` — wrapped (as the recompiles capture does)
  so the callable `torch.compile()` returns times each call of the program (`cost_call`). Nested
  compiled calls belong to the outermost call.
- `torch._dynamo.callback_handler` — its start-compile callbacks fire when Dynamo compiles a
  frame, a lazy backward compiles, or a CUDA-graph tree records: a call during which one fired is
  warm-up, and the profiler running for it is stopped there (a compile's own events are not wanted).
- `torch._dynamo.output_graph.OutputGraph.call_user_compiler` — the callable each backend returns
  is wrapped in a profiler range `tcx.graph <compile id>` (only while a profiler runs), so the
  profile says where each compiled graph starts and ends whatever the backend.
- `torch._inductor.config.cpp.enable_kernel_profile` — Inductor's C++ kernels record themselves
  (`graph_<n>_cpp_fused_…`); Triton kernels always do when a profiler runs.
- `torch.profiler` (public) for the steady calls, read through `profile.profiler.kineto_results`
  (raw events: one pass, no FunctionEvent tree); torch's own markers name the parts of a call:
  `TorchDynamo Cache Lookup` (guard evaluation), `Torch-Compiled Region: <id>` (the transformed
  frame of a compile), `Pregraph bytecode`, `## Call CompiledFxGraph … ##`.

The `force_eager` argument (the second run of `tcx cost`) sets `torch.compiler.set_stance("force_eager")`
and only times the calls; `eager_calls=FILE` copies that run's timings into this recording.
Nothing here runs a call twice: a training step applies once.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import time
from collections.abc import Callable
from typing import Any

import torch

from tcx.core.ingest.recording import RecordingWriter
from tcx.core.recorder.compat import current_compile_id, unavailable, wrap_compiled_functions
from tcx.core.recorder.compat_recompiles import _evaluated_callable, _qualname, _target_of

CALL_SPAN = "tcx.call"  # the profiler range around one measured call
GRAPH_SPAN = "tcx.graph "  # + compile id: the range around one compiled graph's call
MAX_CALL_EVENTS = 2000  # per-call events written; later calls are counted per function (`cost_calls_more`)
MAX_SPANS = 20000  # profiler ranges kept per profiled call
DEFAULT_PROFILE_CALLS = 5
# A folder: each profiled call's own torch.profiler output (its Chrome trace and key_averages table)
# is written there too, for comparing tcx's figures with the profiler's (bench/gpu_cost.py).
EXPORT_ENV = "TCX_COST_PROFILER_EXPORT"
# The C++ name of a scalar type as the profiler reports it -> (torch name, bytes per element).
_DTYPES = {
    "float": ("float32", 4),
    "double": ("float64", 8),
    "c10::Half": ("float16", 2),
    "c10::BFloat16": ("bfloat16", 2),
    "long int": ("int64", 8),
    "long": ("int64", 8),
    "int": ("int32", 4),
    "short int": ("int16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "c10::Float8_e4m3fn": ("float8_e4m3fn", 1),
    "c10::Float8_e5m2": ("float8_e5m2", 1),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
}


class _State:
    def __init__(self) -> None:
        self.writer: RecordingWriter | None = None
        self.eager = False  # the force_eager run: time only
        self.profile_limit = DEFAULT_PROFILE_CALLS
        self.warmup = 0  # calls of each function left out on top of those that compiled
        self.calls = 0
        self.per_function: dict[str, int] = {}
        self.profiled = 0
        self.unprofiled = 0  # measured calls timed without the profiler
        self.depth = 0
        self.compiled: list[str] = []  # what compiled during the call in progress
        self.profiler: Any = None  # the profiler running for the call in progress
        self.more: dict[
            str, list[Any]
        ] = {}  # calls past MAX_CALL_EVENTS: [function, file, line, n, sum, min, max]
        self.callback: Callable[[Any], None] | None = None
        self.frames_total: Callable[[], int] | None = None  # fallback compile signal
        self.cuda_noted = False


STATE = _State()


def install(writer: RecordingWriter, argument: str | None = None) -> str | None:
    """Install the cost capture; None when installed, else why not. `argument`: comma-separated
    `force_eager`, `profile=N`, `warmup=N`, `eager_calls=FILE`."""
    options = _options(argument)
    missing = wrap_compiled_functions(_wrap_compiled, "timing the calls of compiled callables")
    if missing:
        return missing
    STATE.writer = writer
    STATE.eager = "force_eager" in options
    STATE.profile_limit = max(0, int(options.get("profile", DEFAULT_PROFILE_CALLS)))
    STATE.warmup = max(0, int(options.get("warmup", 0)))
    config: dict[str, Any] = {
        "mode": "force_eager" if STATE.eager else "compiled",
        "profile_calls": 0 if STATE.eager else STATE.profile_limit,
        "warmup": STATE.warmup,
    }
    if STATE.eager:
        config["stance"] = _force_eager()
    else:
        config["kernel_profile"] = _enable_kernel_profile()
        config["graph_marks"] = _install_graph_marks()
        config["compile_signal"] = _install_compile_signal()
        config["profiler"] = _profiler_reason()
    from tcx.core.recorder.captures import at_end

    at_end(_finish)
    writer.write("cost_config", **config)
    if options.get("eager_calls"):
        _copy_eager_calls(str(options["eager_calls"]), writer)
    return None


def _options(argument: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in (argument or "").split(","):
        key, sep, value = part.partition("=")
        if key:
            out[key] = value if sep else True
    return out


def _force_eager() -> str | None:
    try:
        torch.compiler.set_stance("force_eager")
        return None
    except (AttributeError, TypeError, RuntimeError) as exc:
        return unavailable('torch.compiler.set_stance("force_eager")', exc)


def _enable_kernel_profile() -> str | None:
    """Inductor's C++ kernels record a profiler range each (Linux and Windows only, as torch has it)."""
    import sys

    try:
        import torch._inductor.config as inductor_config

        inductor_config.cpp.enable_kernel_profile = True
    except (ImportError, AttributeError) as exc:
        return unavailable("Inductor's C++ kernel profiling (cpp.enable_kernel_profile)", exc)
    if sys.platform not in ("linux", "win32"):
        return f"Inductor's C++ kernels record themselves on Linux and Windows only, not on {sys.platform}"
    return None


def _profiler_reason() -> str | None:
    try:
        from torch.profiler import ProfilerActivity, profile  # noqa: F401
    except ImportError as exc:
        return unavailable("torch.profiler", exc)
    return None


def _install_graph_marks() -> str | None:
    try:
        import torch._dynamo.output_graph as og
        from torch._C._profiler import _RecordFunctionFast
        from torch.autograd import profiler as autograd_profiler

        original = og.OutputGraph.call_user_compiler
    except (ImportError, AttributeError) as exc:
        return unavailable("marking compiled graphs in the profile", exc)

    @functools.wraps(original)
    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        compiled = original(self, gm, example_inputs)
        cid, _ = current_compile_id()
        if not callable(compiled) or cid is None:
            return compiled
        name = GRAPH_SPAN + cid

        @functools.wraps(compiled)
        def tcx_marked_graph(*args: Any, **kwargs: Any) -> Any:
            if autograd_profiler._is_profiler_enabled:
                with _RecordFunctionFast(name):
                    return compiled(*args, **kwargs)
            return compiled(*args, **kwargs)

        return tcx_marked_graph

    og.OutputGraph.call_user_compiler = call_user_compiler
    return None


def _install_compile_signal() -> str | None:
    """Know when a call compiles (warm-up): Dynamo's start-compile callbacks, else its frame counter."""

    def started(args: Any) -> None:
        if not STATE.depth:
            return  # e.g. a lazy backward compiling in loss.backward(), outside any call
        trigger = getattr(getattr(args, "callback_trigger", None), "name", None) or "compile"
        STATE.compiled.append(f"{trigger.lower()} {getattr(args, 'compile_id', '?')}")
        _stop_profiler(discard=True)

    try:
        handler = torch._dynamo.callback_handler
        handler.register_start_callback(started)
        STATE.callback = started
        return None
    except AttributeError as exc:
        reason = unavailable("Dynamo's compile callbacks", exc)
    try:
        from torch._dynamo.utils import counters

        STATE.frames_total = lambda: int(counters["frames"]["total"])
        return reason + "; a call during which Dynamo looked at a new frame counts as warm-up"
    except (ImportError, KeyError) as exc:
        return unavailable("knowing which calls compiled", exc)


def _wrap_compiled(compiled: Callable[..., Any], fn: Any) -> Callable[..., Any]:
    frame = _target_of(_evaluated_callable(compiled, fn))
    code = getattr(getattr(frame, "__func__", frame), "__code__", None)
    if code is None:
        return compiled
    target = _target_of(fn)
    target_code = getattr(getattr(target, "__func__", target), "__code__", None)
    # the callable the program compiled, when Dynamo evaluates a frame around it (a decorator's wrapper)
    wraps = _qualname(target) if target_code is not code else None
    where = (code.co_name, code.co_filename, code.co_firstlineno, wraps)
    is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)

    @functools.wraps(compiled)
    def tcx_cost_call(*args: Any, **kwargs: Any) -> Any:
        if STATE.depth or is_compiling():
            return compiled(*args, **kwargs)  # part of the outer call (or being traced)
        return _measured_call(compiled, where, args, kwargs)

    return tcx_cost_call


def _measured_call(
    compiled: Callable[..., Any], where: tuple[str, str, int, str | None], args: tuple, kwargs: dict
) -> Any:
    index = STATE.calls
    STATE.calls += 1
    seen = STATE.per_function.get(where[0], 0)
    STATE.per_function[where[0]] = seen + 1
    _keep_callback()
    cuda = _cuda_in_use()
    profiler = _start_profiler(cuda) if _wants_profile(seen) else None
    frames_before = STATE.frames_total() if STATE.frames_total else None
    STATE.depth, STATE.compiled = 1, []
    clock = [0, 0]  # start, end of the call itself (inside the profiler's range when there is one)
    ok = False
    if cuda:
        torch.cuda.synchronize()
    try:
        if profiler is not None:
            with torch.profiler.record_function(CALL_SPAN):
                result = _timed(compiled, args, kwargs, clock, cuda)
        else:
            result = _timed(compiled, args, kwargs, clock, cuda)
        ok = True
        return result
    finally:
        wall = (clock[1] or time.perf_counter_ns()) - clock[0]
        STATE.depth = 0
        if frames_before is not None and STATE.frames_total and STATE.frames_total() != frames_before:
            STATE.compiled.append("dynamo frame")
        try:
            _record(index, where, wall, seen, ok, cuda)
        except Exception as err:  # measuring must never change what the program does
            _write("cost_call", hook_error=f"{type(err).__name__}: {err}")


def _timed(compiled: Callable[..., Any], args: tuple, kwargs: dict, clock: list[int], cuda: bool) -> Any:
    """The call, its start and end in `clock`; on a GPU the device's work is waited for (it belongs to it)."""
    clock[0] = time.perf_counter_ns()
    result = compiled(*args, **kwargs)
    if cuda:
        torch.cuda.synchronize()
    clock[1] = time.perf_counter_ns()
    return result


def _keep_callback() -> None:
    """torch._dynamo.reset() clears the compile callbacks; put ours back."""
    callback = STATE.callback
    if callback is not None:
        handler = torch._dynamo.callback_handler
        if callback not in handler.start_callbacks:
            handler.register_start_callback(callback)


def _cuda_in_use() -> bool:
    return bool(torch.cuda.is_available() and torch.cuda.is_initialized())


def _wants_profile(seen: int) -> bool:
    """Profile this call? Never in the eager run, never past the limit, never during the asked-for
    warm-up; otherwise every other measured call, so timed calls without the profiler remain."""
    if STATE.eager or STATE.profiler is not None or STATE.profiled >= STATE.profile_limit:
        return False
    if seen < STATE.warmup:
        return False
    from torch.autograd import profiler as autograd_profiler

    if autograd_profiler._is_profiler_enabled:  # the program runs its own profiler
        return False
    return STATE.profiled <= STATE.unprofiled


def _start_profiler(cuda: bool) -> Any:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    try:
        prof = profile(activities=activities, record_shapes=cuda, with_flops=cuda)
        prof.start()
        with torch.profiler.record_function("tcx.profiler_warmup"):  # its first range, outside the call
            pass
    except Exception as exc:
        _write("cost_config", profiler_error=f"the profiler could not start: {type(exc).__name__}: {exc}")
        STATE.profile_limit = 0
        return None
    STATE.profiler = prof
    return prof


def _stop_profiler(discard: bool) -> Any:
    prof, STATE.profiler = STATE.profiler, None
    if prof is None:
        return None
    try:
        prof.stop()
    except Exception:
        return None
    return None if discard else prof


def _record(
    index: int, where: tuple[str, str, int, str | None], wall: int, seen: int, ok: bool, cuda: bool
) -> None:
    function, file, line, wraps = where
    warmup = bool(STATE.compiled) or seen < STATE.warmup
    prof = _stop_profiler(discard=warmup or not ok)
    profiled = prof is not None
    if not warmup and ok:
        if profiled:
            STATE.profiled += 1
        else:
            STATE.unprofiled += 1
    if profiled:
        _write_profile(prof, index, function, cuda)
    if index >= MAX_CALL_EVENTS and not warmup and not profiled:
        more = STATE.more.setdefault(function, [function, file, line, 0, 0, wall, wall])
        more[3] += 1
        more[4] += wall
        more[5] = min(more[5], wall)
        more[6] = max(more[6], wall)
        return
    event: dict[str, Any] = {
        "index": index,
        "function": function,
        "file": file,
        "line": line,
        "wall_ns": wall,
        "warmup": warmup,
        "profiled": profiled,
    }
    if wraps:
        event["wraps"] = wraps
    if STATE.compiled:
        event["compiled"] = STATE.compiled[:32]
    if not ok:
        event["raised"] = True
    _write("cost_call", **event)


def _finish() -> None:
    _stop_profiler(discard=True)
    _write("cost_run_end", calls=STATE.calls, cuda=_cuda_in_use())
    for function, file, line, count, total, low, high in STATE.more.values():
        _write(
            "cost_calls_more",
            function=function,
            file=file,
            line=line,
            count=count,
            total_ns=total,
            min_ns=low,
            max_ns=high,
        )


def _write(kind: str, **fields: Any) -> None:
    if STATE.writer is not None:
        STATE.writer.write(kind, **fields)


# ---------------------------------------------------------------- one profiled call, as spans


def _write_profile(prof: Any, index: int, function: str, cuda: bool) -> None:
    try:
        events = list(prof.profiler.kineto_results.events())
    except AttributeError as exc:
        _write("cost_profile", index=index, function=function, error=unavailable("raw profiler events", exc))
        return
    if cuda and not STATE.cuda_noted:
        STATE.cuda_noted = True
        _write("cost_device", **_device())
    _write("cost_profile", index=index, function=function, **spans_of(events))
    folder = os.environ.get(EXPORT_ENV)
    if folder:
        _export(prof, index, folder, cuda)


def _export(prof: Any, index: int, folder: str, cuda: bool) -> None:
    """torch.profiler's own view of this call: its Chrome trace and its table (key_averages)."""
    try:
        os.makedirs(folder, exist_ok=True)
        prof.export_chrome_trace(os.path.join(folder, f"call{index}.json"))
        averages = prof.key_averages()
        try:
            table = averages.table(
                sort_by="self_device_time_total" if cuda else "self_cpu_time_total", row_limit=40
            )
        except (AttributeError, KeyError, ValueError):
            table = averages.table(sort_by="cpu_time_total", row_limit=40)
        with open(os.path.join(folder, f"call{index}.txt"), "w", encoding="utf-8") as fh:
            fh.write(table)
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        _write("cost_config", profiler_error=f"the profile could not be exported to {folder}: {why}")


# Kineto's activity types: device work, and the CUDA runtime/driver calls that launched it.
DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CALLS = ("cuda_runtime", "cuda_driver", "privateuse1_runtime", "privateuse1_driver")
_RUNTIME_NAME = re.compile(r"^(cuda|cu|hip)[A-Z]")


def spans_of(events: list[Any]) -> dict[str, Any]:
    """The ranges of one call on its thread (relative to the call's start, in ns), and the device
    work they launched: `cpu` [name, start, duration], `device` [name, start, duration, stream, the
    cpu span that launched it], `extra` [cpu span, {bytes, flops, dtype, ...}] for launchers.

    Kineto links a kernel (and the runtime call that launched it) to the innermost op or range on
    the CPU (`linked_correlation_id`); runtime calls carry the OS thread id, not the op's, so they
    are found through that link rather than by thread."""
    cpu_type = torch.autograd.DeviceType.CPU
    calls = [e for e in events if e.name() == CALL_SPAN and e.device_type() == cpu_type]
    if not calls:
        return {"error": "the profiler recorded no range for the call"}
    call = calls[-1]
    thread, begin, end = call.start_thread_id(), call.start_ns(), call.end_ns()
    on_thread = [
        e
        for e in events
        if e.device_type() == cpu_type
        and e.start_thread_id() == thread
        and begin <= e.start_ns()
        and e.end_ns() <= end
        and not _is_runtime(e)
    ]
    ops = {e.correlation_id() for e in on_thread}
    runtime = [
        e
        for e in events
        if e.device_type() == cpu_type and _is_runtime(e) and e.linked_correlation_id() in ops
    ]
    ranged = sorted(on_thread + runtime, key=lambda e: (e.start_ns(), -e.duration_ns()))
    truncated = max(0, len(ranged) - MAX_SPANS)
    names: dict[str, int] = {}
    cpu: list[list[int]] = []
    by_correlation: dict[int, int] = {}
    for e in ranged[:MAX_SPANS]:
        if not _is_runtime(e):
            by_correlation.setdefault(e.correlation_id(), len(cpu))
        cpu.append([names.setdefault(e.name(), len(names)), e.start_ns() - begin, e.duration_ns()])
    device: list[list[int]] = []
    launchers: set[int] = set()
    launched = {e.correlation_id() for e in events if e.device_type() == cpu_type and _is_runtime(e)}
    for e in events:
        if e.device_type() == cpu_type or not _is_device_work(e, launched):
            continue
        launcher = by_correlation.get(e.linked_correlation_id())
        if launcher is None:
            continue
        launchers.add(launcher)
        device.append(
            [
                names.setdefault(e.name(), len(names)),
                e.start_ns() - begin,
                e.duration_ns(),
                int(e.device_resource_id()),
                launcher,
            ]
        )
    extra = [[i, facts] for i in sorted(launchers) if (facts := _launch_facts(ranged[i]))]
    out: dict[str, Any] = {"names": list(names), "cpu": cpu, "device": device, "extra": extra}
    if truncated:
        out["truncated"] = truncated
    return out


def _activity(e: Any) -> str:
    try:
        return str(e.activity_type())
    except (AttributeError, RuntimeError):
        return ""  # a torch whose events do not say: the checks below fall back to names


def _is_runtime(e: Any) -> bool:
    kind = _activity(e)
    return kind in RUNTIME_CALLS if kind else bool(_RUNTIME_NAME.match(e.name()))


def _is_device_work(e: Any, launched: set[int]) -> bool:
    """A kernel, memcpy or memset; not the device-side copy of a CPU range (gpu_user_annotation).

    Where the events carry no activity type (torch 2.11), device work is what a runtime or driver
    call launched: it shares that call's correlation id (cuLaunchKernel and its Triton kernel, on
    the H200), while a range's device copy shares none. Names cannot tell them apart: a Triton
    kernel is named like the CPU range Inductor wraps its launch in."""
    kind = _activity(e)
    return kind in DEVICE_WORK if kind else e.correlation_id() in launched


def _launch_facts(e: Any) -> dict[str, Any]:
    """What a span that launched device work moved and computed: bytes of its tensor arguments
    (shape × element size, each argument once), FLOPs where the profiler counts them (mm, conv, …),
    and Inductor's own estimates where its kernel carries them (`kernel_num_gb`, `kernel_flop`)."""
    facts: dict[str, Any] = {}
    total, dtype = 0, None
    try:
        shapes, dtypes = list(e.shapes()), list(e.dtypes())
    except (AttributeError, RuntimeError):
        shapes, dtypes = [], []
    counted = False
    for shape, name in zip(shapes, dtypes, strict=False):
        if not isinstance(shape, list) or not shape or not all(isinstance(d, int) for d in shape):
            continue
        known = _DTYPES.get(name)
        if known is None:
            total, counted = -1, False
            break
        numel = 1
        for d in shape:
            numel *= d
        total += numel * known[1]
        counted = True
        if dtype is None and known[0].startswith(("float", "bfloat")):
            dtype = known[0]
    if counted and total >= 0:
        facts["bytes"] = total
    if dtype:
        facts["dtype"] = dtype
    try:
        flops = int(e.flops())
    except (AttributeError, RuntimeError, TypeError, ValueError):
        flops = 0
    if flops > 0:
        facts["flops"] = flops
    try:
        kw = e.kwinputs() or {}
    except (AttributeError, RuntimeError):
        kw = {}
    for key in ("kernel_num_gb", "kernel_flop"):
        value = kw.get(key)
        if isinstance(value, (int, float)) and value > 0:
            facts[key] = float(value)
    return facts


def _device() -> dict[str, Any]:
    """The GPU the calls ran on, as torch describes it (peak figures come from a datasheet table in
    core/cost/gpu.py, or from the memory clock and bus width here)."""
    try:
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {"name": str(props.name), "capability": f"{props.major}.{props.minor}"}
    for attr in (
        "multi_processor_count",
        "total_memory",
        "memory_clock_rate",
        "memory_bus_width",
        "clock_rate",
    ):
        value = getattr(props, attr, None)
        if isinstance(value, int):
            out[attr] = value
    with contextlib.suppress(AttributeError):
        out["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    out["torch_cuda"] = str(getattr(torch.version, "cuda", None))
    return out


# ---------------------------------------------------------------- the eager run's timings


def _copy_eager_calls(path: str, writer: RecordingWriter) -> None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        writer.write("cost_eager_run", error=f"cannot read the eager run's timings: {exc}")
        return
    run = data.get("run") if isinstance(data, dict) else None
    run = run if isinstance(run, dict) else {}
    writer.write("cost_eager_run", **{k: run[k] for k in ("status", "message", "calls") if k in run})
    for call in data.get("calls", []) if isinstance(data, dict) else []:
        if isinstance(call, dict):
            writer.write("cost_eager_call", **call)
