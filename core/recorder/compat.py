"""The compatibility layer: the ONLY module that touches private torch APIs.

Every entry point feature-detects what it needs and returns `None` when it is installed
or a one-line reason when it is not, so a torch release that moves an internal disables
one view ("not available on torch X.Y: ...") instead of the whole tool.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

TORCH_VERSION = torch.__version__.split("+")[0]


class TcxHookError(RuntimeError):
    """tcx's own code failed while the program ran (a hook could not do its part): reported as
    tcx's failure (exit 5), never as the program's exception (core/recorder/program.tcx_fault)."""


def unavailable(what: str, exc: BaseException) -> str:
    return f"{what} is not available on torch {TORCH_VERSION} ({type(exc).__name__}: {exc})"


def wrap_compiled_functions(
    wrap: Callable[[Callable[..., Any], Any], Callable[..., Any]], what: str
) -> str | None:
    """Every function `torch.compile` returns (not a module) goes through `wrap(compiled, fn)`, and the
    program gets what that returns; a wrapper that raises leaves torch's own. None when installed,
    else why not (`what` names what needs it)."""
    try:
        import torch._dynamo.eval_frame as ef

        optimize_call = ef.OptimizeContext.__call__
    except (ImportError, AttributeError) as exc:
        return unavailable(what, exc)

    @functools.wraps(optimize_call)
    def optimize_context_call(self: Any, fn: Any) -> Any:
        result = optimize_call(self, fn)
        if isinstance(fn, torch.nn.Module) or not inspect.isfunction(result):
            return result
        try:
            return wrap(result, fn)
        except Exception:  # a capture must never change what the program does
            return result

    ef.OptimizeContext.__call__ = optimize_context_call
    return None


# Set (to "1") by the test suite: where tcx turns the compile caches off it keeps Inductor's cache of
# compiled kernels (a C++ or Triton binary found by its source's hash), so a kernel built once in a
# session is not built by gcc again. Every stage still runs and is recorded (the FX-graph and
# AOTAutograd caches, whose hits skip stages, and PGO stay off); only compile seconds are lower.
KEEP_KERNEL_CACHE = "TCX_KEEP_KERNEL_CACHE"


def hide_from_dynamo() -> str | None:
    """Dynamo never traces nor inlines tcx's own code.

    tcx's hooks run inside the program's compiled regions: the CUDA preview's tensor hooks on
    every op of the eager code between graphs, the wrappers of compiled functions. Dynamo converts
    every Python frame that starts under its frame hook unless the frame's file is skipped, and
    would trace a hook as if it were the program's code (tracing the preview's value hook crashed
    Dynamo inside HF Llama: "'dict' object has no attribute 'node'"). tcx's folders go on Dynamo's
    skip list, as torch's own are; a wrapper of a compiled function keeps torch's
    `_torchdynamo_inline` (functools.wraps copies it), so a compiled call inside another compiled
    function is still inlined as in the program's own run. None when installed, else why not."""
    try:
        from torch._dynamo import trace_rules

        add = trace_rules.add
    except (ImportError, AttributeError) as exc:
        return unavailable("keeping tcx's hooks out of Dynamo's traces", exc)
    try:
        for package in ("tcx", "tcx.core"):  # one folder when installed; two in a source checkout
            add(package)
    except Exception as exc:  # a moved internal: the hooks stay visible, the run goes on
        return unavailable("keeping tcx's hooks out of Dynamo's traces", exc)
    return None


def reopen_trace_folder() -> str | None:
    """Read TORCH_TRACE again (torch reads it once, at import): a warm fork's run has its own folder.

    torch keeps the handler it made at import unless it is cleared first (`_init_logs` makes one
    only where there is none); `_init_logs` then sets every torch logger up from the environment,
    as at import."""
    try:
        from torch._logging import _internal

        _internal.LOG_TRACE_HANDLER = None
        _internal._init_logs()
        return None
    except (ImportError, AttributeError) as exc:
        return unavailable("reading TORCH_TRACE again in a warm start", exc)


def can_reopen_trace_folder() -> bool:
    try:
        from torch._logging import _internal
    except ImportError:
        return False
    return hasattr(_internal, "_init_logs") and hasattr(_internal, "LOG_TRACE_HANDLER")


