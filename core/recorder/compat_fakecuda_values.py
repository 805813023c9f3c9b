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
(seed, offset) state, and float results can differ in their last bits. An op with no CPU kernel
(the GPU's fused attention kernels have stand-ins here) leaves its outputs without a value; a line
that then needs one stops the program with `PreviewValueUnknown`, naming the op.
"""

from __future__ import annotations

import copy
import copyreg
import math
import os
import struct
import threading
from typing import Any

import torch
from torch.utils import _pytree as pytree

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


def install_values(mode: Any) -> None:
    """Make `mode` (the program's FakeTensorMode) run every op on the twins too."""
    global _MODE, _DATA_DEPENDENT
    from torch._subclasses import fake_tensor as ft

    _MODE = mode
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
        if ours and func is torch.ops.aten._local_scalar_dense.default:
            if unknown is not None:
                raise PreviewValueUnknown(_unknown_message(unknown))
            return values[0].item()
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
        try:
            real_out = _run_real(func, real_args, real_kwargs, fake_out, device)
        except (NotImplementedError, RuntimeError, TypeError, ValueError) as exc:
            if fake_out is _MISSING:
                raise
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            real_out = Unknown(f"{func} has no CPU kernel ({type(exc).__name__}: {first})")
        if fake_out is _MISSING:
            fake_out = _fakes_from(real_out, device)
        return _pair(fake_out, real_out, values)

    mode.dispatch = dispatch


_MISSING = object()


def _run_real(func: Any, args: Any, kwargs: Any, fake_out: Any, device: torch.device) -> Any:
    standin = STAND_INS.get(getattr(func, "_opname", ""))
    seeded = device.type == "cuda" and torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())
    if standin is not None:
        try:
            return func(*args, **kwargs)
        except (NotImplementedError, RuntimeError):
            return standin(func, args, kwargs, fake_out)
    if seeded:
        with CUDA_GENERATOR.drawing(fake_out):
            return func(*args, **kwargs)
    return func(*args, **kwargs)


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


# --- the CUDA generator -----------------------------------------------------------------------


class PreviewCudaGenerator(torch.Generator):
    """`torch.cuda.default_generators[0]` of the preview: a (seed, offset) state of 16 bytes, as a
    CUDA (Philox) generator has, so graphs that save and replay it (activation checkpointing)
    trace as on a GPU. A random op on a CUDA tensor draws its CPU value from a CPU generator seeded
    with that state, then moves the offset on."""

    def __init__(self, seed: int = 67280421310721) -> None:
        super().__init__()
        self._state = [int(seed), 0]

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device("cuda", 0)

    def manual_seed(self, seed: int) -> PreviewCudaGenerator:  # type: ignore[override]
        self._state[:] = [int(seed) & (2**64 - 1), 0]
        return self

    def seed(self) -> int:  # type: ignore[override]
        value = int.from_bytes(os.urandom(8), "little") & (2**63 - 1)
        self.manual_seed(value)
        return value

    def initial_seed(self) -> int:  # type: ignore[override]
        return self._state[0]

    def get_state(self) -> torch.Tensor:  # type: ignore[override]
        data = struct.pack("<Qq", self._state[0], self._state[1])
        return torch.frombuffer(bytearray(data), dtype=torch.uint8)

    def set_state(self, state: torch.Tensor) -> PreviewCudaGenerator:  # type: ignore[override]
        raw = bytes(state.to("cpu", torch.uint8).tolist() if isinstance(state, torch.Tensor) else state)
        if len(raw) != 16:
            raise RuntimeError(f"RNG state must be 16 bytes (a CUDA generator's), got {len(raw)}")
        seed, offset = struct.unpack("<Qq", raw)
        self._state[:] = [seed, offset]
        return self

    def get_offset(self) -> int:  # type: ignore[override]
        return self._state[1]

    def set_offset(self, offset: int) -> None:  # type: ignore[override]
        self._state[1] = int(offset)

    def graphsafe_get_state(self) -> PreviewCudaGenerator:  # type: ignore[override]
        view = PreviewCudaGenerator()
        view._state = self._state  # shares the state, as a CUDA generator's graph-safe state does
        return view

    def graphsafe_set_state(self, state: PreviewCudaGenerator) -> None:  # type: ignore[override]
        self._state = state._state

    def clone_state(self) -> PreviewCudaGenerator:  # type: ignore[override]
        clone = PreviewCudaGenerator()
        clone._state = list(self._state)
        return clone

    def cpu_generator_for_next_op(self, numel: int | None) -> torch.Generator:
        g = torch.Generator()
        g.manual_seed((self._state[0] * 1_000_003 + self._state[1]) % (2**63))
        self._state[1] += 4 * math.ceil((numel or 1) / 4)
        return g

    def drawing(self, fake_out: Any) -> _Drawing:
        numel = sum(t.numel() for t in pytree.tree_leaves(fake_out) if isinstance(t, torch.Tensor))
        return _Drawing(self.cpu_generator_for_next_op(numel))


class _Drawing:
    """Swap the CPU default generator for one seeded from the CUDA state, for one op."""

    def __init__(self, generator: torch.Generator) -> None:
        self.generator = generator

    def __enter__(self) -> None:
        self.saved = torch.default_generator.get_state()
        torch.default_generator.set_state(self.generator.get_state())

    def __exit__(self, *exc: Any) -> None:
        torch.default_generator.set_state(self.saved)


CUDA_GENERATOR = PreviewCudaGenerator()


def install_cuda_rng() -> None:
    """torch.cuda's RNG functions act on CUDA_GENERATOR (a CPU-only torch has no CUDA generator)."""
    import torch.cuda.random as cuda_random

    gen = CUDA_GENERATOR

    def manual_seed(seed: int) -> None:
        gen.manual_seed(seed)

    def seed() -> None:
        gen.seed()

    def get_rng_state(device: Any = "cuda") -> torch.Tensor:
        return gen.get_state()

    def set_rng_state(new_state: torch.Tensor, device: Any = "cuda") -> None:
        gen.set_state(new_state)

    functions = {
        "manual_seed": manual_seed,
        "manual_seed_all": manual_seed,
        "seed": seed,
        "seed_all": seed,
        "initial_seed": gen.initial_seed,
        "get_rng_state": get_rng_state,
        "set_rng_state": set_rng_state,
        "get_rng_state_all": lambda: [gen.get_state()],
        "set_rng_state_all": lambda states: gen.set_state(states[0]),
    }
    for module in (torch.cuda, cuda_random):
        for name, fn in functions.items():
            if hasattr(module, name):
                setattr(module, name, fn)
    torch.cuda.default_generators = (gen,)  # type: ignore[assignment]
    if hasattr(cuda_random, "default_generators"):
        cuda_random.default_generators = (gen,)


# --- stand-ins for CUDA-only kernels -----------------------------------------------------------


def _bind(func: Any, args: Any, kwargs: Any) -> dict[str, Any]:
    names = [a.name for a in func._schema.arguments]
    bound = dict(zip(names, args, strict=False))
    bound.update(kwargs)
    for a in func._schema.arguments:
        if a.name not in bound and a.has_default_value():
            bound[a.name] = a.default_value
    return bound


def _attention(q, k, v, bias, is_causal, scale):  # type: ignore[no-untyped-def]
    """Scaled dot-product attention in float32 on the CPU: (output, logsumexp)."""
    dtype = q.dtype
    q, k, v = q.float(), k.float(), v.float()
    if k.shape[-3] != q.shape[-3]:  # grouped-query attention
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * scale
    if bias is not None:
        scores = scores + bias.float()
    if is_causal:
        L, S = scores.shape[-2], scores.shape[-1]
        mask = torch.ones(L, S, dtype=torch.bool).tril()  # top-left aligned, as torch's is_causal
        scores = scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return (torch.softmax(scores, dim=-1) @ v).to(dtype), lse


def _fill(fake_out: Any, named: dict[int, torch.Tensor]) -> Any:
    """The CPU outputs of a stand-in: named ones computed, the rest (RNG seeds, debug masks) zeros."""
    fakes, spec = pytree.tree_flatten(fake_out)
    out = []
    for i, fake in enumerate(fakes):
        value = named.get(i)
        if not isinstance(fake, torch.Tensor):
            out.append(fake)
            continue
        real = torch.zeros(fake.shape, dtype=fake.dtype)
        if value is not None:
            if value.dim() < fake.dim():  # cuDNN keeps logsumexp as [B, H, L, 1]
                value = value.reshape(*value.shape, *[1] * (fake.dim() - value.dim()))
            region = tuple(slice(0, n) for n in value.shape)
            real[region] = value.to(fake.dtype)
        out.append(real)
    return pytree.tree_unflatten(out, spec)


def _sdpa_forward(func: Any, args: Any, kwargs: Any, fake_out: Any) -> Any:
    a = _bind(func, args, kwargs)
    q, k, v = a["query"], a["key"], a["value"]
    out, lse = _attention(q, k, v, a.get("attn_bias"), a["is_causal"], a.get("scale"))
    return _fill(fake_out, {0: out, 1: lse})


def _sdpa_backward(func: Any, args: Any, kwargs: Any, fake_out: Any) -> Any:
    a = _bind(func, args, kwargs)
    grad_out = a.get("grad_out") if a.get("grad_out") is not None else a.get("grad_out_")
    q, k, v = (a[n].detach().float().requires_grad_() for n in ("query", "key", "value"))
    bias = a.get("attn_bias")
    inputs = [q, k, v]
    if bias is not None and len(pytree.tree_leaves(fake_out)) > 3:
        bias = bias.detach().float().requires_grad_()
        inputs.append(bias)
    with torch.enable_grad():
        out, _ = _attention(q, k, v, bias, a["is_causal"], a.get("scale"))
        grads = torch.autograd.grad(out.float(), inputs, grad_out.float(), allow_unused=True)
    return _fill(fake_out, {i: g for i, g in enumerate(grads) if g is not None})


STAND_INS = {
    "_scaled_dot_product_efficient_attention": _sdpa_forward,
    "_scaled_dot_product_flash_attention": _sdpa_forward,
    "_scaled_dot_product_cudnn_attention": _sdpa_forward,
    "_scaled_dot_product_efficient_attention_backward": _sdpa_backward,
    "_scaled_dot_product_flash_attention_backward": _sdpa_backward,
    "_scaled_dot_product_cudnn_attention_backward": _sdpa_backward,
}


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
            return self.item().__format__(spec)
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
