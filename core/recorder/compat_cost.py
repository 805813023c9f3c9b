"""Compatibility layer for `tcx cost`: every call of every compiled callable timed, with what the
program's step does around it (backward, the optimizer), and a few steady steps profiled.

The only place that touches the private torch APIs behind the cost view; each is feature-detected
and a missing one becomes a one-line "not available" reason in `cost_config`:

- `torch._dynamo.eval_frame.OptimizeContext.__call__` — wrapped (as the recompiles capture does)
  so the callable `torch.compile()` returns times each call of the program (`cost_call`, with its
  start on the monotonic clock and its grad mode). Nested compiled calls belong to the outermost.
- `torch.autograd.backward` / `torch.autograd.grad` (public) — wrapped: each backward the program
  runs outside a compiled call is timed (`cost_span` kind backward): the compiled backward graphs
  run there. `torch.optim.optimizer.register_optimizer_step_pre_hook` / `_post_hook` (public) time
  each optimizer step (`cost_span` kind optimizer).
- `torch._dynamo.callback_handler` — its start-compile callbacks fire when Dynamo compiles a
  frame, a lazy backward compiles, or a CUDA-graph tree records: a call (or, outside a call, the
  step: `cost_compile`) during which one fired is warm-up, and the profiler running for it is
  stopped there (a compile's own events are not wanted).
- `torch._dynamo.output_graph.OutputGraph.call_user_compiler` — the callable each backend returns
  is wrapped in a profiler range `tcx.graph <compile id>` (only while a profiler runs), so the
  profile says where each compiled graph starts and ends whatever the backend.
- `torch._inductor.config.cpp.enable_kernel_profile` — Inductor's C++ kernels record themselves
  (`graph_<n>_cpp_fused_…`); Triton kernels always do when a profiler runs.
- `torch.profiler` (public) for a few steady steps (core/recorder/compat_cost_profile.py reads it):
  a window opens at a call of the most-called compiled callable and closes where its next call
  starts (or, with `step=FUNC`, around each call of FUNC), so the backward and the optimizer step
  in between are in it.
- `sys.setprofile`, with `step=FUNC` only, until FUNC's first call: then FUNC is replaced, where
  the program looks it up (its module's globals, or its class), by a wrapper that times each call
  (`cost_span` kind step); the first call, already running, is not timed.

The `force_eager` argument (the eager runs of `tcx cost`) sets
`torch.compiler.set_stance("force_eager")` and only times. Nothing here runs a call twice: a
training step applies once.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from tcx.core.ingest.recording import RecordingWriter
from tcx.core.recorder import compat_cost_profile as profile_events
from tcx.core.recorder.compat import current_compile_id, unavailable, wrap_compiled_functions
from tcx.core.recorder.compat_cost_profile import BACKWARD_SPAN, CALL_SPAN, STEP_SPAN
from tcx.core.recorder.compat_recompiles import _evaluated_callable, _qualname, _target_of

GRAPH_SPAN = "tcx.graph "  # + compile id: the range around one compiled graph's call
MAX_CALL_EVENTS = 2000  # per-call events written; later calls are counted per function (`cost_calls_more`)
DEFAULT_PROFILE_CALLS = 5
# A folder: each profiled step's own torch.profiler output (its Chrome trace and key_averages table)
# is written there too, for comparing tcx's figures with the profiler's (bench/gpu_cost.py, tests).
EXPORT_ENV = "TCX_COST_PROFILER_EXPORT"
SITES_WRITTEN = 2  # spans of each kind written with the user's line that made them (backward(), step())
# frames that are not the program's: torch's, and tcx's own (core/: the recorder and its boot)
_NOT_USER = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Window:
    """One profiled step: the profiler and the `tcx.step` range, open from a call's start."""

    def __init__(self, prof: Any, step_range: Any, index: int, function: str, mode: str, cuda: bool) -> None:
        self.prof, self.step_range = prof, step_range
        self.index, self.function, self.mode, self.cuda = index, function, mode, cuda


