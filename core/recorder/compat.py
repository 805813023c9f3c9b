"""The compatibility layer: the ONLY module that touches private torch APIs.

Every entry point feature-detects what it needs and returns `None` when it is installed
or a one-line reason when it is not, so a torch release that moves an internal disables
one view ("not available on torch X.Y: ...") instead of the whole tool.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import torch

TORCH_VERSION = torch.__version__.split("+")[0]


def unavailable(what: str, exc: BaseException) -> str:
    return f"{what} is not available on torch {TORCH_VERSION} ({type(exc).__name__}: {exc})"


def disable_compile_caches() -> str | None:
    """Cache hits skip the stages we record; PGO would make recompiles depend on earlier runs."""
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


def attach_trace_handler(handler: logging.Handler) -> str | None:
    """Structured trace: torch emits iff `trace_log` has a handler, no env var needed."""
    try:
        from torch._logging._internal import trace_log

        trace_log.addHandler(handler)
        return None
    except (ImportError, AttributeError) as exc:
        return unavailable("the structured trace", exc)


def detach_trace_handler(handler: logging.Handler) -> None:
    try:
        from torch._logging._internal import trace_log

        trace_log.removeHandler(handler)
    except (ImportError, AttributeError):
        pass


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


def _describe_break(tx: Any, reason: str, exc: Any, registry: dict, dexc: Any) -> dict[str, Any]:
    user_stack = getattr(exc, "real_stack", None)
    if user_stack is None:
        user_stack = torch._guards.TracingContext.extract_stack()
    above = getattr(dexc, "get_stack_above_dynamo", None)
    full = list(above()) + list(user_stack) if above else list(user_stack)
    collapse = getattr(dexc, "collapse_resume_frames", None)
    if collapse:
        full = list(collapse(full))
    gb_type = getattr(exc, "gb_type", None) or type(exc).__name__
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


def override_compile(
    backend: str | None,
    dynamic: bool | None,
    mode: str | None,
    on_call: Callable[[dict[str, Any]], None],
) -> str | None:
    """Make every torch.compile() in the program use tcx's backend/dynamic/mode choice."""
    original = torch.compile

    @functools.wraps(original)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        asked = {k: _short(v) for k, v in kwargs.items()}
        if backend is not None:
            kwargs["backend"] = backend
        if kwargs.get("backend", "inductor") not in (None, "inductor"):
            kwargs.pop("mode", None)
            kwargs.pop("options", None)
        elif mode is not None:
            kwargs["mode"] = mode
        if dynamic is not None:
            kwargs["dynamic"] = dynamic
        on_call({"asked": asked, "used": {k: _short(v) for k, v in kwargs.items()}, "target": _short(model)})
        return original(model, **kwargs) if model is not None else original(**kwargs)

    torch.compile = compile
    return None


def _short(value: Any) -> str:
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    return name if isinstance(name, str) else repr(value)[:80]


def original_callable(fn: Any) -> Any:
    """The user's function behind a `@torch.compile` wrapper, if it is one."""
    return getattr(fn, "_torchdynamo_orig_callable", None)
