"""Compatibility layer: values for the CUDA preview — the program computes on the CPU while it
compiles for the previewed GPU (shadow execution).

Every CUDA tensor of the preview is a FakeTensor on `cuda:0` (so Dynamo, AOTAutograd and Inductor
see a CUDA tensor, its guards and its decisions) that carries its value: a real CPU tensor, its
twin. Each ATen op on these tensors runs twice, on the fakes (shapes, strides, devices, the checks
a GPU would make) and on the twins (the numbers); a line that needs a value (`.item()`,
`float()`, an `if` on a tensor, `.tolist()`, `.cpu()`) reads the twin, so the program goes on
past it. CPU tensors are real CPU tensors, as on a GPU machine: `.cpu()` of a CUDA tensor gives
the twin's copy.

A compiled region is compiled for the GPU (fake tensors, Inductor's Triton code) and runs its
graph eagerly on the program's tensors (`EagerGraph`): the forward and backward graphs AOTAutograd
gives Inductor, through AOTAutograd's own runtime, so a backward graph is compiled when the
program first runs backward, as on a GPU.

Where a CPU value can differ from the GPU's, the preview's notes say so (core/analysis/preview_notes.py):
random numbers of CUDA tensors come from a CPU generator seeded from the CUDA generator's
(seed, offset) state, and each op marks its outputs with the draws their values and sizes depend
on, so the compiles they steer are named (compat_fakecuda_random); float results can differ in
their last bits. The GPU's fused attention kernels have CPU stand-ins
(compat_fakecuda_attention); another op with no CPU kernel leaves its outputs without a value, and
a line that then needs one stops the program with `PreviewValueUnknown`, naming the op.
"""

from __future__ import annotations

import copy
import copyreg
import threading
from typing import Any

import torch
from torch.utils import _pytree as pytree

from tcx.core.recorder.compat import TcxHookError
from tcx.core.recorder.compat_fakecuda_attention import DRAWS, STAND_INS, bind_arguments
from tcx.core.recorder.compat_fakecuda_random import (
    CUDA_GENERATOR,
    DRAWN,
    SIZED,
    PreviewCudaGenerator,
    RandomReads,
    drawn_here,
    mark,
    origins_of,
)

VALUE = "_tcx_preview_value"  # the twin, in a FakeTensor's __dict__


