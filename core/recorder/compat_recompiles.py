"""Compatibility layer for `tcx recompiles`: every evaluation of a compiled frame, call by call.

This is the only place that touches the private torch APIs behind the recompiles view; each
is feature-detected and a missing one becomes a one-line "not available" reason:

- `torch._dynamo.eval_frame.OptimizeContext.__call__` — wrapped so the callable a
  `torch.compile()` returns (for a function, or the `forward` of a compiled module) records
  each call: its argument signature, and afterwards the outcome read from Dynamo's cache.
- `torch._C._dynamo.eval_frame.set_guard_complete_hook` — called by Dynamo's C++ frame
  evaluation once per frame evaluation that had at least one cache entry, with whether
  the guards of one entry passed; the first call inside a top-level call is that frame's.
- `torch._dynamo.eval_frame._debug_get_cache_entry_list(code)` — the cache entries of a
  code object, most recently used first (the order Dynamo checks them); each has
  `compile_id` and `guard_manager.check_verbose(f_locals)`.
- `torch._dynamo.convert_frame.CatchErrorsWrapper.__call__` — the callback Dynamo calls on a
  cache miss, with the real frame: for a frame that already has entries, tcx evaluates each
  entry's guards on the frame's locals (what torch's recompile_reasons does) and records the
  failing guard and the actual values it read. This sees every frame, nested ones included.

Overhead: a cache hit costs one hook call, one cache-entry lookup and one compact event; after
`MAX_CALL_EVENTS` detailed events, hits are only counted (recompiles are always recorded).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch

from tcx.core.ingest.recording import RecordingWriter
from tcx.core.recorder.compat import TORCH_VERSION, unavailable, wrap_compiled_functions
from tcx.core.torchtext.guards import guard_code, scoped_sources

MAX_CALL_EVENTS = 1000
DROPPED_EVERY = 100


class _State:
    def __init__(self) -> None:
        self.writer: RecordingWriter | None = None
        self.stack: list[dict[str, Any]] = []  # one frame per top-level call in progress
        self.calls = 0
        self.dropped = 0
        self.dropped_by_entry: dict[str, int] = {}  # the cache entry that served each unlisted hit
        # code Dynamo evaluates -> the compiled callable that runs it: target, frame, signatures, last_call
        self.codes: dict[Any, dict[str, Any]] = {}
        self.get_entries: Callable[[Any], list[Any]] | None = None


STATE = _State()


def _write_final_count() -> None:
    """The exact number of unlisted hits (the periodic events above are for runs that crash)."""
    if STATE.dropped:
        _write("frame_calls_dropped", count=STATE.dropped, by_entry=STATE.dropped_by_entry, final=True)


def install(writer: RecordingWriter) -> str | None:
    """Install the per-call capture; None when installed, else why not."""
    try:
        import torch._dynamo.convert_frame as cf
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        set_hook = torch._C._dynamo.eval_frame.set_guard_complete_hook
        catch_call = cf.CatchErrorsWrapper.__call__
    except (ImportError, AttributeError) as exc:
        return unavailable("the per-call cache capture (recompiles timeline)", exc)
    missing = wrap_compiled_functions(_wrap_compiled, "the per-call cache capture (recompiles timeline)")
    if missing:
        return missing
    STATE.writer = writer
    STATE.get_entries = _debug_get_cache_entry_list
    from tcx.core.recorder.captures import at_end, at_start

    at_end(_write_final_count)
    at_start(_start_run)
    previous: list[Any] = [None]

    def guard_complete(cache_hit: bool) -> bool:
        if STATE.stack and STATE.stack[-1]["hook"] is None:
            STATE.stack[-1]["hook"] = bool(cache_hit)
        if previous[0] is not None:
            return previous[0](cache_hit)
        return cache_hit

    previous[0] = set_hook(guard_complete)

    @functools.wraps(catch_call)
    def catch_errors_call(self: Any, frame: Any, cache_entry: Any, frame_state: Any) -> Any:
        if cache_entry is not None:
            try:
                _record_guard_check(frame)
            except Exception as err:
                _write("guard_check", hook_error=f"{type(err).__name__}: {err}")
        return catch_call(self, frame, cache_entry, frame_state)

    cf.CatchErrorsWrapper.__call__ = catch_errors_call
    _write("recompile_config", **recompile_config())
    return None


def _start_run() -> None:
    """A new in-process recording: calls are numbered from 0 again and its config is written."""
    STATE.calls = 0
    STATE.dropped = 0
    STATE.dropped_by_entry = {}
    _write("recompile_config", **recompile_config())


def recompile_config() -> dict[str, Any]:
    try:
        cfg = torch._dynamo.config
        if hasattr(cfg, "recompile_limit"):
            return {"limit": cfg.recompile_limit, "config": "torch._dynamo.config.recompile_limit"}
        return {"limit": cfg.cache_size_limit, "config": "torch._dynamo.config.cache_size_limit"}
    except AttributeError:
        return {"limit": None, "config": None}


def _write(kind: str, **fields: Any) -> None:
    if STATE.writer is not None:
        STATE.writer.write(kind, **fields)


# ---------------------------------------------------------------- top-level calls


def _target_of(fn: Any) -> Any:
    """The Python function whose frame Dynamo compiles for `fn` (a module's forward for __call__)."""
    owner = getattr(fn, "__self__", None)
    func = getattr(fn, "__func__", None)
    if isinstance(owner, torch.nn.Module) and func in (
        torch.nn.Module.__call__,
        getattr(torch.nn.Module, "_wrapped_call_impl", None),
    ):
        return owner.forward
    return fn


def _evaluated_callable(compiled: Any, fn: Any) -> Any:
    """The callable whose frame Dynamo evaluates when `compiled` runs: `fn` itself, or the frame
    torch puts around a callable it cannot start tracing at (`external_utils.wrap_inline`'s
    `inner`, e.g. for a method decorated with `@torch.no_grad()`, whose `decorate_context`
    lives in a file Dynamo skips). torch keeps it as `_torchdynamo_orig_callable`."""
    evaluated = getattr(compiled, "_torchdynamo_orig_callable", None)
    return fn if evaluated is None else evaluated


def _wrap_compiled(compiled: Callable[..., Any], fn: Any) -> Callable[..., Any]:
    target = _target_of(fn)
    frame = _target_of(_evaluated_callable(compiled, fn))
    func = getattr(frame, "__func__", frame)
    code = getattr(func, "__code__", None)
    if code is None:
        return compiled
    target_func = getattr(target, "__func__", target)
    info: dict[str, Any] = {
        "target": target,
        "frame": frame,
        "signature": _signature_of(target),
        "frame_signature": _signature_of(func, follow_wrapped=False),
        # the callable the program compiled, when Dynamo evaluates another frame around it
        "wraps": _qualname(target) if getattr(target_func, "__code__", None) is not code else None,
        "last_call": None,
    }
    STATE.codes.setdefault(code, info)
    is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)

    @functools.wraps(compiled)
    def tcx_recorded_call(*args: Any, **kwargs: Any) -> Any:
        if is_compiling():
            return compiled(*args, **kwargs)
        call = {"hook": None, "before": _entry_ids(code)}
        STATE.stack.append(call)
        try:
            return compiled(*args, **kwargs)
        finally:
            STATE.stack.pop()
            try:
                _record_call(code, info, call, args, kwargs)
            except Exception as err:
                _write("frame_call", hook_error=f"{type(err).__name__}: {err}")

    return tcx_recorded_call