class _State:
    def __init__(self) -> None:
        self.writer: RecordingWriter | None = None
        self.eager = False  # a force_eager run: time only
        self.profile_limit = DEFAULT_PROFILE_CALLS  # profiled steps per (function, grad mode)
        self.warmup = 0  # calls of each function left out on top of those that compiled
        self.calls = 0
        self.per_function: dict[str, int] = {}
        self.profiled: dict[tuple[str, str], int] = {}  # (function, mode) -> steps profiled
        self.unprofiled: dict[tuple[str, str], int] = {}  # steady calls timed without the profiler
        self.depth = 0
        self.compiled: list[str] = []  # what compiled during the call in progress
        self.window: _Window | None = None
        self.more: dict[
            str, list[Any]
        ] = {}  # calls past MAX_CALL_EVENTS: [function, file, line, n, sum, min, max]
        self.callback: Callable[[Any], None] | None = None
        self.frames_total: Callable[[], int] | None = None  # fallback compile signal
        self.cuda_noted = False
        self.optimizer_starts: dict[int, int] = {}  # id(optimizer) -> start of its step in progress
        self.step_name: str | None = None  # `step=FUNC`: the program's step function
        self.step_found = False
        self.step_calls = 0
        self.in_step = False
        self.compiles = 0  # compile starts seen (any depth): a step during which it changed is warm-up
        self.anchor: str | None = None  # `step=FUNC` naming a compiled callable: its calls delimit the steps
        self.restore_profile: Any = None  # the program's own sys.setprofile function, while tcx watches
        self.sites: dict[str, int] = {}  # span kind -> spans written with their user line


STATE = _State()


def install(writer: RecordingWriter, argument: str | None = None) -> str | None:
    """Install the cost capture; None when installed, else why not. `argument`: comma-separated
    `force_eager`, `profile=N`, `warmup=N`, `step=FUNC`."""
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
        "clock": "perf_counter_ns",
    }
    if STATE.eager:
        config["stance"] = _force_eager()
    else:
        config["kernel_profile"] = _enable_kernel_profile()
        config["graph_marks"] = _install_graph_marks()
        config["profiler"] = _profiler_reason()
    config["compile_signal"] = _install_compile_signal()
    config["backward"] = _install_backward_timing()
    config["optimizer"] = _install_optimizer_timing()
    if isinstance(options.get("step"), str) and options["step"]:
        STATE.step_name = str(options["step"])
        config["step"] = STATE.step_name
        _find_step_function(STATE.step_name)
    from tcx.core.recorder.captures import at_end

    at_end(_finish)
    writer.write("cost_config", **{k: v for k, v in config.items() if v is not None})
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
    """Know when a call or a step compiles (warm-up): Dynamo's start-compile callbacks, else its
    frame counter."""

    def started(args: Any) -> None:
        STATE.compiles += 1
        trigger = getattr(getattr(args, "callback_trigger", None), "name", None) or "compile"
        what = f"{trigger.lower()} {getattr(args, 'compile_id', '?')}"
        _discard_window()
        if STATE.depth:
            STATE.compiled.append(what)
        else:  # e.g. a lazy backward compiling in loss.backward(), between calls
            _write("cost_compile", start_ns=time.perf_counter_ns(), what=what)

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


def _keep_callback() -> None:
    """torch._dynamo.reset() clears the compile callbacks; put ours back."""
    callback = STATE.callback
    if callback is not None:
        handler = torch._dynamo.callback_handler
        if callback not in handler.start_callbacks:
            handler.register_start_callback(callback)


def _is_compiling() -> bool:
    return bool(getattr(torch.compiler, "is_compiling", lambda: False)())


def _cuda_in_use() -> bool:
    return bool(torch.cuda.is_available() and torch.cuda.is_initialized())


def _grad_mode() -> str:
    if torch.is_inference_mode_enabled():
        return "inference_mode"
    return "grad" if torch.is_grad_enabled() else "no_grad"


# ---------------------------------------------------------------- the compiled calls


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
    if STATE.step_name and STATE.step_name in (code.co_name, code.co_qualname, wraps):
        _stop_looking_for_step()  # the step function is this compiled callable: its calls delimit the steps
        STATE.anchor, STATE.step_name = code.co_name, None
        _write("cost_step_found", function=code.co_name, compiled=True)

    @functools.wraps(compiled)
    def tcx_cost_call(*args: Any, **kwargs: Any) -> Any:
        if STATE.depth or _is_compiling():
            return compiled(*args, **kwargs)  # part of the outer call (or being traced)
        return _measured_call(compiled, where, args, kwargs)

    return tcx_cost_call