def disable_compile_caches() -> str | None:
    """Cache hits skip the stages we record; PGO would make recompiles depend on earlier runs."""
    if os.environ.get(KEEP_KERNEL_CACHE) == "1":
        return _disable_graph_caches()
    try:
        torch.compiler.config.force_disable_caches = True
        return None
    except AttributeError:
        try:
            import torch._inductor.config as inductor_config

            inductor_config.force_disable_caches = True
            return None
        except (ImportError, AttributeError) as exc:
            return unavailable("disabling compile caches", exc)


def _disable_graph_caches() -> str | None:
    """The caches whose hits skip recorded stages off, the compiled-kernel cache left on."""
    try:
        import torch._dynamo.config as dynamo_config
        import torch._functorch.config as functorch_config
        import torch._inductor.config as inductor_config
    except ImportError as exc:
        return unavailable("disabling compile caches", exc)
    for config, names in (
        (inductor_config, ("fx_graph_cache", "fx_graph_remote_cache", "autotune_local_cache")),
        (functorch_config, ("enable_autograd_cache", "enable_remote_autograd_cache")),
        (dynamo_config, ("automatic_dynamic_local_pgo", "automatic_dynamic_remote_pgo")),
    ):
        for name in names:
            if hasattr(config, name):
                setattr(config, name, False)
    return None


def attach_trace_handler(handler: logging.Handler) -> str | None:
    """Structured trace: torch emits iff `trace_log` has a handler, no env var needed.

    The handler is pinned (see `_pinned_class`): the program's own logging configuration
    cannot detach it or silence the logger, so capture never depends on logger state.
    """
    try:
        from torch._logging._internal import trace_log

        _pin(trace_log, handler)
        return None
    except (ImportError, AttributeError, TypeError) as exc:
        return unavailable("the structured trace", exc)


def detach_trace_handler(handler: logging.Handler) -> None:
    try:
        from torch._logging._internal import trace_log
    except (ImportError, AttributeError):
        return
    _unpin(trace_log, handler)


# Attributes of a Logger that logging configuration writes and the pinned class fixes.
_PINNED_ATTRS = ("handlers", "disabled", "propagate", "level", "isEnabledFor")


def _always(level: int) -> bool:
    return True


def _ignore(self: logging.Logger, value: object) -> None:
    """Assignments by the program (or dictConfig) to a pinned attribute are dropped."""


def _handlers(self: Any) -> list[logging.Handler]:
    own = self.__dict__["_tcx_handlers"]
    own.extend(h for h in self._tcx_pinned if h not in own)
    return own


def _set_handlers(self: Any, value: list[logging.Handler]) -> None:
    self.__dict__["_tcx_handlers"] = list(value)  # the pinned handlers come back on the next read


@functools.cache
def _pinned_class(base: type) -> type:
    """A subclass of the trace logger's class whose tcx handlers cannot be lost.

    `logging.config.dictConfig` (disable_existing_loggers, or configuring the "torch" logger:
    handlers = [], propagate = True, level NOTSET), `logging.disable`, `setLevel` or
    `removeHandler` would each stop torch from emitting structured-trace events to tcx. The
    pinned logger keeps tcx's handlers, stays enabled at DEBUG, and never propagates (as torch
    configures it), whatever the program assigns.
    """
    return type(
        "TcxPinnedTraceLogger",
        (base,),
        {
            "handlers": property(_handlers, _set_handlers),
            "disabled": property(lambda self: False, _ignore),
            "propagate": property(lambda self: False, _ignore),
            "level": property(lambda self: logging.DEBUG, _ignore),
            "isEnabledFor": property(lambda self: _always, _ignore),
        },
    )


def _pin(log: logging.Logger, handler: logging.Handler) -> None:
    if "_tcx_pinned" not in log.__dict__:
        saved = {name: log.__dict__.pop(name) for name in _PINNED_ATTRS if name in log.__dict__}
        base = type(log)
        try:
            log.__class__ = _pinned_class(base)
        except TypeError:
            log.__dict__.update(saved)
            raise
        log.__dict__.update(
            _tcx_base=base,
            _tcx_saved=saved,
            _tcx_pinned=[],
            _tcx_handlers=list(saved.get("handlers", [])),
        )
    if handler not in log.__dict__["_tcx_pinned"]:
        log.__dict__["_tcx_pinned"].append(handler)


