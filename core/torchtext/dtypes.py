"""Element sizes of torch dtypes, however torch's text spells them.

Inductor's output code names a dtype in full (`torch.float32`, `torch.bfloat16`); printed FX
graphs abbreviate it (`f32[128, 32]`, `bf16[...]`: `torch.utils._dtype_abbrs`). Both spellings,
and torch's aliases (`float`, `half`, `long` ...), map to one table. Sizes as torch 2.13 and 2.14
report them (`dtype.itemsize`); packed sub-byte dtypes count one byte per stored element.
"""

from __future__ import annotations

from collections.abc import Sequence

# torch name, abbreviation in printed graphs, itemsize in bytes
_DTYPES: tuple[tuple[str, str, int], ...] = (
    ("bool", "b8", 1),
    ("uint8", "u8", 1),
    ("uint16", "u16", 2),
    ("uint32", "u32", 4),
    ("uint64", "u64", 8),
    ("int8", "i8", 1),
    ("int16", "i16", 2),
    ("int32", "i32", 4),
    ("int64", "i64", 8),
    ("float16", "f16", 2),
    ("bfloat16", "bf16", 2),
    ("float32", "f32", 4),
    ("float64", "f64", 8),
    ("complex32", "c32", 4),
    ("complex64", "c64", 8),
    ("complex128", "c128", 16),
    ("bcomplex32", "bc32", 4),  # torch >= 2.14
    ("float8_e4m3fn", "f8e4m3fn", 1),
    ("float8_e5m2", "f8e5m2", 1),
    ("float8_e4m3fnuz", "f8e4m3fnuz", 1),
    ("float8_e5m2fnuz", "f8e5m2fnuz", 1),
    ("float8_e8m0fnu", "f8e8m0fnu", 1),
    ("float4_e2m1fn_x2", "f4e2m1fnx2", 1),
    ("bits1x8", "b1x8", 1),
    ("bits2x4", "b2x4", 1),
    ("bits4x2", "b4x2", 1),
    ("bits8", "b8x1", 1),
    ("bits16", "b16x1", 2),
)
# torch's aliases: torch.float is torch.float32, and so on.
_ALIASES = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "long": "int64",
    "int": "int32",
    "short": "int16",
    "cfloat": "complex64",
    "cdouble": "complex128",
    "chalf": "complex32",
}
_SIZES = {name: size for name, _, size in _DTYPES} | {abbr: size for _, abbr, size in _DTYPES}
_SIZES |= {alias: _SIZES[name] for alias, name in _ALIASES.items()}


def itemsize(dtype: str | None) -> int | None:
    """Bytes per element: `torch.float32`, `float32`, `f32` and `float` all give 4; None if unknown."""
    if not dtype:
        return None
    return _SIZES.get(dtype.strip().removeprefix("torch."))


_FULL = {abbr: name for name, abbr, _ in _DTYPES} | {name: name for name, _, _ in _DTYPES} | _ALIASES


def full_name(dtype: str | None) -> str | None:
    """torch's own name of a dtype however it is spelled: `bf16`, `torch.bfloat16` -> `bfloat16`."""
    return _FULL.get(dtype.strip().removeprefix("torch.")) if dtype else None


def nbytes(shape: Sequence[str | int], dtype: str | None) -> int | None:
    """Bytes of a dense tensor of this shape (None when a size is symbolic or the dtype unknown)."""
    size = itemsize(dtype)
    if size is None:
        return None
    n = 1
    for dim in shape:
        text = str(dim).strip()
        if not text.lstrip("-").isdigit():
            return None
        n *= int(text)
    return n * size


def human_bytes(n: int | None) -> str:
    """A size as people read it: 512 B, 12.5 KiB, 3.2 MiB ("?" when unknown)."""
    if n is None:
        return "?"
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.4g} KiB"
    return f"{n / 1024 / 1024:.4g} MiB"
