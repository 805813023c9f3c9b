"""Compatibility layer for `tcx fix`: apply one remedy in the recorder child, keep the outputs.

The `fix=SPEC.json` capture runs before the program starts. SPEC says what to apply:

- `config`: assignments to `torch._dynamo.config` / `torch._inductor.config` (a value, or a callable
  named by "module.attr" added to a set such as `reorderable_logging_functions`);
- `mark_dynamic`: `torch._dynamo.mark_dynamic(arg, dim)` on a named argument of a compiled function,
  called just before each call of it;
- `outputs`: a file where the outputs of every outermost call of a compiled callable are written
  (tensors detached, on the CPU) when the program ends, so the parent compares runs;
- `seed`: `torch.manual_seed` and `random.seed` before the program starts, so two runs of a program
  that draws random inputs without seeding draw the same ones.

Private API touched, feature-detected: `torch._dynamo.eval_frame.OptimizeContext.__call__` (wrapped,
as the recompiles and cost captures do, to see each call of a compiled callable). Nothing here edits
the user's files.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import random
from collections.abc import Callable
from typing import Any

import torch

from tcx.core.ingest.recording import RecordingWriter
from tcx.core.recorder.compat import unavailable
from tcx.core.recorder.compat_recompiles import _evaluated_callable, _target_of

MAX_OUTPUT_ELEMENTS = 50_000_000  # elements kept across all calls; later calls are counted, not kept


class _State:
    def __init__(self) -> None:
        self.writer: RecordingWriter | None = None
        self.mark_dynamic: list[dict[str, Any]] = []
        self.outputs_path: str | None = None
        self.calls: list[dict[str, Any]] = []
        self.elements = 0
        self.dropped = 0
        self.depth = 0
        self.errors: list[str] = []


STATE = _State()


def install(writer: RecordingWriter, argument: str | None = None) -> str | None:
    """Apply the remedy the JSON file `argument` describes; None when applied, else why not."""
    if not argument:
        return "fix capture needs a spec file (fix=SPEC.json)"
    with open(argument, encoding="utf-8") as fh:
        spec = json.load(fh)
    STATE.writer = writer
    applied = [_assign(item) for item in spec.get("config") or []]
    failed = [a for a in applied if a.get("error")]
    if spec.get("seed") is not None:
        torch.manual_seed(int(spec["seed"]))
        random.seed(int(spec["seed"]))
    STATE.mark_dynamic = list(spec.get("mark_dynamic") or [])
    STATE.outputs_path = spec.get("outputs")
    wrapped = None
    if STATE.mark_dynamic or STATE.outputs_path:
        wrapped = _wrap_optimize_context()
    writer.write("fix_applied", config=applied, mark_dynamic=STATE.mark_dynamic, calls_hook=wrapped)
    from tcx.core.recorder.captures import at_end

    at_end(_finish)
    if failed:
        return "; ".join(str(a["error"]) for a in failed)
    return wrapped


def _assign(item: dict[str, Any]) -> dict[str, Any]:
    """One config assignment: `value` set, or the callable named by `add` added to a set."""
    done = dict(item)
    try:
        config = importlib.import_module(item["module"])
        name = item["name"]
        if not hasattr(config, name):
            done["error"] = f"{item['module']}.{name} does not exist on torch {torch.__version__}"
            return done
        if "add" in item:
            owner, _, attr = str(item["add"]).rpartition(".")
            fn = getattr(importlib.import_module(owner), attr)
            current = getattr(config, name)
            if isinstance(current, set):
                current.add(fn)
            else:
                setattr(config, name, [*current, fn])
        else:
            setattr(config, name, item["value"])
        done["now"] = repr(getattr(config, name))[:200]
    except Exception as exc:  # a remedy that cannot be applied says so; the run goes on without it
        done["error"] = f"{type(exc).__name__}: {exc}"
    return done


def _wrap_optimize_context() -> str | None:
    try:
        import torch._dynamo.eval_frame as ef

        optimize_call = ef.OptimizeContext.__call__
    except (ImportError, AttributeError) as exc:
        return unavailable("seeing the calls of compiled callables (mark_dynamic, outputs)", exc)

    @functools.wraps(optimize_call)
    def optimize_context_call(self: Any, fn: Any) -> Any:
        result = optimize_call(self, fn)
        if isinstance(fn, torch.nn.Module) or not inspect.isfunction(result):
            return result
        try:
            return _wrap_compiled(result, fn)
        except Exception:  # applying a remedy must never change what the program does otherwise
            return result

    ef.OptimizeContext.__call__ = optimize_context_call
    return None


def _wrap_compiled(compiled: Callable[..., Any], fn: Any) -> Callable[..., Any]:
    target = _target_of(fn)
    frame = _target_of(_evaluated_callable(compiled, fn))
    code = getattr(getattr(frame, "__func__", frame), "__code__", None)
    name = code.co_name if code is not None else getattr(target, "__name__", "?")
    marks = [m for m in STATE.mark_dynamic if m.get("function") == name]
    try:
        signature: inspect.Signature | None = inspect.signature(target)
    except (TypeError, ValueError):
        signature = None
    is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)

    @functools.wraps(compiled)
    def tcx_fix_call(*args: Any, **kwargs: Any) -> Any:
        if STATE.depth or is_compiling():
            return compiled(*args, **kwargs)
        if marks and signature is not None:
            _mark(marks, signature, args, kwargs)
        STATE.depth = 1
        try:
            result = compiled(*args, **kwargs)
        finally:
            STATE.depth = 0
        if STATE.outputs_path:
            _keep(name, result)
        return result

    return tcx_fix_call


def _mark(marks: list[dict[str, Any]], signature: inspect.Signature, args: tuple, kwargs: dict) -> None:
    try:
        bound = signature.bind_partial(*args, **kwargs).arguments
    except TypeError:
        return
    for m in marks:
        value = bound.get(m["arg"])
        if isinstance(value, torch.Tensor) and value.dim() > int(m["dim"]):
            torch._dynamo.mark_dynamic(value, int(m["dim"]))


def _keep(function: str, result: Any) -> None:
    """The call's outputs, flattened: tensors (detached copies on the CPU) and other leaves' reprs."""
    try:
        from torch.utils._pytree import tree_flatten

        leaves, _ = tree_flatten(result)
        size = sum(leaf.numel() for leaf in leaves if isinstance(leaf, torch.Tensor))
        if STATE.dropped or STATE.elements + size > MAX_OUTPUT_ELEMENTS:  # the kept calls stay a prefix
            STATE.dropped += 1
            return
        STATE.elements += size
        tensors = [leaf.detach().to("cpu").clone() for leaf in leaves if isinstance(leaf, torch.Tensor)]
        others = [
            leaf if isinstance(leaf, (int, float, bool, str, type(None))) else repr(leaf)[:200]
            for leaf in leaves
            if not isinstance(leaf, torch.Tensor)
        ]
        STATE.calls.append({"function": function, "tensors": tensors, "others": others})
    except Exception as exc:
        STATE.errors.append(f"{type(exc).__name__}: {exc}")


def _finish() -> None:
    if not STATE.outputs_path:
        return
    doc = {"calls": STATE.calls, "dropped": STATE.dropped, "errors": STATE.errors[:5]}
    torch.save(doc, STATE.outputs_path)