def _unpin(log: logging.Logger, handler: logging.Handler) -> None:
    pinned = log.__dict__.get("_tcx_pinned")
    if pinned is None:
        log.removeHandler(handler)
        return
    if handler in pinned:
        pinned.remove(handler)
    own = log.__dict__["_tcx_handlers"]
    if handler in own:
        own.remove(handler)
    if pinned:
        return
    state = {
        name: log.__dict__.pop(name) for name in ("_tcx_base", "_tcx_saved", "_tcx_pinned", "_tcx_handlers")
    }
    log.__class__ = state["_tcx_base"]
    log.__dict__.update(state["_tcx_saved"])
    # The logger's own handlers (torch's LazyTraceHandler) come back even when the program's
    # logging configuration cleared them during the block; handlers it added stay.
    saved = list(state["_tcx_saved"].get("handlers", []))
    log.__dict__["handlers"] = saved + [h for h in state["_tcx_handlers"] if h not in saved]


def caches_disabled(value: bool) -> bool | None:
    """Set force_disable_caches; return the previous value (None where torch has no such flag)."""
    config = getattr(getattr(torch, "compiler", None), "config", None)
    if config is None or not hasattr(config, "force_disable_caches"):
        return None
    previous = bool(config.force_disable_caches)
    config.force_disable_caches = value
    return previous


def reset_dynamo() -> None:
    """Forget every compiled frame, so the next calls really compile (and are recorded)."""
    torch._dynamo.reset()


def route_torch_logs(handler: logging.Handler) -> str | None:
    """Send torch's own log output (warnings such as the `.item()` one) to `handler`, not stderr."""
    try:
        import torch._logging._internal as li

        names = set(li.log_registry.get_log_qnames()) | set(li.log_registry.get_artifact_log_qnames())
        for name in names:
            logger = logging.getLogger(name)
            li._clear_handlers(logger)
            logger.addHandler(handler)
        return None
    except (ImportError, AttributeError) as exc:
        return unavailable("routing torch logs", exc)


def graph_break_registry() -> dict[str, str]:
    """gb_type -> GB id (e.g. "GB0170"); empty before torch 2.8."""
    try:
        from torch._dynamo.exc import _load_gb_type_to_gb_id_map

        return dict(_load_gb_type_to_gb_id_map())
    except (ImportError, AttributeError, OSError):
        return {}


def current_compile_id() -> tuple[str | None, int | None]:
    try:
        tid = torch._guards.CompileContext.current_trace_id()
    except AttributeError:
        return None, None
    if tid is None:
        return None, None
    return str(tid.compile_id), tid.attempt


def _frame_dict(fs: Any) -> dict[str, Any]:
    return {
        "file": fs.filename,
        "line": fs.lineno,
        "name": fs.name,
        "code": (fs.line or "").strip(),
    }


def install_graph_break_hook(on_break: Callable[[dict[str, Any]], None]) -> str | None:
    """Typed graph breaks: wrap `InstructionTranslatorBase.log_graph_break`.

    torch emits the `dynamo_graph_break_reason` artifact from the same method, under the
    same `exc.logged` condition, so each typed event pairs with the artifact that follows.
    """
    try:
        import torch._dynamo.exc as dexc
        import torch._dynamo.symbolic_convert as sc

        original = sc.InstructionTranslatorBase.log_graph_break
    except (ImportError, AttributeError) as exc:
        return unavailable("graph-break typing", exc)
    registry = graph_break_registry()

    @functools.wraps(original)
    def log_graph_break(self: Any, code_options: Any, reason: str, exc: Any) -> Any:
        if not getattr(exc, "logged", False):
            try:
                on_break(_describe_break(self, reason, exc, registry, dexc))
            except Exception as err:  # recording must never change what Dynamo does
                on_break({"hook_error": f"{type(err).__name__}: {err}"})
        return original(self, code_options, reason, exc)

    sc.InstructionTranslatorBase.log_graph_break = log_graph_break
    return None