class Unknown:
    """The value of a tensor the CPU could not compute, and why."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __deepcopy__(self, memo: dict) -> Unknown:
        return self


class PreviewValueUnknown(RuntimeError):
    """A line needed a value the preview could not compute on the CPU."""


_MODE: Any = None  # the FakeTensorMode of the program's CUDA tensors
READS = RandomReads(lambda *a: None)  # where values drawn from the CUDA generator are read
_LOCAL = threading.local()  # depth: >0 while the fake side runs an op


def is_ours(t: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor) and t.fake_mode is _MODE


def value_of(t: Any) -> Any:
    """The twin of one of our fakes (or Unknown); a real tensor is its own value."""
    if is_ours(t):
        value = t.__dict__.get(VALUE)
        return value if value is not None else Unknown("a CUDA tensor made outside the preview's tracking")
    return t


def attach(fake: torch.Tensor, value: Any) -> torch.Tensor:
    fake.__dict__[VALUE] = value
    return fake


def _cpu(x: Any) -> Any:
    if isinstance(x, torch.device) and x.type == "cuda":
        return torch.device("cpu")
    if isinstance(x, PreviewCudaGenerator):
        return x.cpu_generator_for_next_op(None)
    return x


def _unknown_message(u: Unknown) -> str:
    return f"the preview could not compute this CUDA tensor's value on the CPU: {u.why}"


# --- the op-by-op shadow ----------------------------------------------------------------------


_DATA_DEPENDENT: tuple[type[BaseException], ...] = ()


def install_values(mode: Any, reads: RandomReads) -> None:
    """Make `mode` (the program's FakeTensorMode) run every op on the twins too; `reads` notes
    where values drawn from the CUDA generator leave the tensors (compat_fakecuda_random)."""
    global _MODE, _DATA_DEPENDENT, READS
    from torch._subclasses import fake_tensor as ft

    _MODE, READS = mode, reads
    _DATA_DEPENDENT = tuple(
        getattr(ft, name)
        for name in (
            "DynamicOutputShapeException",
            "DataDependentOutputException",
            "UnsupportedOperatorException",
        )
        if hasattr(ft, name)
    )
    fake_dispatch = mode.dispatch

    def fake_only(func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        _LOCAL.depth = getattr(_LOCAL, "depth", 0) + 1
        try:
            return fake_dispatch(func, types, args, kwargs)
        finally:
            _LOCAL.depth -= 1

    def dispatch(func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if getattr(_LOCAL, "depth", 0):
            # an op the fake side runs while it decomposes an outer op: the outer op's CPU value
            # stands for the result
            return fake_dispatch(func, types, args, kwargs)
        flat, spec = pytree.tree_flatten((args, kwargs))
        ours = [a for a in flat if is_ours(a)]
        values = [value_of(a) if isinstance(a, torch.Tensor) else a for a in flat]
        unknown = next((v for v in values if isinstance(v, Unknown)), None)
        drawn, sized = origins_of(ours, DRAWN), origins_of(ours, SIZED)
        if ours and func is torch.ops.aten._local_scalar_dense.default:
            if unknown is not None:
                raise PreviewValueUnknown(_unknown_message(unknown))
            number = values[0].item()
            reads.read("branch" if isinstance(number, bool) else "number", drawn, number)
            return number
        try:
            fake_out = fake_only(func, types, args, kwargs)
        except _DATA_DEPENDENT:
            if not ours:
                raise
            if unknown is not None:
                raise PreviewValueUnknown(_unknown_message(unknown)) from None
            fake_out = _MISSING
        if fake_out is not _MISSING:
            made = [t for t in pytree.tree_leaves(fake_out) if is_ours(t)]
            if not ours and not made:
                return fake_out  # nothing of the program's CUDA tensors
            device = (ours or made)[0].device
        else:
            device = ours[0].device
        if unknown is not None:
            return _pair(fake_out, unknown, flat)
        real_args, real_kwargs = pytree.tree_unflatten([_cpu(v) for v in values], spec)
        if func in _RNG_STATE_OPS and "rng_state" in kwargs:  # the generator itself, not a CPU one
            real_kwargs["rng_state"] = kwargs["rng_state"]
        try:
            real_out = _run_real(func, real_args, real_kwargs, fake_out, device)
        except TcxHookError:
            raise  # tcx's own stand-in failed: tcx's failure, not an op without a CPU kernel
        except (NotImplementedError, RuntimeError, TypeError, ValueError) as exc:
            if fake_out is _MISSING:
                raise
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            real_out = Unknown(f"{func} has no CPU kernel ({type(exc).__name__}: {first})")
        data_dependent = fake_out is _MISSING
        if data_dependent:
            fake_out = _fakes_from(real_out, device)
        out = _pair(fake_out, real_out, values)
        if device.type == "cuda" and _draws(func, real_args, real_kwargs, kwargs.get("generator")):
            drawn = drawn_here(_op_name(func)) + drawn
        _follow_random(out, drawn, sized, data_dependent)
        return out

    mode.dispatch = dispatch


def _follow_random(
    out: Any, drawn: tuple[dict[str, Any], ...], sized: tuple[dict[str, Any], ...], data_dependent: bool
) -> None:
    """Mark the op's outputs with the random draws their values (and sizes) depend on, and note a
    size that depends on them. A copy to the CPU (`.cpu()`) is not followed: moving a model or a
    batch steers nothing, and the CPU copy's own ops do not pass through the preview."""
    if data_dependent and drawn:
        sized = drawn + sized
        READS.read("size", drawn)
    mine = [t for t in pytree.tree_leaves(out) if is_ours(t)]
    mark(mine, DRAWN, drawn)
    mark(mine, SIZED, sized)


def _draws(func: Any, args: Any, kwargs: Any, generator: Any = None) -> bool:
    """Whether the op draws numbers from the CUDA generator (on a CUDA tensor). A CPU generator
    passed to it draws the same numbers on any machine."""
    if isinstance(generator, torch.Generator) and not isinstance(generator, PreviewCudaGenerator):
        return False
    if func in _RNG_STATE_OPS:  # runs an op with a saved generator state
        if func is _RNG_STATE_OPS[0]:  # run_with_rng_state(rng_state, op, *args)
            return _draws(args[1], args[2:], kwargs)
        return _draws(args[0], args[1:], {k: v for k, v in kwargs.items() if k != "rng_state"})
    if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
        return True
    name = getattr(func, "_opname", "")
    return name in DRAWS and float(bind_arguments(func, args, kwargs).get("dropout_p") or 0.0) > 0.0


def _op_name(func: Any) -> str:
    name = str(getattr(func, "__name__", func))
    return f"aten.{name.removesuffix('.default')}" if isinstance(func, torch._ops.OpOverload) else name


_MISSING = object()


def _run_real(func: Any, args: Any, kwargs: Any, fake_out: Any, device: torch.device) -> Any:
    if func in _RNG_STATE_OPS and device.type == "cuda":
        return _with_rng_state(func, args, kwargs, fake_out, device)
    standin = STAND_INS.get(getattr(func, "_opname", ""))
    seeded = device.type == "cuda" and torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())
    if standin is not None:
        try:
            return func(*args, **kwargs)
        except (NotImplementedError, RuntimeError):
            pass
        try:
            return standin(func, args, kwargs, fake_out)
        except Exception as exc:
            raise TcxHookError(f"tcx's CPU stand-in for {func} failed: {type(exc).__name__}: {exc}") from exc
    if seeded:
        with CUDA_GENERATOR.drawing(fake_out):
            return func(*args, **kwargs)
    return func(*args, **kwargs)


