"""Compatibility layer: scaled_dot_product_attention on fake CUDA tensors, for the CUDA preview.

On a GPU, `aten.scaled_dot_product_attention` (a C++ composite) asks
`sdp::select_sdp_backend` which fused kernel to use; that C++ code reads the device's
properties from the CUDA runtime, which a machine without a GPU does not have. While the
preview traces, this module stands in for the composite (a Python-dispatcher kernel, the
way torch's own decompositions override composites): it chooses the backend with the
checks of torch's `sdp_utils.cpp` for dense inputs, evaluated against the previewed
architecture, and emits the same ops the composite emits on a GPU.

The choice is a model of torch's C++ code, not torch's code: every call records what it
chose and why the others were refused (`sdpa` decisions), so the preview can say so.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import torch

aten = torch.ops.aten

MATH, FLASH, EFFICIENT, CUDNN, OVERRIDEABLE = 0, 1, 2, 3, 4
NAMES = {MATH: "math", FLASH: "flash", EFFICIENT: "efficient", CUDNN: "cudnn", OVERRIDEABLE: "overrideable"}
OPS = {
    MATH: "aten._scaled_dot_product_attention_math",
    FLASH: "aten._scaled_dot_product_flash_attention",
    EFFICIENT: "aten._scaled_dot_product_efficient_attention",
    CUDNN: "aten._scaled_dot_product_cudnn_attention",
}


class Model:
    """The inputs of one SDPA call and the device it is previewed for."""

    def __init__(self, arch: int, cudnn_version: int | None, args: tuple, kwargs: dict) -> None:
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")
        bound = dict(zip(names, args, strict=False))
        bound.update(kwargs)
        self.q, self.k, self.v = bound["query"], bound["key"], bound["value"]
        self.mask = bound.get("attn_mask")
        self.dropout = float(bound.get("dropout_p") or 0.0)
        self.causal = bool(bound.get("is_causal") or False)
        self.scale = bound.get("scale")
        self.gqa = bool(bound.get("enable_gqa") or False)
        self.major, self.minor = arch // 10, arch % 10
        self.cudnn = cudnn_version

    # --- shared checks -------------------------------------------------------------------------

    def sm_between(self, low: tuple[int, int], high: tuple[int, int]) -> bool:
        return low <= (self.major, self.minor) <= high

    def requires_grad(self) -> bool:
        return torch.is_grad_enabled() and any(t.requires_grad for t in (self.q, self.k, self.v))

    def four_dims(self) -> str | None:
        if not (self.q.dim() == self.k.dim() == self.v.dim() == 4):
            return "query, key and value must be 4-dimensional"
        return None

    def nonzero_seqlens(self) -> str | None:
        if self.q.size(-2) == 0 or self.k.size(-2) == 0:
            return "a sequence length is 0"
        return None

    def last_stride_one(self, ignore_singleton: bool) -> str | None:
        ok = all(t.stride(-1) == 1 for t in (self.q, self.k, self.v))
        if ignore_singleton:
            ok = ok or self.q.size(-1) == 1
        if self.mask is not None and self.mask.stride(-1) != 1:
            return "attn_mask's last dimension is not contiguous"
        return None if ok else "query, key and value need stride 1 in their last dimension"

    def heads(self, supports_gqa: bool) -> str | None:
        if not (self.q.size(0) == self.k.size(0) == self.v.size(0)):
            return "query, key and value have different batch sizes"
        hq, hk, hv = self.q.size(-3), self.k.size(-3), self.v.size(-3)
        if self.gqa and supports_gqa:
            return None if hk == hv and hq % hk == 0 else "grouped-query heads do not divide"
        return None if hq == hk == hv else "query, key and value have different numbers of heads"

    def dtype_in(self, dtypes: tuple[torch.dtype, ...]) -> str | None:
        if not (self.q.dtype == self.k.dtype == self.v.dtype and self.q.dtype in dtypes):
            return f"dtype {str(self.q.dtype).removeprefix('torch.')} is not supported"
        return None

    def gemm_alignment(self) -> int:
        half = self.q.dtype in (torch.float16, torch.bfloat16)
        tensor_cores = self.major >= 8 or (self.major >= 7 and half)
        alignment = 4 if self.major >= 8 else 1
        return max(alignment, 128 // (16 if half else 32)) if tensor_cores else alignment

    # --- backends --------------------------------------------------------------------------------

    def flash(self) -> str | None:
        if not torch.backends.cuda.flash_sdp_enabled():
            return "disabled (torch.backends.cuda.enable_flash_sdp)"
        d = self.q.size(-1)
        checks: list[Callable[[], str | None]] = [
            self.four_dims,
            lambda: "an explicit attn_mask is not supported" if self.mask is not None else None,
            lambda: (
                None
                if d == self.k.size(-1) == self.v.size(-1) and d <= 256
                else "head dims differ or exceed 256"
            ),
            lambda: (
                None if self.sm_between((8, 0), (12, 1)) else f"sm_{self.major}{self.minor} is not sm80-sm121"
            ),
            self._flash_sm86_training,
            lambda: (
                "is_causal with seqlen_q != seqlen_k"
                if self.causal and self.q.size(-2) != self.k.size(-2)
                else None
            ),
            lambda: self.dtype_in((torch.float16, torch.bfloat16)),
            lambda: self.heads(supports_gqa=True),
            self.nonzero_seqlens,
            lambda: self.last_stride_one(ignore_singleton=True),
        ]
        return _first(checks)

    def _flash_sm86_training(self) -> str | None:
        if self.requires_grad() and (self.sm_between((8, 6), (8, 9)) or self.sm_between((12, 0), (12, 1))):
            d = self.q.size(-1)
            if not (d <= 192 or (self.dropout == 0.0 and d > 224)):
                return "training with this head dim is not supported on this architecture"
        return None

    def efficient(self) -> str | None:
        if not torch.backends.cuda.mem_efficient_sdp_enabled():
            return "disabled (torch.backends.cuda.enable_mem_efficient_sdp)"
        align = self.gemm_alignment()
        dq, dv = self.q.size(-1), self.v.size(-1)
        dtypes = (
            (torch.float16, torch.float32, torch.bfloat16)
            if self.major >= 8
            else (torch.float16, torch.float32)
        )
        checks: list[Callable[[], str | None]] = [
            lambda: (
                None if self.sm_between((5, 0), (12, 1)) else f"sm_{self.major}{self.minor} is not sm50-sm121"
            ),
            self.four_dims,
            lambda: (
                None
                if dq == self.k.size(-1) and dq % align == 0 and dv % align == 0 and dq > 0 and dv > 0
                else f"head dims must be equal and divisible by {align}"
            ),
            self.nonzero_seqlens,
            lambda: self.last_stride_one(ignore_singleton=False),
            lambda: self.heads(supports_gqa=False),  # torch 2.11: no grouped-query heads
            lambda: self.dtype_in(dtypes),
        ]
        return _first(checks)

    def cudnn_attention(self) -> str | None:
        if not torch.backends.cuda.cudnn_sdp_enabled():
            return "disabled (torch.backends.cuda.enable_cudnn_sdp)"
        if self.cudnn is None or self.cudnn < 90000:
            return "no cuDNN 9 in this torch build"
        d_qk, d_v, s_k = self.q.size(-1), self.v.size(-1), self.k.size(-2)
        sm90_10x = (self.major == 9 and self.minor == 0) or self.major == 10
        limit = 256 if sm90_10x and self.cudnn > 92200 else 128
        checks: list[Callable[[], str | None]] = [
            self.four_dims,
            lambda: (
                "not deterministic"
                if torch.are_deterministic_algorithms_enabled()
                and not torch.is_deterministic_algorithms_warn_only_enabled()
                else None
            ),
            lambda: self.dtype_in((torch.float16, torch.bfloat16)),
            lambda: (
                None if self.sm_between((8, 0), (12, 1)) else f"sm_{self.major}{self.minor} is not sm80-sm121"
            ),
            lambda: (
                None
                if self.dropout * 16 == math.floor(self.dropout * 16)
                else "dropout not a multiple of 1/16"
            ),
            self.nonzero_seqlens,
            lambda: self.last_stride_one(ignore_singleton=True),
            lambda: self.heads(supports_gqa=True),
            lambda: None if d_qk <= limit and d_v <= limit else f"head dim above {limit}",
            lambda: None if d_qk % 8 == 0 and d_v % 8 == 0 else "head dim not a multiple of 8",
            lambda: None if s_k != 1 else "key/value sequence length 1",
        ]
        return _first(checks)

    def prefer_cudnn(self) -> bool:
        """torch puts cuDNN first on sm90/sm10x with cuDNN newer than 9.15 (sdp_utils.cpp)."""
        if os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED", "") in ("1", "true", "ON", "on"):
            return False
        return bool(self.cudnn and self.cudnn > 91500 and self.major in (9, 10))

    def choose(self) -> tuple[int, dict[str, str]]:
        """(backend, why each backend tried before it was refused)."""
        order = list(_priority_order())
        if order[:3] == [FLASH, EFFICIENT, MATH] and self.prefer_cudnn():
            order = [CUDNN, FLASH, EFFICIENT, MATH]
        refused: dict[str, str] = {}
        for backend in order:
            why = {
                FLASH: self.flash,
                EFFICIENT: self.efficient,
                CUDNN: self.cudnn_attention,
                MATH: lambda: None if torch.backends.cuda.math_sdp_enabled() else "disabled",
                OVERRIDEABLE: lambda: "not modelled",
            }[backend]()
            if why is None:
                return backend, refused
            refused[NAMES[backend]] = why
        return MATH, refused


def _first(checks: list[Callable[[], str | None]]) -> str | None:
    for check in checks:
        why = check()
        if why:
            return why
    return None


def _priority_order() -> list[int]:
    getter = getattr(torch._C, "_get_sdp_priority_order", None)
    try:
        return [int(b) for b in getter()] if getter else [FLASH, EFFICIENT, MATH, CUDNN]
    except Exception:
        return [FLASH, EFFICIENT, MATH, CUDNN]


def _bool_mask_to_additive(mask: torch.Tensor | None, dtype: torch.dtype, low: float) -> torch.Tensor | None:
    """`convert_boolean_attn_mask` (attention.cpp): where(mask, 0, low) in the query's dtype."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    other = aten.scalar_tensor.default(low, dtype=dtype, device=mask.device)
    zero = aten.scalar_tensor.default(0.0, dtype=dtype, layout=torch.strided, device=mask.device)
    return aten.where.self(mask, zero, other)


