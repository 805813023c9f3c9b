"""Compatibility layer: random numbers in the CUDA preview — the CUDA generator, and which graphs
depend on what it drew.

A preview draws the values of random ops on CUDA tensors from a CPU generator (seeded from the
CUDA generator's state), so the numbers differ from the GPU's: torch's CUDA kernels draw from
Philox streams laid out by each kernel's launch grid (the SM count), and compiled code draws in
Triton with Inductor's seeds and per-kernel offsets; none of it can be checked bit for bit
without a GPU. The numbers are not reproduced; the dependency is named instead.

Every CUDA tensor drawn from the generator is marked with where it was drawn (the op and the
user's line), and the mark follows the values through each op (compat_fakecuda_values). When
such a value leaves the tensors — a branch on it (`if`, `while`), a number read (`.item()`,
`float()`, `int()`, `.tolist()`), a size that depends on it (`nonzero`, a boolean mask) — the
read is noted, and the next compile Dynamo starts is named as depending on it: the branch or the
number may go another way on a GPU, and with it which graph compiles or a constant in it. So is a
compile whose input tensors have sizes that depend on random values. Each is a
`cuda_preview_decision` with decision `random_values` for that compile id. A read on a line that
only prints (`print(...)`, a logger call) steers nothing and is not noted; a copy to the CPU
(`.cpu()`) is not followed (the copy's own ops run on the CPU, outside the preview's tensors).
"""

from __future__ import annotations

import linecache
import math
import os
import re
import struct
import sys
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.utils import _pytree as pytree

from tcx.core.frames import frame_origin, is_tcx_code

DRAWN = "_tcx_preview_drawn"  # in a fake's __dict__: where its values were drawn (origins)
SIZED = "_tcx_preview_sized"  # where the random values its sizes depend on were drawn
MAX_ORIGINS = 3  # per tensor; the first ones drawn
MAX_READS = 8  # reads kept for one compile
MAX_NOTED = 500  # random-value decisions per run
_PRINTING = re.compile(r"\bprint\(|\blog(?:ger|ging)?\.\w+\(|\bwarnings\.warn\(")


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

    def philox_state(self, increment: int) -> tuple[int, int]:
        """(seed, offset) for one kernel that draws `increment` numbers, and the offset moved on
        (as `philox_cuda_state(increment)` does for the GPU's fused attention dropout)."""
        seed, offset = self._state
        self._state[1] += 4 * math.ceil(max(increment, 1) / 4)
        return seed, offset

    def cpu_generator_for_next_op(self, numel: int | None) -> torch.Generator:
        seed, offset = self.philox_state(numel or 1)
        return cpu_generator(seed, offset)

    def drawing(self, fake_out: Any) -> _Drawing:
        numel = sum(t.numel() for t in pytree.tree_leaves(fake_out) if isinstance(t, torch.Tensor))
        return _Drawing(self.cpu_generator_for_next_op(numel))


def cpu_generator(seed: int, offset: int) -> torch.Generator:
    """The CPU generator that stands for the CUDA stream at (seed, offset)."""
    g = torch.Generator()
    g.manual_seed((seed * 1_000_003 + offset) % (2**63))
    return g


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


# --- which values were drawn, and where they steer the program -----------------------------------


def user_line() -> dict[str, Any] | None:
    """The innermost line of the user's own code on the current stack (not torch's, tcx's, the
    standard library's or a generated graph's)."""
    frame = sys._getframe(1)
    while frame is not None:
        file = frame.f_code.co_filename
        if not file.startswith("<") and frame_origin(file) == "user" and not is_tcx_code(file):
            line = frame.f_lineno
            code = linecache.getline(file, line).strip()
            return {"file": file, "line": line, "function": frame.f_code.co_name, "code": code[:200]}
        frame = frame.f_back  # type: ignore[assignment]
    return None


def origins_of(tensors: Iterable[Any], key: str) -> tuple[dict[str, Any], ...]:
    found: list[dict[str, Any]] = []
    for t in tensors:
        for origin in t.__dict__.get(key, ()):
            if origin not in found:
                found.append(origin)
    return tuple(found[:MAX_ORIGINS])


def mark(tensors: Iterable[Any], key: str, origins: tuple[dict[str, Any], ...]) -> None:
    if not origins:
        return
    for t in tensors:
        own = t.__dict__.get(key, ())
        t.__dict__[key] = own + tuple(o for o in origins if o not in own)[: max(0, MAX_ORIGINS - len(own))]


def drawn_here(op: str) -> tuple[dict[str, Any], ...]:
    """The origin of values an op draws now from the CUDA generator."""
    line = user_line()
    return ({"op": op, **line} if line else {"op": op},)


class RandomReads:
    """Reads of values that depend on the CUDA generator's numbers, until the next compile names
    them; `note` writes the `random_values` decision of a compile."""

    def __init__(self, note: Callable[..., None]) -> None:
        self.note = note
        self.pending: list[dict[str, Any]] = []
        self.noted = 0
        self.printing = 0  # >0 while tcx formats a tensor for printing

    def read(self, how: str, origins: tuple[dict[str, Any], ...], value: Any = None) -> None:
        """A value drawn at `origins` left the tensors: `how` is branch, number or size."""
        if not origins or self.printing:
            return
        line = user_line()
        if line is None or _PRINTING.search(line.get("code") or ""):
            return
        read = {"how": how, **line, "drawn_at": list(origins)}
        if isinstance(value, (bool, int, float)):
            read["value"] = value
        key = (how, line["file"], line["line"])
        if all((r["how"], r["file"], r["line"]) != key for r in self.pending):
            self.pending = [*self.pending, read][-MAX_READS:]

    def compile_starts(self, compile_id: str | None, frame_locals: dict[str, Any], is_ours: Any) -> None:
        """Name the compile that starts now when it follows reads of random values or takes
        tensors whose sizes depend on them."""
        reads, self.pending = self.pending, []
        sized = _sized_inputs(frame_locals, is_ours)
        if not (reads or sized) or self.noted >= MAX_NOTED:
            return
        self.noted += 1
        self.note(compile_id, reads, sized)


def _sized_inputs(frame_locals: dict[str, Any], is_ours: Any) -> list[dict[str, Any]]:
    """The frame's tensors (arguments, and tensors in its lists, tuples and dicts) whose sizes
    depend on random values."""
    found = []
    for name, value in list(frame_locals.items())[:64]:
        items = value.values() if isinstance(value, dict) else value
        candidates = list(items)[:64] if isinstance(value, (list, tuple, dict)) else [value]
        for t in candidates:
            if is_ours(t) and t.__dict__.get(SIZED):
                found.append({"input": name, "shape": list(t.shape), "drawn_at": list(t.__dict__[SIZED])})
                break
    return found
