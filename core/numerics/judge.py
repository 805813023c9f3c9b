"""Is a compiled value what eager computes, within rounding? One tensor judged against eager and float64.

The judgement is torch's own accuracy check (`torch._dynamo.utils.same` with `fp64_ref`), applied to
one value: the error of each side against the float64 reference is their root-mean-square difference
(RMSE); the compiled value is divergent when its error exceeds

    allowed = multiplier × eager's error + eps(dtype) / 2 × RMS(reference)

with torch's multiplier (2; 3 for float16 and bfloat16, where torch's benchmarks saw false alarms) unless
one is given, and the error of one rounding of the value's dtype at its scale as the floor (a value eager
computes exactly is not condemned for the last bit). An explicit `rtol`/`atol` adds a check of every
element against eager (|compiled − eager| ≤ atol + rtol·|eager|, as `torch.isclose`). Without a float64
reference (a value the reference did not compute), torch.testing's default tolerance for the dtype
judges compiled against eager; integer and boolean values must be equal.

Used by the parent (core/numerics/compare.py) and by the recorder child (core/recorder/compat_localize.py)
alike; public torch API only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from tcx.core.numerics.report import Judgement

# torch.testing.assert_close's default (rtol, atol) per dtype, for values without a float64 reference.
DEFAULT_TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}
LOW_PRECISION = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Tolerance:
    """How far a compiled value may be from eager's: the multiple of eager's own error against float64
    (None: torch's), and an optional explicit rtol/atol checked element by element."""

    multiplier: float | None = None
    rtol: float | None = None
    atol: float | None = None

    def multiple(self, dtype: torch.dtype) -> float:
        if self.multiplier is not None:
            return self.multiplier
        return 3.0 if dtype in LOW_PRECISION else 2.0

    @property
    def explicit(self) -> bool:
        return self.rtol is not None or self.atol is not None

    def to_json(self) -> dict[str, Any]:
        return {"multiplier": self.multiplier, "rtol": self.rtol, "atol": self.atol}


def judge(
    label: str,
    compiled: torch.Tensor,
    eager: torch.Tensor,
    reference: torch.Tensor | None,
    tolerance: Tolerance,
) -> Judgement:
    """Judge `compiled` against `eager` and the float64 `reference` (None: no reference)."""
    shape = list(eager.shape)
    dtype = str(eager.dtype).removeprefix("torch.")
    if compiled.shape != eager.shape or compiled.dtype != eager.dtype:
        note = f"compiled is {_spec(compiled)}, eager {_spec(eager)}"
        return Judgement(label, dtype, shape, False, "mismatch", note=note)
    if not (eager.is_floating_point() or eager.is_complex()):
        equal = torch.equal(compiled, eager)
        differ = 0 if equal else int((compiled != eager).sum())
        note = None if equal else f"{differ} of {eager.numel()} elements differ"
        return Judgement(label, dtype, shape, equal, "exact", note=note)
    c, e = compiled.detach().to(torch.float64), eager.detach().to(torch.float64)
    diff = (c - e).abs()
    both_nan = c.isnan() & e.isnan()
    same_inf = c.isinf() & (c == e)
    diff = torch.where(both_nan | same_inf, torch.zeros_like(diff), diff)
    finite_eager = e.isfinite()
    new_nonfinite = int((~c.isfinite() & finite_eager).sum())
    max_abs, where = _largest(diff, c, e, reference)
    scale = float(e[finite_eager].abs().max()) if bool(finite_eager.any()) else 0.0
    out = Judgement(label, dtype, shape, True, "float64", max_abs=max_abs, where=where)
    out.max_rel = _finite(max_abs / scale) if scale > 0 and max_abs is not None else None
    problems = []
    if new_nonfinite:
        problems.append(f"{new_nonfinite} non-finite compiled values where eager's are finite")
    if reference is not None:
        r = reference.detach().to(torch.float64)
        mask = r.isfinite() & finite_eager & c.isfinite()
        if bool(mask.any()):
            out.eager_error = _rmse(e[mask], r[mask])
            out.compiled_error = _rmse(c[mask], r[mask])
            rms = _rmse(r[mask], torch.zeros_like(r[mask]))
            eps = torch.finfo(eager.dtype).eps
            out.allowed_error = tolerance.multiple(eager.dtype) * out.eager_error + eps / 2 * rms
            if out.compiled_error > out.allowed_error:
                problems.append(
                    f"error against float64 {out.compiled_error:.3g} > allowed {out.allowed_error:.3g} "
                    f"({tolerance.multiple(eager.dtype):g}× eager's {out.eager_error:.3g} + one rounding)"
                )
        else:
            reference = None
    if reference is None:
        out.basis = "tolerance"
        rtol, atol = DEFAULT_TOLERANCES.get(eager.dtype, (1.3e-6, 1e-5))
        outside = int((diff > atol + rtol * e.abs()).sum())
        if outside:
            problems.append(
                f"{outside} elements outside torch.testing's {dtype} tolerance (rtol {rtol}, atol {atol})"
            )
    if tolerance.explicit:
        rtol, atol = tolerance.rtol or 0.0, tolerance.atol or 0.0
        outside = int((diff > atol + rtol * e.abs()).sum())
        if outside:
            problems.append(f"{outside} of {e.numel()} elements outside --rtol {rtol:g} --atol {atol:g}")
    out.within = not problems
    out.note = "; ".join(problems) or None
    return out


def _largest(
    diff: torch.Tensor, c: torch.Tensor, e: torch.Tensor, reference: torch.Tensor | None
) -> tuple[float | None, dict[str, Any] | None]:
    if diff.numel() == 0:
        return None, None
    flat = int(torch.nan_to_num(diff, nan=math.inf).reshape(-1).argmax())
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape)] if diff.dim() else []
    where = {
        "index": index,
        "eager": _finite(float(e.reshape(-1)[flat])),
        "compiled": _finite(float(c.reshape(-1)[flat])),
        "reference": _finite(float(reference.reshape(-1)[flat])) if reference is not None else None,
    }
    return _finite(float(diff.reshape(-1)[flat])), where


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.sqrt(torch.mean((a - b) ** 2))) if a.numel() else 0.0


def _finite(value: float) -> float | None:
    """A number JSON can carry (strict JSON has no NaN or infinity)."""
    return value if math.isfinite(value) else None


def _spec(t: torch.Tensor) -> str:
    return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"
