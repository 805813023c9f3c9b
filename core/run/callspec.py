"""The `--call` shape spec: a compact description of one call's arguments.

    --call 128x32,32x64,64              three float32 tensors
    --call 128x32:f16:grad,=3           a float16 tensor with requires_grad, then the int 3
    --call 4x8:i64,=None,=0.5,scalar    an int64 tensor, None, 0.5 and a 0-d float tensor

Each comma-separated item is either a tensor `DIMS[:DTYPE][:grad]` (DIMS is `AxBxC`, or
`scalar` for a 0-d tensor) or a Python literal after `=`. Parsing is torch-free; the
recorder child turns a parsed spec into real tensors with a fixed seed.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from tcx.core.errors import UsageError
from tcx.core.torchtext.commas import split_top_level

INT64_MAX = 2**63 - 1

DTYPES = {
    "f32": "float32",
    "float32": "float32",
    "float": "float32",
    "f16": "float16",
    "float16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "f64": "float64",
    "float64": "float64",
    "double": "float64",
    "i64": "int64",
    "int64": "int64",
    "long": "int64",
    "i32": "int32",
    "int32": "int32",
    "int": "int32",
    "i8": "int8",
    "u8": "uint8",
    "bool": "bool",
}


@dataclass(frozen=True)
class TensorArg:
    shape: tuple[int, ...]
    dtype: str = "float32"
    requires_grad: bool = False

    def describe(self) -> str:
        dims = "x".join(map(str, self.shape)) or "scalar"
        return f"{dims}:{self.dtype}" + (":grad" if self.requires_grad else "")


@dataclass(frozen=True)
class LiteralArg:
    value: object

    def describe(self) -> str:
        return f"={self.value!r}"


Arg = TensorArg | LiteralArg


def parse_call_spec(spec: str) -> list[Arg]:
    """Parse one `--call` value; raise UsageError naming the bad item."""
    if spec.strip() == "":
        return []
    return [_parse_item(item, spec) for item in split_top_level(spec)]


def _parse_item(item: str, spec: str) -> Arg:
    if not item:
        raise UsageError(f"--call {spec!r}: empty item (two commas in a row?).")
    if item.startswith("="):
        try:
            return LiteralArg(ast.literal_eval(item[1:]))
        except (ValueError, SyntaxError):
            raise UsageError(
                f"--call {spec!r}: {item!r} is not a Python literal (try =3, =0.5, =True, =None)."
            ) from None
    dims, *mods = item.split(":")
    shape = _parse_dims(dims, item, spec)
    dtype, grad = "float32", False
    for mod in mods:
        if mod in ("grad", "g", "requires_grad"):
            grad = True
        elif mod.lower() in DTYPES:
            dtype = DTYPES[mod.lower()]
        else:
            known = ", ".join(sorted({"f32", "f16", "bf16", "f64", "i64", "i32", "i8", "u8", "bool"}))
            raise UsageError(
                f"--call {spec!r}: unknown modifier {mod!r} in {item!r} (dtypes: {known}; or grad)."
            )
    if grad and not dtype.startswith(("float", "bfloat")):
        raise UsageError(f"--call {spec!r}: {item!r}: only floating tensors can require grad.")
    return TensorArg(shape=shape, dtype=dtype, requires_grad=grad)


def _parse_dims(dims: str, item: str, spec: str) -> tuple[int, ...]:
    if dims in ("scalar", "()"):
        return ()
    try:
        shape = tuple(int(d) for d in dims.lower().split("x"))
    except ValueError:
        raise UsageError(
            f"--call {spec!r}: {item!r} is not a shape like 128x32 (or =LITERAL for a Python value)."
        ) from None
    if any(d < 0 for d in shape):
        raise UsageError(f"--call {spec!r}: negative dimension in {item!r}.")
    if math.prod(shape) > INT64_MAX or any(d > INT64_MAX for d in shape):
        raise UsageError(
            f"--call {spec!r}: {item!r} is too large (torch sizes and element counts are int64)."
        )
    return shape


def spec_to_json(args: list[Arg]) -> list[dict]:
    """Plain-JSON form passed to the recorder child."""
    out: list[dict] = []
    for a in args:
        if isinstance(a, TensorArg):
            out.append({"tensor": list(a.shape), "dtype": a.dtype, "grad": a.requires_grad})
        else:
            out.append({"literal": repr(a.value)})
    return out