def _measured_call(
    compiled: Callable[..., Any], where: tuple[str, str, int, str | None], args: tuple, kwargs: dict
) -> Any:
    index = STATE.calls
    STATE.calls += 1
    function = where[0]
    seen = STATE.per_function.get(function, 0)
    STATE.per_function[function] = seen + 1
    _keep_callback()
    cuda = _cuda_in_use()
    mode = _grad_mode()
    arrived = time.perf_counter_ns()
    window = STATE.window
    if window is not None and window.function == function and not STATE.in_step:
        _close_window(next_mode=mode)  # a step ends where the next call of its function starts
    if STATE.window is None and not STATE.step_name and _wants_profile(function, mode, seen):
        _open_window(cuda, index, function, mode)
    # the profiler's own work here (the last step's profile read, this one's profiler started) is
    # not the program's: the steps around it leave it out
    profiler_ns = time.perf_counter_ns() - arrived if window is not STATE.window else 0
    opened_here = STATE.window is not None and STATE.window.index == index
    in_window = STATE.window is not None
    frames_before = STATE.frames_total() if STATE.frames_total else None
    STATE.depth, STATE.compiled = 1, []
    # start, end of the call itself (inside the profiler's range when there is one), and the process's
    # CPU time at both: a call slow only because the machine was busy used no more CPU
    clock = [0, 0, 0, 0]
    ok = False
    if cuda:
        torch.cuda.synchronize()
    try:
        if in_window:
            with torch.profiler.record_function(CALL_SPAN if opened_here else f"{CALL_SPAN} {function}"):
                result = _timed(compiled, args, kwargs, clock, cuda)
        else:
            result = _timed(compiled, args, kwargs, clock, cuda)
        ok = True
        return result
    finally:
        wall = (clock[1] or time.perf_counter_ns()) - clock[0]
        cpu = clock[3] - clock[2] if clock[3] else None
        STATE.depth = 0
        if frames_before is not None and STATE.frames_total and STATE.frames_total() != frames_before:
            STATE.compiled.append("dynamo frame")
            _discard_window()
        try:
            _record(index, where, clock[0], wall, seen, ok, mode, in_window, opened_here, profiler_ns, cpu)
        except Exception as err:  # measuring must never change what the program does
            _write("cost_call", hook_error=f"{type(err).__name__}: {err}")


def _timed(compiled: Callable[..., Any], args: tuple, kwargs: dict, clock: list[int], cuda: bool) -> Any:
    """The call, its start and end in `clock`; on a GPU the device's work is waited for (it belongs to it)."""
    clock[2] = time.process_time_ns()
    clock[0] = time.perf_counter_ns()
    result = compiled(*args, **kwargs)
    if cuda:
        torch.cuda.synchronize()
    clock[1] = time.perf_counter_ns()
    clock[3] = time.process_time_ns()
    return result


def _wants_profile(function: str, mode: str, seen: int) -> bool:
    """Open a profile window at this call? Never in an eager run, never at a function's first call
    (it compiles) or during the asked-for warm-up; only for the function called most so far (the
    program's loop: its calls delimit the steps); per grad mode at most the limit, and only after
    two steady calls went unprofiled per profiled one, so most steps are timed without the profiler."""
    if STATE.eager or not STATE.profile_limit or seen < max(1, STATE.warmup):
        return False
    if function != (STATE.anchor or function) or (
        STATE.anchor is None and STATE.per_function[function] < max(STATE.per_function.values())
    ):
        return False
    group = (function, mode)
    done, plain = STATE.profiled.get(group, 0), STATE.unprofiled.get(group, 0)
    if done >= STATE.profile_limit or 3 * done + 2 > plain:
        return False
    from torch.autograd import profiler as autograd_profiler

    return not autograd_profiler._is_profiler_enabled  # the program runs its own profiler


def _record(
    index: int,
    where: tuple[str, str, int, str | None],
    start: int,
    wall: int,
    seen: int,
    ok: bool,
    mode: str,
    profiled: bool,
    opened_here: bool,
    profiler_ns: int,
    cpu: int | None = None,
) -> None:
    function, file, line, wraps = where
    warmup = bool(STATE.compiled) or seen < STATE.warmup
    if warmup or not ok:
        _discard_window()
    elif opened_here:
        STATE.profiled[(function, mode)] = STATE.profiled.get((function, mode), 0) + 1
    elif not profiled:
        STATE.unprofiled[(function, mode)] = STATE.unprofiled.get((function, mode), 0) + 1
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
        "start_ns": start,
        "wall_ns": wall,
        "mode": mode,
        "warmup": warmup,
        "profiled": profiled,
    }
    if wraps:
        event["wraps"] = wraps
    if profiler_ns:
        event["profiler_ns"] = profiler_ns
    if cpu is not None:
        event["cpu_ns"] = cpu
    if STATE.compiled:
        event["compiled"] = STATE.compiled[:32]
    if not ok:
        event["raised"] = True
    _write("cost_call", **event)


# ---------------------------------------------------------------- profile windows (one step each)


