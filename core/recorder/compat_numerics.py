"""Compatibility layer for `tcx numerics`: keep the values a run computes, for comparison with another run.

The `numerics=SPEC.json` capture runs before the program starts. SPEC says:

- `role`: "compiled" (the program as it runs) or "eager" (compilation off for the whole run:
  `torch.compiler.set_stance("force_eager")`, as `tcx cost`'s eager run);
- `shadow`: with "eager", also compute every value's float64 twin (core/recorder/compat_shadow.py);
- `values`: the file the kept values are written to when the program ends (`torch.save`);
- `seed`: `torch.manual_seed` and `random.seed` before the program starts (every run draws the same
  numbers);
- `grads`: also keep, after each `torch.autograd.backward` (a `loss.backward()`), the gradient of each
  parameter tcx can name, and after each optimizer step the parameters it updated;
- `config`: assignments made before the program starts (a remedy: `torch._inductor.config.fallback_random
  = True`), as `tcx fix` makes them (core/recorder/compat_fix._assign);
- `localize`: the call to localize a divergence in (core/recorder/compat_localize.py).

What is kept, in the order the program made it ("records"):
- `call`: the outputs of every outermost call of a compiled callable (a function or a module's
  forward), tensors copied to the CPU, numbered per function;
- `backward` / `step`: the parameters' gradients / values, by name: `VAR.PARAM` for a module held by a
  global variable of the program's `__main__`, `Class.PARAM` for a compiled module, else
  `optimizer N group G param P`.
Calls, backward passes and steps past MAX_ELEMENTS kept elements are counted, not kept.

Private API touched, feature-detected: `torch._dynamo.eval_frame.OptimizeContext.__call__` (through
compat.wrap_compiled_functions). Public hooks: `torch.autograd.backward` (wrapped),
`torch.optim.optimizer.register_optimizer_step_post_hook`, `torch.optim.Optimizer.__init__` (wrapped:
the optimizers a backward's gradients belong to).
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch

from tcx.core.ingest.recording import RecordingWriter
from tcx.core.recorder.compat import unavailable, wrap_compiled_functions
from tcx.core.recorder.compat_recompiles import _evaluated_callable, _target_of

MAX_ELEMENTS = 20_000_000  # elements kept across all records (values and their float64 twins)


class _State:
    def __init__(self) -> None:
        self.spec: dict[str, Any] = {}
        self.records: list[dict[str, Any]] = []
        self.elements = 0
        self.dropped: dict[str, int] = {}
        self.errors: list[str] = []
        self.depth = 0
        self.counts: dict[str, int] = {}  # function -> calls so far
        self.backwards = 0
        self.steps = 0
        self.current: tuple[str, int] | None = None  # the outermost call in progress
        self.shadow: Any = None
        self.modules: list[tuple[str, Any]] = []  # (name, weakref to a compiled module)
        self.optimizers: list[Any] = []  # weakrefs, in construction order


STATE = _State()


def install(writer: RecordingWriter, argument: str | None = None) -> str | None:
    """Set the run up as SPEC says; None when everything asked for is in place, else what is not."""
    if not argument:
        return "numerics capture needs a spec file (numerics=SPEC.json)"
    with open(argument, encoding="utf-8") as fh:
        spec = json.load(fh)
    STATE.spec = spec
    from tcx.core.recorder.compat_fix import _assign

    applied = [_assign(item) for item in spec.get("config") or []]
    problems = [str(a["error"]) for a in applied if a.get("error")]
    if spec.get("config"):  # the program may set the same config itself: set again before each compile
        pinned = _pin_config(list(spec["config"]))
        if pinned:
            problems.append(pinned)
    if spec.get("seed") is not None:
        torch.manual_seed(int(spec["seed"]))
        random.seed(int(spec["seed"]))
    features: dict[str, str | None] = {}
    if spec.get("role") == "eager":
        from tcx.core.recorder.compat_cost import _force_eager

        features["force_eager"] = _force_eager()
    features["calls"] = wrap_compiled_functions(_wrap_compiled, "keeping the outputs of compiled calls")
    if spec.get("grads"):
        features["grads"] = _install_grad_hooks()
    if spec.get("shadow"):
        features["float64_reference"] = _start_shadow()
    if spec.get("localize"):
        from tcx.core.recorder.compat_localize import install as install_localize

        features["localize"] = install_localize(writer, spec["localize"], lambda: STATE.current)
    from tcx.core.recorder.captures import at_end

    at_end(_finish)
    writer.write("numerics_config", role=spec.get("role"), config=applied, features=features)
    problems += [why for why in features.values() if why]
    return "; ".join(problems) if problems else None


def _pin_config(items: list[dict[str, Any]]) -> str | None:
    """Make each config assignment again just before every compile, so a program that sets the same
    config itself (a custom pass it registers) compiles with the remedy's value."""
    try:
        import torch._dynamo.output_graph as og

        original = og.OutputGraph.call_user_compiler
    except (ImportError, AttributeError) as exc:
        return unavailable("applying a remedy's config at each compile", exc)
    from tcx.core.recorder.compat_fix import _assign

    @functools.wraps(original)
    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        for item in items:
            _assign(item)
        return original(self, gm, example_inputs)

    og.OutputGraph.call_user_compiler = call_user_compiler
    return None


