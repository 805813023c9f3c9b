"""Compatibility layer for `tcx fix`: apply one remedy in the recorder child, keep the outputs.

The `fix=SPEC.json` capture runs before the program starts. SPEC says what to apply:

- `config`: assignments to `torch._dynamo.config` / `torch._inductor.config` (a value, or a callable
  named by "module.attr" added to a set such as `reorderable_logging_functions`);
- `marks`: `torch._dynamo.mark_dynamic` / `maybe_mark_dynamic` / `mark_static` (`how`: dynamic |
  maybe | static) on a named argument's dimension of a compiled function, just before each call of it;
- `compile_kwargs`: keyword arguments added to the `torch.compile` call of a named function; today
  `shapes_spec` ({arg: {rank, dynamic: [dims]}}: those dims a `ShapeVar`, the others `STATIC`), where
  the installed torch.compile takes it (`missing_remedies` says which remedies this torch lacks);
- `attributes`: attributes set on each nn.Module passed to torch.compile, before it is compiled
  ({path: ["config", "problem_type"], value}: state the program's library sets on the first call), or
  a method of it called ({path: ["set_experts_implementation"], call: ["grouped_mm"]});
- `outputs`: a file where the outputs of every outermost call of a compiled callable are written
  (tensors detached, on the CPU) when the program ends, so the parent compares runs;
- `seed`: `torch.manual_seed` and `random.seed` before the program starts, so two runs of a program
  that draws random inputs without seeding draw the same ones.

Private API touched, feature-detected: `torch._dynamo.eval_frame.OptimizeContext.__call__` (wrapped,
as the recompiles and cost captures do, to see each call of a compiled callable); `torch._dynamo`'s
mark functions; `torch.fx.experimental.dynamic_spec` (shapes_spec's types). Nothing here edits the
user's files.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import random
import re
from collections.abc import Callable
from typing import Any

import torch

from tcx.core.ingest.recording import RecordingWriter
from tcx.core.recorder.compat import wrap_compiled_functions
from tcx.core.recorder.compat_recompiles import _evaluated_callable, _target_of

MAX_OUTPUT_ELEMENTS = 50_000_000  # elements kept across all calls; later calls are counted, not kept


class _State:
    def __init__(self) -> None:
        self.writer: RecordingWriter | None = None
        self.marks: list[dict[str, Any]] = []
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
    STATE.marks = list(spec.get("marks") or [])
    STATE.outputs_path = spec.get("outputs")
    compile_kwargs = list(spec.get("compile_kwargs") or [])
    attributes = list(spec.get("attributes") or [])
    problems = [p for p in (_missing_marks(STATE.marks), _wrap_compile(compile_kwargs, attributes)) if p]
    wrapped = None
    if STATE.marks or STATE.outputs_path:
        wrapped = wrap_compiled_functions(
            _wrap_compiled, "seeing the calls of compiled callables (mark_dynamic, outputs)"
        )
    writer.write(
        "fix_applied",
        config=applied,
        marks=STATE.marks,
        compile_kwargs=compile_kwargs,
        calls_hook=wrapped,
        problems=problems,
    )
    from tcx.core.recorder.captures import at_end

    at_end(_finish)
    problems += [str(a["error"]) for a in failed]
    if wrapped:
        problems.append(wrapped)
    return "; ".join(problems) if problems else None


MARKS = {"dynamic": "mark_dynamic", "maybe": "maybe_mark_dynamic", "static": "mark_static"}
_KEYWORD = re.compile(r"kwargs\['(\w+)'\]")


def missing_remedies() -> dict[str, str]:
    """The remedies the installed torch cannot apply (name -> why), for the parent to list as not run."""
    missing = {}
    for name in MARKS.values():
        if not callable(getattr(torch._dynamo, name, None)):
            missing[name] = f"torch._dynamo.{name} is not available on torch {torch.__version__}"
    try:
        takes_spec = "shapes_spec" in inspect.signature(torch.compile).parameters
        importlib.import_module("torch.fx.experimental.dynamic_spec")
    except (ImportError, TypeError, ValueError):
        takes_spec = False
    if not takes_spec:
        missing["shapes_spec"] = f"torch.compile(shapes_spec=…) is not available on torch {torch.__version__}"
    if not callable(getattr(torch._dynamo, "nonstrict_trace", None)):  # a helper rewrite's decorator
        missing["nonstrict_trace"] = (
            f"torch._dynamo.nonstrict_trace is not available on torch {torch.__version__}"
        )
    return missing


def _missing_marks(marks: list[dict[str, Any]]) -> str | None:
    lacking = sorted({MARKS.get(m.get("how", "dynamic"), "?") for m in marks} & set(missing_remedies()))
    return f"not available on torch {torch.__version__}: {', '.join(lacking)}" if lacking else None


def _wrap_compile(items: list[dict[str, Any]], attributes: list[dict[str, Any]] | None = None) -> str | None:
    """Add each item's keyword arguments to the torch.compile call of its function (by name), and set
    the `attributes` on each nn.Module compiled (or the module of a compiled bound method)."""
    if not items and not attributes:
        return None
    if items and "shapes_spec" in missing_remedies():
        return missing_remedies()["shapes_spec"]
    by_name = {str(i["function"]): i for i in items}
    original = torch.compile

    @functools.wraps(original)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:  # `@torch.compile(...)`: applied when it gets its function
            return lambda fn: compile(fn, **kwargs)
        owner = model if isinstance(model, torch.nn.Module) else getattr(model, "__self__", None)
        if isinstance(owner, torch.nn.Module):
            for attribute in attributes or []:
                _set_attribute(owner, attribute)
        item = by_name.get(getattr(getattr(model, "__code__", None), "co_name", None) or "")
        if item and item.get("shapes_spec"):
            kwargs["shapes_spec"] = _shapes_spec(item["shapes_spec"])
        return original(model, **kwargs)

    torch.compile = compile
    return None


def _set_attribute(module: torch.nn.Module, attribute: dict[str, Any]) -> None:
    """`module.<path> = value`, or `module.<path>(*call)` when the item has `call`, where every object
    along the path exists (else nothing is set or called)."""
    *parents, last = [str(p) for p in attribute["path"]]
    obj: Any = module
    for name in parents:
        obj = getattr(obj, name, None)
        if obj is None:
            return
    if "call" in attribute:
        method = getattr(obj, last, None)
        if callable(method):
            method(*attribute["call"])
    elif hasattr(obj, last):
        setattr(obj, last, attribute["value"])


def _shapes_spec(spec: dict[str, Any]) -> Any:
    """{arg: {rank, dynamic: [dims]}} as torch's ShapesSpec: those dims a ShapeVar, the others STATIC."""
    from torch.fx.experimental.dynamic_spec import STATIC, ShapesSpec, ShapeVar, TensorSpec

    params = {
        arg: TensorSpec(
            [ShapeVar(f"{arg}_{i}") if i in item["dynamic"] else STATIC for i in range(int(item["rank"]))]
        )
        for arg, item in spec.items()
    }
    return ShapesSpec(params)


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
            fn = _resolve(str(item["add"]))
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


def _resolve(dotted: str) -> Any:
    """`warnings.warn`, `logging.Logger.info`: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"no module in {dotted!r}")


def _wrap_compiled(compiled: Callable[..., Any], fn: Any) -> Callable[..., Any]:
    target = _target_of(fn)
    frame = _target_of(_evaluated_callable(compiled, fn))
    code = getattr(getattr(frame, "__func__", frame), "__code__", None)
    name = code.co_name if code is not None else getattr(target, "__name__", "?")
    marks = [m for m in STATE.marks if m.get("function") == name]
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
        keyword = _KEYWORD.fullmatch(str(m["arg"]))  # kwargs['input_ids']: the call's keyword argument
        value = kwargs.get(keyword[1], bound.get(keyword[1])) if keyword else bound.get(m["arg"])
        mark = getattr(torch._dynamo, MARKS.get(m.get("how", "dynamic"), ""), None)
        if isinstance(value, torch.Tensor) and value.dim() > int(m["dim"]) and mark is not None:
            mark(value, int(m["dim"]))


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