def _open_window(cuda: bool, index: int, function: str, mode: str) -> None:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    try:
        prof = profile(activities=activities, record_shapes=cuda, with_flops=cuda)
        prof.start()
        with torch.profiler.record_function("tcx.profiler_warmup"):  # its first range, outside the step
            pass
        step_range = torch.profiler.record_function(STEP_SPAN)
        step_range.__enter__()
    except Exception as exc:
        _write("cost_config", profiler_error=f"the profiler could not start: {type(exc).__name__}: {exc}")
        STATE.profile_limit = 0
        return
    STATE.window = _Window(prof, step_range, index, function, mode, cuda)


def _stop(window: _Window) -> bool:
    with contextlib.suppress(Exception):
        window.step_range.__exit__(None, None, None)
    try:
        window.prof.stop()
    except Exception:
        return False
    return True


def _discard_window() -> None:
    window, STATE.window = STATE.window, None
    if window is not None:
        _stop(window)


def _close_window(next_mode: str | None) -> None:
    """The window's step is over: its profile written. `next_mode`: the grad mode of the call that
    ended it (None: the program ended, or the step function returned)."""
    window, STATE.window = STATE.window, None
    if window is None:
        return
    if window.cuda:
        torch.cuda.synchronize()  # the step's device work belongs to it
    if not _stop(window):
        return
    events = profile_events.raw_events(window.prof)
    head = {"index": window.index, "function": window.function, "mode": window.mode}
    if isinstance(events, str):
        _write("cost_profile", **head, error=events)
        return
    if window.cuda and not STATE.cuda_noted:
        STATE.cuda_noted = True
        _write("cost_device", **profile_events.device_facts())
    ended = "step" if STATE.step_name else ("next_call" if next_mode is not None else "program_end")
    extra = {"next_mode": next_mode} if next_mode is not None else {}
    _write("cost_profile", **head, ended=ended, **extra, **profile_events.spans_of(events))
    folder = os.environ.get(EXPORT_ENV)
    if folder:
        why = profile_events.export(window.prof, window.index, folder, window.cuda)
        if why:
            _write("cost_config", profiler_error=why)


# ---------------------------------------------------------------- backward and the optimizer