def break_type(exc: Any, registry: dict[str, str]) -> str:
    """torch's title for a graph break (its gb_type).

    An exception that carries none has the title as the first line of its message when torch
    re-raised an `Unsupported` as another type: `StepUnsupported` (torch >= 2.9, from
    `torch._dynamo.step_unsupported()`) keeps only the message of "Call to
    `torch._dynamo.step_unsupported()`" (GB4636). The line counts when torch's graph-break
    registry knows it; otherwise (no registry before torch 2.8) the exception's type names it."""
    gb_type = getattr(exc, "gb_type", None)
    if gb_type:
        return str(gb_type)
    lines = str(getattr(exc, "msg", None) or exc).strip().splitlines()
    title = lines[0].strip() if lines else ""
    return title if title in registry else type(exc).__name__


def _describe_break(tx: Any, reason: str, exc: Any, registry: dict, dexc: Any) -> dict[str, Any]:
    user_stack = getattr(exc, "real_stack", None)
    if user_stack is None:
        user_stack = torch._guards.TracingContext.extract_stack()
    above = getattr(dexc, "get_stack_above_dynamo", None)
    full = list(above()) + list(user_stack) if above else list(user_stack)
    collapse = getattr(dexc, "collapse_resume_frames", None)
    if collapse:
        full = list(collapse(full))
    gb_type = break_type(exc, registry)
    gb_id = registry.get(gb_type)
    compile_id, attempt = current_compile_id()
    return {
        "compile_id": compile_id,
        "attempt": attempt,
        "gb_type": gb_type,
        "gb_id": gb_id,
        "frame": tx.f_code.co_name,
        "frame_file": tx.f_code.co_filename,
        "reason": str(reason).splitlines()[0] if reason else "",
        "user_stack": [_frame_dict(fs) for fs in full],
    }


def install_compile_hook(on_compile: Callable[[str], None]) -> str | None:
    """Every frame Dynamo compiles, seen by tcx itself: wrap `convert_frame._compile`, which gets
    each compile's id (its `compile_id` keyword) before anything of the compile is logged.

    tcx's counts come from the structured trace; these ids are what the trace must account for. A
    program that silences the trace below the logging API (e.g. replaces
    `torch._logging.trace_structured` with a no-op) still compiles through here, so the recording
    shows compiles without their trace records: lost capture (core/model/status.py), never a pass."""
    try:
        import torch._dynamo.convert_frame as cf

        original = cf._compile
        if "compile_id" not in inspect.signature(original).parameters:
            raise AttributeError("convert_frame._compile takes no compile_id")
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        return unavailable("seeing each compile", exc)

    @functools.wraps(original)
    def _compile(*args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(Exception):  # recording must never change what Dynamo does
            on_compile(str(kwargs.get("compile_id")))
        return original(*args, **kwargs)

    cf._compile = _compile
    return None


def override_compile(
    backend: str | None,
    dynamic: bool | None,
    mode: str | None,
    on_call: Callable[[dict[str, Any]], None],
) -> str | None:
    """Record every torch.compile() call of the program (what it asks, what it got), and make it use
    the user's backend/dynamic/mode override where one was given; with none, the program's own
    arguments pass through untouched."""
    original = torch.compile

    @functools.wraps(original)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:  # `@torch.compile(...)`: recorded once, when it gets its function
            return lambda fn: compile(fn, **kwargs)
        asked = {k: _short(v) for k, v in kwargs.items()}
        if backend is not None:
            kwargs["backend"] = backend
            if backend != "inductor":  # Inductor's own settings mean nothing to another backend
                kwargs.pop("mode", None)
                kwargs.pop("options", None)
        if mode is not None and kwargs.get("backend", "inductor") == "inductor":
            kwargs["mode"] = mode
        if dynamic is not None:
            kwargs["dynamic"] = dynamic
        used = {k: _short(v) for k, v in kwargs.items()}
        on_call({"asked": asked, "used": used, "target": _short(model), **_caller()})
        return original(model, **kwargs)

    torch.compile = compile
    return None


def _caller() -> dict[str, Any]:
    """The file and line of the program's `torch.compile(...)` call (the first frame outside this module)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back  # type: ignore[assignment]
    return {"file": frame.f_code.co_filename, "line": frame.f_lineno} if frame is not None else {}


def _short(value: Any) -> str:
    if isinstance(value, str):
        return value[:80]
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    return name if isinstance(name, str) else repr(value)[:80]


def original_callable(fn: Any) -> Any:
    """The user's function behind a `@torch.compile` wrapper, if it is one."""
    return getattr(fn, "_torchdynamo_orig_callable", None)
