"""Compatibility layer for `tcx cost`: one profiled step read from torch.profiler's raw events.

`spans_of` turns the events of one profile window (core/recorder/compat_cost.py opens and closes
it) into the ranges of the step and the device work they launched, read through
`profile.profiler.kineto_results` (raw events: one pass, no FunctionEvent tree). Pure data comes out:
core/cost/profile.py attributes it, torch-free.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any

import torch

from tcx.core.recorder.compat import unavailable

CALL_SPAN = "tcx.call"  # the profiler range around one measured call ("tcx.call NAME": another function's)
STEP_SPAN = "tcx.step"  # the range around one profiled step: a call's start to the next call's
BACKWARD_SPAN = "tcx.backward"  # the range around one backward() (or autograd.grad) in a step
MAX_SPANS = 20000  # profiler ranges kept per profiled step
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
# Kineto's activity types: device work, and the CUDA runtime/driver calls that launched it.
DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CALLS = ("cuda_runtime", "cuda_driver", "privateuse1_runtime", "privateuse1_driver")
_RUNTIME_NAME = re.compile(r"^(cuda|cu|hip)[A-Z]")


def raw_events(prof: Any) -> list[Any] | str:
    """The profiler's raw events, or why they cannot be read on this torch."""
    try:
        return list(prof.profiler.kineto_results.events())
    except AttributeError as exc:
        return unavailable("raw profiler events", exc)


def spans_of(events: list[Any]) -> dict[str, Any]:
    """The ranges of one profiled step on its thread (relative to the step's start, in ns), and the
    device work they launched: `cpu` [name, start, duration], `device` [name, start, duration, stream,
    the cpu span that launched it, 1 when a CUDA-graph replay (cudaGraphLaunch) ran it], `extra`
    [cpu span, {bytes, flops, dtype, ...}] for launchers.

    The step is tcx's `tcx.step` range (or, in a profile without one, its `tcx.call`). Autograd runs
    a GPU's backward on its own device thread: inside a `tcx.backward` range in which the step's
    thread ran nothing (it waited), the ranges of the other threads are taken too. Kineto links a
    kernel (and the runtime call that launched it) to the innermost op or range on the CPU
    (`linked_correlation_id`); runtime calls carry the OS thread id, not the op's, so they are found
    through that link rather than by thread."""
    cpu_type = torch.autograd.DeviceType.CPU
    on_cpu = [e for e in events if e.device_type() == cpu_type]
    roots = [e for e in on_cpu if e.name() == STEP_SPAN] or [e for e in on_cpu if e.name() == CALL_SPAN]
    if not roots:
        return {"error": "the profiler recorded no range for the step"}
    root = roots[-1]
    thread, begin, end = root.start_thread_id(), root.start_ns(), root.end_ns()
    on_thread = [
        e
        for e in on_cpu
        if e.start_thread_id() == thread
        and begin <= e.start_ns()
        and e.end_ns() <= end
        and not _is_runtime(e)
    ]
    # a backward() whose work ran on another thread (the main thread only waited in it: no range of its own)
    backward = [
        (b.start_ns(), b.end_ns())
        for b in on_thread
        if b.name() == BACKWARD_SPAN
        and not any(e is not b and b.start_ns() <= e.start_ns() < b.end_ns() for e in on_thread)
    ]
    if backward:
        on_thread += [
            e
            for e in on_cpu
            if e.start_thread_id() != thread
            and not _is_runtime(e)
            and any(b0 <= e.start_ns() and e.end_ns() <= b1 for b0, b1 in backward)
        ]
    ops = {e.correlation_id() for e in on_thread}
    runtime = [e for e in on_cpu if _is_runtime(e) and e.linked_correlation_id() in ops]
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
    launched = {e.correlation_id() for e in on_cpu if _is_runtime(e)}
    # a runtime call -> the op that made it; CUDA-graph replays (cudaGraphLaunch) run many kernels
    links = {e.correlation_id(): e.linked_correlation_id() for e in runtime}
    replays = {e.correlation_id() for e in runtime if "GraphLaunch" in e.name()}
    for e in events:
        if e.device_type() == cpu_type or not _is_device_work(e, launched):
            continue
        launcher = by_correlation.get(e.linked_correlation_id())
        if launcher is None:
            launcher = by_correlation.get(links.get(e.correlation_id(), -1))
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
                int(e.correlation_id() in replays),
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


def device_facts() -> dict[str, Any]:
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


def export(prof: Any, index: int, folder: str, cuda: bool) -> str | None:
    """torch.profiler's own view of this step: its Chrome trace and its table (key_averages), for
    comparing tcx's figures with the profiler's; None when written, else why not."""
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
        return f"the profile could not be exported to {folder}: {type(exc).__name__}: {exc}"
    return None