def _signature_of(fn: Any, follow_wrapped: bool = True) -> inspect.Signature | None:
    try:
        return inspect.signature(fn, follow_wrapped=follow_wrapped)
    except (TypeError, ValueError):
        return None


def _qualname(fn: Any) -> str:
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__)


def _entry_ids(code: Any) -> list[str]:
    assert STATE.get_entries is not None
    return [str(e.compile_id) for e in STATE.get_entries(code)]


def _bind(info: dict[str, Any], args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """The arguments as the program passed them, named by the compiled callable's signature (the
    one the user wrote, through decorators); `self` left out."""
    sig = info.get("signature")
    if sig is None:
        return None
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return dict(bound.arguments)


def _frame_locals(info: dict[str, Any], args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """The locals of the frame Dynamo evaluates for this call (what its guards read): its own
    parameters (a bound method's `self` first) and the closure variables it uses."""
    frame, sig = info["frame"], info.get("frame_signature")
    if sig is None:
        return None
    if inspect.ismethod(frame):
        args = (frame.__self__, *args)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    f_locals = dict(bound.arguments)
    func = getattr(frame, "__func__", frame)
    for name, cell in zip(func.__code__.co_freevars, getattr(func, "__closure__", None) or (), strict=False):
        try:
            f_locals[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    return f_locals


def _record_call(code: Any, info: dict[str, Any], call: dict[str, Any], args: tuple, kwargs: dict) -> None:
    before: list[str] = call["before"]
    after = _entry_ids(code)
    new = [cid for cid in after if cid not in before]
    if new:
        outcome, entry = ("recompile" if before else "compile"), new[0]
    elif call["hook"] is True and after:
        outcome, entry = "hit", after[0]
    else:
        outcome, entry = "eager", None
    info["last_call"] = (args, kwargs)
    STATE.codes[code] = info  # what-if evaluates on the callable called last
    index = STATE.calls
    STATE.calls += 1
    if outcome == "hit" and index >= MAX_CALL_EVENTS:
        STATE.dropped += 1
        STATE.dropped_by_entry[entry] = STATE.dropped_by_entry.get(entry, 0) + 1
        if STATE.dropped == 1 or STATE.dropped % DROPPED_EVERY == 0:
            _write("frame_calls_dropped", count=STATE.dropped, by_entry=STATE.dropped_by_entry)
        return
    named = _bind(info, args, kwargs)
    event: dict[str, Any] = {
        "index": index,
        "function": code.co_name,
        "file": code.co_filename,
        "line": code.co_firstlineno,
        "outcome": outcome,
        "entry": entry,
        "checked": before,
        "args": _signature(named) if named is not None else None,
    }
    if info.get("wraps"):
        event["wraps"] = info["wraps"]
    if outcome != "hit":
        event["entries_after"] = after
        event["config"] = recompile_config()
    if STATE.dropped:
        event["dropped_before"] = STATE.dropped
    _write("frame_call", **event)


def _signature(f_locals: dict[str, Any]) -> list[dict[str, Any]]:
    return [describe_value(name, v) for name, v in f_locals.items()][:32]


def describe_value(name: str, v: Any) -> dict[str, Any]:
    """A compact, JSON-safe description of one argument (what guards look at)."""
    if isinstance(v, torch.Tensor):
        return {
            "name": name,
            "kind": "tensor",
            "shape": list(v.shape),
            "dtype": str(v.dtype).removeprefix("torch."),
            "device": str(v.device),
            "requires_grad": bool(v.requires_grad),
        }
    if v is None or isinstance(v, (bool, int, float, str)):
        return {"name": name, "kind": "value", "value": repr(v)[:60]}
    if isinstance(v, torch.nn.Module):
        return {"name": name, "kind": "module", "type": type(v).__name__, "id": id(v)}
    if isinstance(v, (tuple, list)) and len(v) <= 8:
        return {
            "name": name,
            "kind": type(v).__name__,
            "items": [describe_value(f"{name}[{i}]", x) for i, x in enumerate(v)],
        }
    return {"name": name, "kind": "object", "type": type(v).__qualname__, "id": id(v)}


# ---------------------------------------------------------------- cache misses (every frame)


def _record_guard_check(frame: Any) -> None:
    """A frame with cache entries missed: evaluate each entry's guards the way torch does."""
    assert STATE.get_entries is not None
    code = frame.f_code
    entries = STATE.get_entries(code)
    if not entries:
        return
    f_locals = dict(frame.f_locals)
    results = [_check_entry(e, f_locals, frame.f_globals) for e in entries]
    _write(
        "guard_check",
        function=code.co_name,
        file=code.co_filename,
        line=code.co_firstlineno,
        top_level=code in STATE.codes,
        args=_signature({k: f_locals[k] for k in code.co_varnames[: code.co_argcount] if k in f_locals}),
        results=results,
    )


def _check_entry(entry: Any, f_locals: dict[str, Any], f_globals: dict[str, Any]) -> dict[str, Any]:
    dbg = entry.guard_manager.check_verbose(f_locals)
    parts = [str(p) for p in (dbg.verbose_code_parts or [])]
    out: dict[str, Any] = {"compile_id": str(entry.compile_id), "passed": bool(dbg.result)}
    if not dbg.result:
        out["failed"] = parts[:4]
        out["actual"] = _actual_values(parts[:1], f_locals, f_globals)
    return out


def _actual_values(parts: list[str], f_locals: dict[str, Any], f_globals: dict[str, Any]) -> dict[str, str]:
    """Values of the sources a failed guard reads (`L['x'].size()[0]` -> `32`)."""
    values: dict[str, str] = {}
    for part in parts:
        for source in scoped_sources(guard_code(part)):
            try:
                value = eval(source, {"__builtins__": {}}, {"L": f_locals, "G": f_globals})
            except Exception:
                continue
            values[source] = _short_value(value)
    return values


def _short_value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        d = describe_value("", value)
        return f"Tensor({d['dtype']}, {d['shape']}, requires_grad={d['requires_grad']})"
    return repr(value)[:80]


# ---------------------------------------------------------------- what-if


def evaluate_what_if(specs: list[list[dict]], function: str | None, writer: RecordingWriter) -> None:
    """For each spec: which recorded cache entry would serve it, or which guards would fail."""
    from tcx.core.recorder.program import _build

    STATE.writer = writer
    if STATE.get_entries is None:
        writer.write("what_if", error=f"the per-call capture is not available on torch {TORCH_VERSION}")
        return
    code, info = _what_if_code(function)
    for index, spec in enumerate(specs):
        event: dict[str, Any] = {"index": index, "spec": spec}
        if code is None:
            event["error"] = (
                "no compiled function with recorded calls"
                + (f" named {function!r}" if function else "")
                + " to evaluate it on"
            )
            writer.write("what_if", **event)
            continue
        try:
            torch.manual_seed(0)
            values = [_build(arg) for arg in spec]
            args, kwargs = _what_if_call(info, values)
            f_locals = _frame_locals(info, args, kwargs)
            if f_locals is None:
                raise ValueError(f"they do not fit the parameters of {code.co_name}")
        except Exception as exc:
            event["error"] = f"cannot build these inputs: {type(exc).__name__}: {exc}"
            writer.write("what_if", **event)
            continue
        entries = STATE.get_entries(code)
        f_globals = getattr(getattr(info["frame"], "__func__", info["frame"]), "__globals__", {})
        event.update(
            function=code.co_name,
            args=_signature(_bind(info, args, kwargs) or {}),
            results=[_check_entry(e, f_locals, f_globals) for e in entries],
            config=recompile_config(),
        )
        writer.write("what_if", **event)


def _what_if_code(function: str | None) -> tuple[Any, dict[str, Any]]:
    candidates = [(c, i) for c, i in STATE.codes.items() if i.get("last_call") is not None]
    if function:
        named = [(c, i) for c, i in candidates if function in (c.co_name, _short_name(i.get("wraps")))]
        candidates = named or candidates
    return candidates[-1] if candidates else (None, {})


def _short_name(qualname: str | None) -> str | None:
    return qualname.rsplit(".", 1)[-1] if qualname else None


def _what_if_call(info: dict[str, Any], values: list[Any]) -> tuple[tuple, dict]:
    """The last recorded call's arguments, with the spec's values in place of the first ones."""
    args, kwargs = info["last_call"]
    sig = info.get("signature")
    if sig is None:
        raise ValueError("the compiled callable's signature is not available")
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    names = list(bound.arguments)
    if len(values) > len(names):
        raise ValueError(f"{len(values)} values for {len(names)} parameters ({', '.join(names)})")
    for name, value in zip(names, values, strict=False):
        bound.arguments[name] = value
    return bound.args, bound.kwargs