def _with_rng_state(func: Any, args: Any, kwargs: Any, fake_out: Any, device: torch.device) -> Any:
    """The RNG-state operators of AOTAutograd (activation checkpointing's recompute, functionalized
    RNG) on CUDA tensors: the op they wrap draws from the CUDA generator at the given state, as
    torch's CUDA implementation does; on the CPU twins torch's own would use the CPU generator."""
    kwargs = dict(kwargs)
    if func is _RNG_STATE_OPS[0]:  # run_with_rng_state(rng_state, op, *args)
        state, op, rest = args[0], args[1], args[2:]
        saved = CUDA_GENERATOR.get_state()
        CUDA_GENERATOR.set_state(state)
        try:
            return _run_real(op, rest, kwargs, fake_out, device)
        finally:
            CUDA_GENERATOR.set_state(saved)
    if func is _RNG_STATE_OPS[1]:  # run_and_save_rng_state(op, *args) -> (state, out)
        state = CUDA_GENERATOR.get_state()
        inner = fake_out[1] if isinstance(fake_out, (tuple, list)) else fake_out
        return state, _run_real(args[0], args[1:], kwargs, inner, device)
    rng_state = kwargs.pop("rng_state")  # graphsafe_run_with_rng_state(op, *args, rng_state=gen)
    current = CUDA_GENERATOR.graphsafe_get_state()
    CUDA_GENERATOR.graphsafe_set_state(rng_state)
    try:
        return _run_real(args[0], args[1:], kwargs, fake_out, device)
    finally:
        CUDA_GENERATOR.graphsafe_set_state(current)


def _rng_state_ops() -> tuple[Any, ...]:
    """(run_with_rng_state, run_and_save_rng_state, graphsafe_run_with_rng_state) of this torch;
    an operator it lacks is left out (an object nothing matches)."""
    try:
        import torch._prims.rng_prims as rng_prims
    except ImportError:
        return ()
    names = ("run_with_rng_state", "run_and_save_rng_state", "graphsafe_run_with_rng_state")
    return tuple(getattr(rng_prims, name, object()) for name in names)


