"""Compatibility layer for `tcx numerics`: a float64 shadow of every floating value a run computes.

`tcx numerics` judges a compiled value against a higher-precision reference, as torch's own accuracy
checks do (`fp64_ref` in `torch._dynamo.utils.same`). torch makes its reference by casting a model and
its inputs to float64 and calling it again; a whole program (its training loop, its optimizer, the
casts it writes itself) cannot be cast. The shadow computes the reference beside the program instead:
in the eager run, every ATen op the program runs is run a second time on float64 copies of its
floating inputs, so every value (outputs, gradients, parameters after an optimizer step) has its float64
twin, computed along the same path, with the same random numbers.

How:
- A `TorchDispatchMode` (`torch.utils._python_dispatch`, private) sees each ATen op below autograd,
  backward's ops included. It runs the op as the program asked (the program's values are exactly
  eager's: the mode only reads them), then the same op on the shadows.
- A shadow is kept per storage, not per tensor object: a float64 tensor with one element per element
  of the real storage. A tensor's shadow is that storage's float64 tensor viewed with the tensor's own
  size, stride and offset, so views, in-place updates (running statistics, `param.add_`), and tensors
  autograd rebuilds around the same storage all find the same shadow. A storage first seen is copied
  (its value as the program has it); storages are held by weak reference and forgotten when freed.
- Random ops (`torch.Tag.nondeterministic_seeded`) are not run twice (that would draw other numbers):
  their shadow is the program's own result, except dropout, whose shadow is the float64 input times
  the program's own mask.
- Arithmetic is never rounded to the program's precision: a float dtype an op is asked to compute in
  (`sum(dtype=...)`) becomes float64 in the shadow. A tensor the program makes from nothing
  (`torch.full`, `arange`, `zeros`) is its value as made. A cast down is the program's own choice, not
  rounding: `.to(torch.bfloat16)` (and a `copy_` into a narrower tensor) rounds the shadow as it rounds
  the value, so a model cast to bfloat16 keeps its bfloat16 weights in the reference, as torch's own
  recipe (the model's bfloat16 weights cast up) has them.
- An op the shadow cannot run (an op without a float64 kernel, a tensor subclass) gives the program's
  own result as its shadow, and is counted: `fallback_ops`.

Cost: every op twice, in float64, plus Python dispatch; memory: a float64 copy of each float storage.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from tcx.core.recorder.compat import unavailable

F64 = torch.float64
SHADOWED = (torch.float16, torch.bfloat16, torch.float32)
PLAIN = (torch.Tensor, torch.nn.Parameter)
SWEEP_EVERY = 4096  # ops between sweeps of freed storages
# Ops whose result is never recomputed: they reinterpret or replace a tensor's storage.
REAL_ONLY = frozenset({"aten.set_", "aten.resize_", "aten.resize_as_"})


def mode_class() -> tuple[type | None, str | None]:
    """The dispatch-mode base class, or why it is missing on this torch."""
    try:
        from torch.multiprocessing.reductions import StorageWeakRef  # noqa: F401
        from torch.utils._python_dispatch import TorchDispatchMode

        return TorchDispatchMode, None
    except ImportError as exc:
        return None, unavailable(
            "the float64 reference (torch.utils._python_dispatch.TorchDispatchMode)", exc
        )


class _Entry:
    __slots__ = ("computed", "dtype", "flat", "ref")

    def __init__(self, ref: Any, flat: torch.Tensor, dtype: torch.dtype) -> None:
        self.ref, self.flat, self.dtype = ref, flat, dtype
        self.computed = False  # a float64 result was written into it (not only the program's value)


def shadowable(value: Any) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and type(value) in PLAIN
        and value.dtype in SHADOWED
        and value.layout == torch.strided
        and value.device.type not in ("meta", "mps")
    )


def make_mode() -> Any:
    """A new shadow mode (enter it to start), or raise ImportError where torch lacks the pieces."""
    base, why = mode_class()
    if base is None:
        raise ImportError(why)
    from torch.multiprocessing.reductions import StorageWeakRef

    class ShadowMode(base):  # type: ignore[misc, valid-type]
        """Runs each ATen op again on float64 shadows; see the module's docstring."""

        def __init__(self) -> None:
            super().__init__()
            self.entries: dict[int, _Entry] = {}
            self.fallback: Counter[str] = Counter()
            self.ops = 0
            self.paused = False

        # ------------------------------------------------------------------ lookup

        def _entry(self, t: torch.Tensor) -> _Entry:
            storage = t.untyped_storage()
            key = storage._cdata
            entry = self.entries.get(key)
            if entry is not None and (entry.ref.expired() or entry.dtype != t.dtype):
                entry = None
            if entry is None:
                n = storage.nbytes() // t.element_size()
                whole = t.as_strided((n,), (1,), 0)
                entry = _Entry(StorageWeakRef(storage), whole.to(F64), t.dtype)
                self.entries[key] = entry
            return entry

        def shadow(self, t: Any) -> torch.Tensor | None:
            """`t`'s float64 twin (a view into its storage's shadow), or None for a value without one."""
            if not shadowable(t):
                return None
            with torch.inference_mode(False):
                flat = self._entry(t).flat
                return flat.as_strided(t.size(), t.stride(), t.storage_offset())

        def computed(self, t: Any) -> bool:
            """Whether `t`'s shadow holds a float64 result (False: only the program's own value)."""
            if not shadowable(t):
                return False
            entry = self.entries.get(t.untyped_storage()._cdata)
            return bool(entry and not entry.ref.expired() and entry.computed)

        @contextlib.contextmanager
        def paused_for_tcx(self) -> Iterator[None]:
            """tcx's own tensor work (keeping values) is not the program's: not shadowed."""
            was, self.paused = self.paused, True
            try:
                yield
            finally:
                self.paused = was

        # ------------------------------------------------------------------ dispatch

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if self.paused:
                return func(*args, **kwargs)
            with torch.inference_mode(False):
                try:  # before the op runs: an in-place op must find the value it starts from
                    before: Any = (tree_map(self._substitute, args), tree_map(self._substitute, kwargs))
                except Exception:
                    before = None
            out = func(*args, **kwargs)
            self.ops += 1
            with torch.inference_mode(False):
                try:
                    if before is None or str(func.overloadpacket) in REAL_ONLY or func is _VIEW_DTYPE:
                        raise _NotShadowed
                    self._mirror(func, before, (args, kwargs), out)
                except Exception:
                    self.fallback[str(func)] += 1
                    self._copy_outputs(out)
                if self.ops % SWEEP_EVERY == 0:
                    self.entries = {k: e for k, e in self.entries.items() if not e.ref.expired()}
            return out

        def _substitute(self, value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                shadow = self.shadow(value)
                return value if shadow is None else shadow
            if isinstance(value, torch.dtype) and value in SHADOWED:
                return F64
            return value

        def _mirror(self, func: Any, before: Any, given: Any, out: Any) -> None:
            outs = tree_flatten(out)[0]
            if not any(shadowable(o) for o in outs):
                return
            args = given[0]
            if func is torch.ops.aten.native_dropout.default and len(outs) == 2:
                shadow_in, p = before[0][0], float(args[1])
                train = len(args) < 3 or args[2] is None or bool(args[2])
                value = shadow_in * outs[1].to(F64) * (1.0 / (1.0 - p)) if train and p < 1 else shadow_in
                self._write(outs[0], value)
                return
            factory = not any(isinstance(a, torch.Tensor) for a in tree_flatten(given)[0])
            if factory or torch.Tag.nondeterministic_seeded in func.tags:  # the program's values, as drawn
                self._copy_outputs(out)
                return
            if func in _CASTS and self._cast_down(func, before, args, outs[0]):
                return
            shadow_args, shadow_kwargs = before
            if "half_to_float" in shadow_kwargs:
                shadow_kwargs = {**shadow_kwargs, "half_to_float": False}
            if func in _SOFTMAXES and len(shadow_args) == 3:
                shadow_args = (*shadow_args[:2], False)
            shadow_out = func(*shadow_args, **shadow_kwargs)
            for real, shadow in zip(outs, tree_flatten(shadow_out)[0], strict=True):
                if not shadowable(real):
                    continue
                if (
                    isinstance(shadow, torch.Tensor)
                    and shadow.shape == real.shape
                    and shadow.is_floating_point()
                ):
                    self._write(real, shadow if shadow.dtype == F64 else shadow.to(F64))
                else:
                    raise _NotShadowed

        def _cast_down(self, func: Any, before: Any, args: Any, real: Any) -> bool:
            """A cast to a narrower float dtype: the shadow is rounded as the value is. False: not one."""
            source = args[1] if func is _COPY else args[0]
            shadow = before[0][1] if func is _COPY else before[0][0]
            narrower = (
                shadowable(real)
                and isinstance(source, torch.Tensor)
                and source.is_floating_point()
                and source.dtype != F64
                and torch.finfo(real.dtype).eps > torch.finfo(source.dtype).eps
            )
            if not narrower or not isinstance(shadow, torch.Tensor):
                return False
            self._write(real, shadow.to(real.dtype).to(F64))
            return True

        def _write(self, real: torch.Tensor, value: torch.Tensor) -> None:
            entry = self._entry(real)
            entry.computed = True
            view = entry.flat.as_strided(real.size(), real.stride(), real.storage_offset())
            same = (
                value.untyped_storage().data_ptr() == view.untyped_storage().data_ptr()
                and value.storage_offset() == view.storage_offset()
                and value.stride() == view.stride()
            )
            if not same:  # an in-place op or a view already wrote (or is) the shadow itself
                view.copy_(value)

        def _copy_outputs(self, out: Any) -> None:
            for real in tree_flatten(out)[0]:
                if shadowable(real):
                    with contextlib.suppress(Exception):
                        entry = self._entry(real)
                        view = entry.flat.as_strided(real.size(), real.stride(), real.storage_offset())
                        view.copy_(real)

    return ShadowMode()


class _NotShadowed(Exception):
    """This op's result has no float64 twin: the program's own value stands in."""


_SOFTMAXES = (torch.ops.aten._softmax.default, torch.ops.aten._log_softmax.default)
_VIEW_DTYPE = torch.ops.aten.view.dtype
_COPY = torch.ops.aten.copy_.default
_CASTS = (torch.ops.aten._to_copy.default, _COPY)