def _preprocess_mask(mask: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Memory-efficient attention wants the bias's last dim padded to a multiple of 16, then the
    bias expanded to (batch, heads, L, S) (attention.cpp `preprocess_mask`)."""
    last = mask.size(-1)
    if last % 16 != 0:
        mask = aten.slice.Tensor(aten.constant_pad_nd.default(mask, [0, 16 - last % 16], 0.0), -1, 0, last)
    return aten.expand.default(mask, [q.size(0), q.size(1), q.size(2), k.size(2)])


def composite(backend: int, model: Model) -> torch.Tensor:
    """What attention.cpp's `scaled_dot_product_attention` emits for `backend` on a CUDA device
    (checked against torch 2.11's own graphs on an H200: bench/gpu_compare_h200.json)."""
    q, k, v, scale = model.q, model.k, model.v, model.scale
    lse = model.requires_grad()
    if backend == CUDNN:
        mask = _bool_mask_to_additive(model.mask, q.dtype, -65504.0)
        return aten._scaled_dot_product_cudnn_attention(
            q, k, v, mask, lse, model.dropout, model.causal, False, scale=scale
        )[0]
    if backend == FLASH:
        d = q.size(-1)
        pad = (8 - d % 8) % 8
        qp, kp, vp = (aten.constant_pad_nd.default(t, [0, pad], 0.0) if pad else t for t in (q, k, v))
        og_scale = scale if scale is not None else 1.0 / math.sqrt(d)
        out = aten._scaled_dot_product_flash_attention(
            qp, kp, vp, model.dropout, model.causal, False, scale=og_scale
        )[0]
        return aten.slice.Tensor(out, -1, 0, d) if pad else out
    mask = _bool_mask_to_additive(model.mask, q.dtype, float("-inf"))
    if backend == EFFICIENT:
        if mask is not None:
            mask = _preprocess_mask(mask, q, k)
        return aten._scaled_dot_product_efficient_attention(
            q, k, v, mask, lse, model.dropout, model.causal, scale=scale
        )[0]
    return aten._scaled_dot_product_attention_math(
        q, k, v, mask, model.dropout, model.causal, None, scale=scale, enable_gqa=model.gqa
    )[0]


def install(arch: int, cudnn_version: int | None, on_choice: Callable[[dict[str, Any]], None]) -> str | None:
    """Override the SDPA composite for CUDA tensors while the preview traces (Python dispatcher)."""
    try:
        from torch._C import DispatchKey

        op = aten.scaled_dot_product_attention.default
    except (ImportError, AttributeError) as exc:
        return f"the SDPA backend model is not available on this torch ({exc})"
    if DispatchKey.CompositeImplicitAutograd in op.py_kernels:
        return "scaled_dot_product_attention already has a Python kernel on this torch: not overridden"

    def kernel(*args: Any, **kwargs: Any) -> Any:
        query = args[0] if args else kwargs["query"]
        if query.device.type != "cuda":
            return op._op_dk(DispatchKey.CompositeImplicitAutograd, *args, **kwargs)
        model = Model(arch, cudnn_version, args, kwargs)
        backend, refused = model.choose()
        on_choice(
            {
                "backend": NAMES[backend],
                "op": OPS.get(backend, ""),
                "refused": refused,
                "dtype": str(query.dtype).removeprefix("torch."),
                "shapes": [list(map(str, t.shape)) for t in (model.q, model.k, model.v)],
                "mask": model.mask is not None,
                "is_causal": model.causal,
                "enable_gqa": model.gqa,
            }
        )
        return composite(backend, model)

    op.py_impl(DispatchKey.CompositeImplicitAutograd)(kernel)
    return None