_RNG_STATE_OPS = _rng_state_ops()


def _pair(fake_out: Any, real_out: Any, inputs: list[Any]) -> Any:
    """Give each fake output its twin; an output on the CPU is the real tensor itself."""
    fakes, spec = pytree.tree_flatten(fake_out)
    if isinstance(real_out, Unknown):
        reals: list[Any] = [real_out] * len(fakes)
    else:
        reals, _ = pytree.tree_flatten(real_out)
        if len(reals) != len(fakes):
            reals = [Unknown("the CPU op returned a different number of outputs")] * len(fakes)
    out = []
    for fake, real in zip(fakes, reals, strict=True):
        if not is_ours(fake):
            out.append(fake)
        elif fake.device.type == "cpu" and isinstance(real, torch.Tensor):
            out.append(real)  # as on a GPU machine, a CPU tensor holds its data
        else:
            twin = _same_layout(fake, real, inputs) if isinstance(real, torch.Tensor) else real
            out.append(attach(fake, twin))
    return pytree.tree_unflatten(out, spec)


def _same_layout(fake: torch.Tensor, real: torch.Tensor, inputs: list[Any]) -> Any:
    """The twin with the fake's strides: a CPU kernel can lay out a new output otherwise (an
    output that aliases an input keeps aliasing it)."""
    if real.shape != fake.shape:
        return Unknown(f"the CPU op gave shape {tuple(real.shape)}, the CUDA op {tuple(fake.shape)}")
    if real.dtype != fake.dtype:
        real = real.to(fake.dtype)
    if real.numel() <= 1 or real.stride() == fake.stride():
        return real
    storage = real.untyped_storage().data_ptr()
    if any(
        isinstance(t, torch.Tensor)
        and not is_ours(t)
        and t.device.type == "cpu"
        and t.untyped_storage().data_ptr() == storage
        for t in inputs
    ):
        return real
    out = torch.empty_strided(fake.shape, fake.stride(), dtype=real.dtype)
    out.copy_(real)
    return out