def _start_shadow() -> str | None:
    from tcx.core.recorder.compat_shadow import make_mode

    try:
        mode = make_mode()
        mode.__enter__()  # for the whole program; the process ends with it
    except Exception as exc:
        return unavailable("the float64 reference", exc)
    STATE.shadow = mode
    return None


@contextlib.contextmanager
def tcx_work() -> Iterator[None]:
    """tcx's own tensor work: not shadowed, not seen by autograd."""
    with STATE.shadow.paused_for_tcx() if STATE.shadow else contextlib.nullcontext(), torch.no_grad():
        yield


# ---------------------------------------------------------------------------- compiled calls


def _wrap_compiled(compiled: Callable[..., Any], fn: Any) -> Callable[..., Any]:
    target = _target_of(fn)
    frame = _target_of(_evaluated_callable(compiled, fn))
    code = getattr(getattr(frame, "__func__", frame), "__code__", None)
    name = code.co_name if code is not None else getattr(target, "__name__", "?")
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, torch.nn.Module):
        STATE.modules.append((type(owner).__name__, weakref.ref(owner)))
    is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)

    @functools.wraps(compiled)
    def tcx_numerics_call(*args: Any, **kwargs: Any) -> Any:
        if STATE.depth or is_compiling():
            return compiled(*args, **kwargs)
        index = STATE.counts.get(name, 0)
        STATE.counts[name] = index + 1
        STATE.depth, STATE.current = 1, (name, index)
        localize = _localizer()
        if localize:
            localize.begin_call()
        try:
            result = compiled(*args, **kwargs)
        finally:
            STATE.depth, STATE.current = 0, None
        record = _keep("call", name, index, _leaves(result))
        if localize:
            localize.end_call(record)
        return result

    return tcx_numerics_call


def _localizer() -> Any:
    """compat_localize, when this run localizes (it is imported only then)."""
    return sys.modules.get("tcx.core.recorder.compat_localize") if STATE.spec.get("localize") else None


def _leaves(result: Any) -> list[tuple[str, Any]]:
    from torch.utils._pytree import tree_flatten

    leaves, _ = tree_flatten(result)
    return [(f"output {i}", leaf) for i, leaf in enumerate(leaves)]


# ---------------------------------------------------------------------------- gradients and steps