def _user_site() -> tuple[str, int] | None:
    """The innermost frame of the program's own code (not torch's, not tcx's): where it called."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_NOT_USER) and not name.startswith("<"):
            return name, frame.f_lineno
        frame = frame.f_back
    return None


def _span(what: str, start: int, ok: bool, end: int | None = None, **fields: Any) -> None:
    if STATE.calls > MAX_CALL_EVENTS and not STATE.step_name:
        return  # past the listed calls there are no steps to put it in
    wall = (end or time.perf_counter_ns()) - start
    event: dict[str, Any] = {"span": what, "start_ns": start, "wall_ns": wall}
    if STATE.sites.get(what, 0) < SITES_WRITTEN:
        site = _user_site()
        if site is not None:
            STATE.sites[what] = STATE.sites.get(what, 0) + 1
            event["file"], event["line"] = site
    if not ok:
        event["raised"] = True
    _write("cost_span", **event, **fields)


def _install_backward_timing() -> str | None:
    """Each backward() and autograd.grad() outside a compiled call, timed (inside a profile window,
    also a `tcx.backward` range): the compiled backward graphs run there."""
    try:
        import torch.autograd as autograd

        originals = {"backward": autograd.backward, "grad": autograd.grad}
    except (ImportError, AttributeError) as exc:
        return unavailable("timing backward()", exc)

    def timed(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def tcx_timed_backward(*args: Any, **kwargs: Any) -> Any:
            if STATE.depth or _is_compiling():
                return original(*args, **kwargs)
            cuda = _cuda_in_use()
            start, ok = time.perf_counter_ns(), False
            try:
                if STATE.window is not None:
                    with torch.profiler.record_function(BACKWARD_SPAN):
                        result = original(*args, **kwargs)
                else:
                    result = original(*args, **kwargs)
                if cuda:
                    torch.cuda.synchronize()
                ok = True
                return result
            finally:
                _span("backward", start, ok, name=name)

        return tcx_timed_backward

    for name, original in originals.items():
        setattr(autograd, name, timed(name, original))
    return None


def _install_optimizer_timing() -> str | None:
    """Each optimizer step outside a compiled call, timed through torch's global step hooks (torch's
    own `Optimizer.step#…` range marks it in a profile)."""
    try:
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )
    except ImportError as exc:
        return unavailable("timing optimizer steps (global optimizer step hooks)", exc)

    def before(optimizer: Any, args: Any, kwargs: Any) -> None:
        if not (STATE.depth or _is_compiling()):
            STATE.optimizer_starts[id(optimizer)] = time.perf_counter_ns()

    def after(optimizer: Any, args: Any, kwargs: Any) -> None:
        start = STATE.optimizer_starts.pop(id(optimizer), None)
        if start is not None:
            if _cuda_in_use():
                torch.cuda.synchronize()
            _span("optimizer", start, True, name=type(optimizer).__name__)

    register_optimizer_step_pre_hook(before)
    register_optimizer_step_post_hook(after)
    return None


# ---------------------------------------------------------------- `step=FUNC`: the program's step


def _find_step_function(name: str) -> None:
    """Watch calls (sys.setprofile) until the program calls `name` (a function, or Class.method);
    then put a timing wrapper where the program looks it up (`cost_step_found`)."""
    previous = sys.getprofile()
    short = name.rsplit(".", 1)[-1]

    def watch(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_name != short:
            return
        code = frame.f_code
        if name != short and code.co_qualname != name:
            return
        _stop_looking_for_step()
        why = _replace_step_function(frame, code, short)
        STATE.step_calls = 1  # this first call runs untimed
        _write(
            "cost_step_found", function=code.co_qualname, compiled=False, **({"error": why} if why else {})
        )

    STATE.step_found = False
    STATE.restore_profile = previous
    sys.setprofile(watch)


def _stop_looking_for_step() -> None:
    if not STATE.step_found:
        STATE.step_found = True
        sys.setprofile(STATE.restore_profile)
        STATE.restore_profile = None


def _replace_step_function(frame: Any, code: Any, short: str) -> str | None:
    """The step function's wrapper, put where the program finds the function: its module's globals
    (a function), or the class of its first argument (a method). None when done, else why not."""
    holder: Any = None
    if short in frame.f_globals and getattr(frame.f_globals[short], "__code__", None) is code:
        holder = frame.f_globals
    elif code.co_argcount and code.co_varnames[0] in frame.f_locals:
        owner = type(frame.f_locals[code.co_varnames[0]])
        holder = next(
            (c for c in owner.__mro__ if getattr(c.__dict__.get(short), "__code__", None) is code), None
        )
    if holder is None:
        return (
            f"{code.co_qualname} is neither a module-level function nor a method, so tcx cannot time its "
            "calls: name a function the loop calls by its module-level name"
        )
    original = holder[short] if isinstance(holder, dict) else holder.__dict__[short]
    wrapper = _step_wrapper(original)
    if isinstance(holder, dict):
        holder[short] = wrapper
    else:
        setattr(holder, short, wrapper)
    return None


def _step_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def tcx_step(*args: Any, **kwargs: Any) -> Any:
        if STATE.in_step or STATE.depth or _is_compiling():
            return original(*args, **kwargs)
        index = STATE.step_calls
        STATE.step_calls += 1
        _keep_callback()
        cuda, mode, compiles = _cuda_in_use(), _grad_mode(), STATE.compiles
        group = (STATE.step_name or "step", mode)
        done, plain = STATE.profiled.get(group, 0), STATE.unprofiled.get(group, 0)
        wants = not STATE.eager and index >= max(1, STATE.warmup) and done < STATE.profile_limit
        if wants and 3 * done + 2 <= plain:
            _open_window(cuda, index, STATE.step_name or "step", mode)
        profiled = STATE.window is not None
        STATE.in_step = True
        if cuda:
            torch.cuda.synchronize()
        start, end, ok = time.perf_counter_ns(), 0, False
        try:
            result = original(*args, **kwargs)
            if cuda:
                torch.cuda.synchronize()
            ok = True
            return result
        finally:
            end = time.perf_counter_ns()
            STATE.in_step = False
            warmup = STATE.compiles != compiles or index < STATE.warmup
            if profiled and STATE.window is not None and not warmup and ok:
                STATE.profiled[group] = done + 1
                _close_window(next_mode=None)
            else:
                _discard_window()
                if not warmup and ok:
                    STATE.unprofiled[group] = plain + 1
            _span("step", start, ok, end, index=index, mode=mode, warmup=warmup, profiled=profiled)

    return tcx_step


# ---------------------------------------------------------------- the end of the run


def _finish() -> None:
    if STATE.step_name and not STATE.step_found:
        _stop_looking_for_step()
    _close_window(next_mode=None)
    _write("cost_run_end", calls=STATE.calls, cuda=_cuda_in_use(), steps=STATE.step_calls)
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