def _fakes_from(real_out: Any, device: torch.device) -> Any:
    """Fake CUDA tensors shaped as the CPU op's outputs (ops whose output shape depends on data)."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._mode_utils import no_dispatch

    def fake(real: Any) -> Any:
        if not isinstance(real, torch.Tensor):
            return real
        with no_dispatch():
            meta = torch.empty_strided(real.shape, real.stride(), dtype=real.dtype, device="meta")
        return FakeTensor(_MODE, meta, device)

    return pytree.tree_map(fake, real_out)


def new_cuda_tensor(meta: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CUDA tensor the program allocates (`torch.empty(..., device="cuda")` and every factory
    built on it): a fake with an uninitialised CPU twin."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._mode_utils import no_dispatch

    with no_dispatch():
        fake = FakeTensor(_MODE, meta, device)
        real = torch.empty_strided(meta.shape, meta.stride(), dtype=meta.dtype, device="cpu")
    return attach(fake, real)


# --- tensor methods that do not go through the dispatcher -----------------------------------------


def install_tensor_patches() -> None:
    """deepcopy, `.to()` of a module, `pin_memory`, printing and formatting of CUDA tensors."""
    from torch._subclasses.fake_tensor import FakeTensor

    own_keys = set(FakeTensor.__dict__)

    def deepcopy(self: torch.Tensor, memo: dict) -> torch.Tensor:
        if not is_ours(self):
            return torch.Tensor.__deepcopy__(self, memo)
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                "protocol at the moment."
            )
        with torch.no_grad():
            new = self.clone()
        new.requires_grad_(self.requires_grad)
        memo[id(self)] = new
        for key, item in self.__dict__.items():
            if key not in new.__dict__ and key not in own_keys and key != VALUE:
                new.__dict__[key] = copy.deepcopy(item, memo)
        return new

    original_repr = FakeTensor.__repr__
    original_format = FakeTensor.__format__

    def fake_repr(self: torch.Tensor, *args: Any, **kwargs: Any) -> str:
        value = self.__dict__.get(VALUE) if is_ours(self) else None
        if isinstance(value, torch.Tensor):
            text = repr(value)
            return text[:-1] + f", device='{self.device}')" if text.endswith(")") else text
        return original_repr(self, *args, **kwargs)

    def fake_format(self: torch.Tensor, spec: str) -> str:
        if is_ours(self) and self.dim() == 0 and isinstance(self.__dict__.get(VALUE), torch.Tensor):
            READS.printing += 1  # formatting a number steers nothing
            try:
                return self.item().__format__(spec)
            finally:
                READS.printing -= 1
        return original_format(self, spec)

    data = torch._C.TensorBase.data

    def set_data(self: torch.Tensor, value: torch.Tensor) -> None:
        data.__set__(self, value)
        if is_ours(self):
            self.__dict__[VALUE] = value_of(value)  # the twin follows the new data

    FakeTensor.data = property(data.__get__, set_data)  # type: ignore[assignment]
    FakeTensor.__deepcopy__ = deepcopy  # type: ignore[method-assign]
    FakeTensor.__repr__ = fake_repr  # type: ignore[method-assign]
    FakeTensor.__format__ = fake_format  # type: ignore[method-assign]

    original_compatible = torch._has_compatible_shallow_copy_type

    def compatible(a: torch.Tensor, b: torch.Tensor) -> bool:
        # `param.data = cuda_tensor` would give a CPU tensor a fake's storage: Module._apply then
        # swaps the tensors or makes a new Parameter (the program sees the same values)
        if is_ours(a) or is_ours(b):
            return False
        return original_compatible(a, b)

    torch._has_compatible_shallow_copy_type = compatible  # type: ignore[assignment]

    original_swap = torch.utils.swap_tensors

    def swap_tensors(t1: torch.Tensor, t2: torch.Tensor) -> None:
        if is_ours(t1) or is_ours(t2):
            _swap_ignoring_weakrefs(t1, t2)
            return
        original_swap(t1, t2)

    torch.utils.swap_tensors = swap_tensors

    original_pin = torch.Tensor.pin_memory

    def pin_memory(self: torch.Tensor, device: Any = None) -> torch.Tensor:
        if self.device.type == "cpu" and not is_ours(self):
            return self.clone()  # there is no page-locked memory without a CUDA driver
        return original_pin(self) if device is None else original_pin(self, device)

    torch.Tensor.pin_memory = pin_memory  # type: ignore[method-assign]


def _swap_ignoring_weakrefs(t1: torch.Tensor, t2: torch.Tensor) -> None:
    """torch.utils.swap_tensors without its weakref check: a fake tensor is held weakly by its
    mode's memo tables (which never look up a program's tensor again)."""
    if set(copyreg._slotnames(t1.__class__)) != set(copyreg._slotnames(t2.__class__)):  # type: ignore[attr-defined]
        raise RuntimeError("Cannot swap t1 and t2 if they have different slots")
    t1.__class__, t2.__class__ = t2.__class__, t1.__class__
    d1, d2 = t1.__dict__, t2.__dict__
    t1.__dict__, t2.__dict__ = d2, d1
    for name in copyreg._slotnames(t1.__class__):  # type: ignore[attr-defined]
        if hasattr(t1, name) and hasattr(t2, name):
            a, b = getattr(t1, name), getattr(t2, name)
            setattr(t1, name, b)
            setattr(t2, name, a)
    torch._C._swap_tensor_impl(t1, t2)


# --- compiled regions run eagerly ----------------------------------------------------------------


class EagerGraph:
    """What the program calls for one compiled graph: the graph Inductor compiled, run op by op on
    the program's tensors (fakes with twins); Inductor's own code is never run."""

    _boxed_call = True

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.gm = gm

    def __call__(self, args: list[Any]) -> Any:
        inputs = list(args)
        args.clear()
        with _MODE:
            return self.gm(*inputs)


def snapshot(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of the graph before Inductor's passes rewrite it for lowering."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        return copy.deepcopy(gm)