def _install_grad_hooks() -> str | None:
    try:
        from torch.optim.optimizer import register_optimizer_step_post_hook
    except ImportError as exc:
        return unavailable("keeping parameters after optimizer steps", exc)
    original_backward = torch.autograd.backward
    original_init = torch.optim.Optimizer.__init__

    @functools.wraps(original_backward)
    def backward(*args: Any, **kwargs: Any) -> Any:
        result = original_backward(*args, **kwargs)
        if not STATE.depth:
            index, STATE.backwards = STATE.backwards, STATE.backwards + 1
            _keep("backward", None, index, [(n, p.grad) for n, p in _named_params() if p.grad is not None])
        return result

    @functools.wraps(original_init)
    def optimizer_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        STATE.optimizers.append(weakref.ref(self))

    def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        if STATE.depth:
            return
        mine = {id(p) for group in optimizer.param_groups for p in group["params"]}
        index, STATE.steps = STATE.steps, STATE.steps + 1
        _keep("step", None, index, [(n, p) for n, p in _named_params() if id(p) in mine])

    disable = getattr(torch.compiler, "disable", lambda fn: fn)  # a compiled step graph-breaks here
    torch.autograd.backward = disable(backward)
    torch.optim.Optimizer.__init__ = optimizer_init  # type: ignore[method-assign]
    register_optimizer_step_post_hook(disable(after_step))
    return None


def _named_params() -> list[tuple[str, torch.Tensor]]:
    """Every parameter tcx can name, sorted by name (the same names in every run)."""
    names: dict[int, tuple[str, torch.Tensor]] = {}
    main = sys.modules.get("__main__")
    for var, value in list(vars(main).items()) if main else ():
        if isinstance(value, torch.nn.Module) and not var.startswith("_"):
            for pname, p in value.named_parameters():
                names.setdefault(id(p), (f"{var}.{pname}", p))
    for cls, ref in STATE.modules:
        module = ref()
        for pname, p in module.named_parameters() if module is not None else ():
            names.setdefault(id(p), (f"{cls}.{pname}", p))
    for index, ref in enumerate(STATE.optimizers):
        opt = ref()
        for g, group in enumerate(opt.param_groups if opt is not None else ()):
            for i, p in enumerate(group["params"]):
                names.setdefault(id(p), (f"optimizer {index} group {g} param {i}", p))
    return sorted(names.values(), key=lambda item: item[0])


# ---------------------------------------------------------------------------- keeping values


def _keep(kind: str, function: str | None, index: int, items: list[tuple[str, Any]]) -> dict[str, Any] | None:
    """One record: its tensors copied to the CPU (and their float64 twins in the eager run); None when
    it was not kept."""
    key = f"{kind}:{function}" if function else kind
    try:
        with tcx_work():
            tensors = [(label, v) for label, v in items if isinstance(v, torch.Tensor)]
            size = sum(v.numel() * (2 if STATE.shadow else 1) for _, v in tensors)
            if STATE.dropped or STATE.elements + size > MAX_ELEMENTS:  # the kept records stay a prefix
                STATE.dropped[key] = STATE.dropped.get(key, 0) + 1
                return None
            STATE.elements += size
            record: dict[str, Any] = {
                "kind": kind,
                "function": function,
                "index": index,
                "labels": [label for label, _ in tensors],
                "values": [v.detach().to("cpu").clone() for _, v in tensors],
                "others": [repr(v)[:200] for _, v in items if not isinstance(v, torch.Tensor)],
            }
            if STATE.shadow is not None:
                refs = [STATE.shadow.shadow(v) for _, v in tensors]
                record["refs"] = [r.detach().to("cpu").clone() if r is not None else None for r in refs]
                record["computed"] = [STATE.shadow.computed(v) for _, v in tensors]
            STATE.records.append(record)
            return record
    except Exception as exc:
        STATE.errors.append(f"{kind} {function or ''} #{index}: {type(exc).__name__}: {exc}")
        return None


def _finish() -> None:
    path = STATE.spec.get("values")
    if not path:
        return
    shadow = STATE.shadow
    doc = {
        "role": STATE.spec.get("role"),
        "records": STATE.records,
        "dropped": STATE.dropped,
        "errors": STATE.errors[:5],
        "shadow_ops": shadow.ops if shadow is not None else 0,
        "fallback_ops": dict(shadow.fallback.most_common(20)) if shadow is not None else {},
    }
    if shadow is not None:
        shadow.paused = True
    torch.save(doc, path)
