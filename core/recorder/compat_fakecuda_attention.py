"""Compatibility layer: CPU values for the GPU's fused attention kernels, in the CUDA preview.

The flash, memory-efficient and cuDNN attention kernels (forward and backward) have no CPU
kernel; the preview computes their values in float32 on the CPU (compat_fakecuda_values runs
these stand-ins where the CPU op fails), in the shapes the CUDA op's outputs have (its fake
outputs): the logsumexp padded to the kernel's block (memory-efficient) or empty when not asked
for, the cuDNN one with a trailing 1, the RNG outputs and debug masks as zeros.

Dropout is applied as the GPU kernels apply it, to the attention weights after the softmax,
scaled by 1/(1-p), with a mask drawn for the (seed, offset) the forward takes from the CUDA
generator and returns (philox_seed/philox_offset, or flash's rng_state); the backward draws the
same mask again from the (seed, offset) it is given, so its gradients are those of the forward
that ran. The numbers are the CPU generator's, not the GPU's (compat_fakecuda_random).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.utils import _pytree as pytree

from tcx.core.recorder.compat_fakecuda_random import CUDA_GENERATOR, cpu_generator

# (seed, offset) outputs of each forward, and the (seed, offset) inputs of each backward
SEED_OUTPUTS = {
    "_scaled_dot_product_efficient_attention": (2, 3),
    "_scaled_dot_product_flash_attention": (6, 7),  # rng_state [seed, offset], unused
    "_scaled_dot_product_cudnn_attention": (6, 7),
}


def bind_arguments(func: Any, args: Any, kwargs: Any) -> dict[str, Any]:
    names = [a.name for a in func._schema.arguments]
    bound = dict(zip(names, args, strict=False))
    bound.update(kwargs)
    for a in func._schema.arguments:
        if a.name not in bound and a.has_default_value():
            bound[a.name] = a.default_value
    return bound


def attention(q, k, v, bias, is_causal, scale, keep=None, p=0.0):  # type: ignore[no-untyped-def]
    """Scaled dot-product attention in float32 on the CPU: (output, logsumexp). `keep`: the
    dropout mask (True where a weight is kept), applied to the weights after the softmax."""
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
    weights = torch.softmax(scores, dim=-1)
    if keep is not None:
        weights = weights * keep / (1.0 - p)
    return (weights @ v).to(dtype), lse


def dropout_keep(shape: tuple[int, ...], p: float, seed: int, offset: int) -> torch.Tensor:
    """The dropout mask of one attention kernel, drawn for its (seed, offset)."""
    return torch.rand(shape, generator=cpu_generator(seed, offset)) >= p


def _weights_shape(q: torch.Tensor, k: torch.Tensor) -> tuple[int, ...]:
    return (*q.shape[:-1], k.shape[-2])


def _fill(fake_out: Any, named: dict[int, torch.Tensor]) -> Any:
    """The CPU outputs of a stand-in in the shapes of the CUDA op's outputs: named ones computed
    (cut or zero-padded to the output's shape), the rest (RNG outputs, debug masks) zeros."""
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
            region = tuple(slice(0, min(n, m)) for n, m in zip(value.shape, fake.shape, strict=True))
            if value.dim() == fake.dim():
                real[region] = value[region].to(fake.dtype)
        out.append(real)
    return pytree.tree_unflatten(out, spec)


def _set_seed_outputs(name: str, outputs: Any, seed: int, offset: int) -> Any:
    flat, spec = pytree.tree_flatten(outputs)
    at_seed, at_offset = SEED_OUTPUTS[name]
    if flat[at_seed].numel() == 2:  # flash's rng_state holds both
        flat[at_seed].copy_(torch.tensor([seed, offset], dtype=torch.int64).to(flat[at_seed].dtype))
    else:
        flat[at_seed].fill_(seed)
        flat[at_offset].fill_(offset)
    return pytree.tree_unflatten(flat, spec)


def _seed_inputs(a: dict[str, Any]) -> tuple[int, int]:
    seed, offset = a.get("philox_seed"), a.get("philox_offset")
    if isinstance(seed, torch.Tensor) and seed.numel() == 2:  # flash's rng_state
        pair = seed.to(torch.int64).tolist()
        return int(pair[0]), int(pair[1])
    return int(seed.to(torch.int64).item()), int(offset.to(torch.int64).item())  # type: ignore[union-attr]


def _increment(name: str, q: torch.Tensor, k: torch.Tensor) -> int:
    """Numbers the kernel takes from the generator's offset (torch's attention.cu)."""
    batch, heads = q.shape[0], q.shape[-3]
    if name == "_scaled_dot_product_efficient_attention":
        return int(batch * heads * q.shape[-2] * k.shape[-2])
    return int(batch * heads * 32)


def sdpa_forward(func: Any, args: Any, kwargs: Any, fake_out: Any) -> Any:
    a = bind_arguments(func, args, kwargs)
    q, k, v = a["query"], a["key"], a["value"]
    p = float(a.get("dropout_p") or 0.0)
    name = func._opname
    keep, seed, offset = None, 0, 0
    if p > 0.0:
        seed, offset = CUDA_GENERATOR.philox_state(_increment(name, q, k))
        keep = dropout_keep(_weights_shape(q, k), p, seed, offset)
    out, lse = attention(q, k, v, a.get("attn_bias"), a["is_causal"], a.get("scale"), keep, p)
    filled = _fill(fake_out, {0: out, 1: lse})
    return _set_seed_outputs(name, filled, seed, offset) if keep is not None else filled


def sdpa_backward(func: Any, args: Any, kwargs: Any, fake_out: Any) -> Any:
    """The gradients of attention, by its formulas (no autograd: the stand-in runs inside the
    dispatcher, below autograd), for the mask the forward drew."""
    a = bind_arguments(func, args, kwargs)
    grad_out = a.get("grad_out") if a.get("grad_out") is not None else a.get("grad_out_")
    q, k, v = (a[n].float() for n in ("query", "key", "value"))
    p = float(a.get("dropout_p") or 0.0)
    keep = dropout_keep(_weights_shape(q, k), p, *_seed_inputs(a)) if p > 0.0 else None
    bias = a.get("attn_bias")
    grads = attention_backward(q, k, v, bias, a["is_causal"], a.get("scale"), grad_out.float(), keep, p)
    if bias is None or len(pytree.tree_leaves(fake_out)) <= 3:
        grads = grads[:3]
    return _fill(fake_out, dict(enumerate(grads)))


def attention_backward(q, k, v, bias, is_causal, scale, grad_out, keep=None, p=0.0):  # type: ignore[no-untyped-def]
    """(dq, dk, dv, dbias) of `attention` in float32: with P the softmax of the scores S and
    D the dropout (keep / (1-p)), O = (P*D) V, so dV = (P*D)^T dO, dP = (dO V^T) * D,
    dS = P * (dP - rowsum(dP * P)), dQ = dS K * scale, dK = dS^T Q * scale, dbias = dS."""
    groups = q.shape[-3] // k.shape[-3]
    kr = k.repeat_interleave(groups, dim=-3) if groups > 1 else k
    vr = v.repeat_interleave(groups, dim=-3) if groups > 1 else v
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ kr.transpose(-2, -1)) * scale
    if bias is not None:
        scores = scores + bias.float()
    if is_causal:
        L, S = scores.shape[-2], scores.shape[-1]
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    drop = keep / (1.0 - p) if keep is not None else None
    dropped = probs * drop if drop is not None else probs
    dv = dropped.transpose(-2, -1) @ grad_out
    dprobs = grad_out @ vr.transpose(-2, -1)
    if drop is not None:
        dprobs = dprobs * drop
    dscores = probs * (dprobs - (dprobs * probs).sum(dim=-1, keepdim=True))
    dq = (dscores @ kr) * scale
    dk = (dscores.transpose(-2, -1) @ q) * scale
    if groups > 1:  # the key/value heads were shared by `groups` query heads each
        dk = dk.unflatten(-3, (k.shape[-3], groups)).sum(dim=-3)
        dv = dv.unflatten(-3, (v.shape[-3], groups)).sum(dim=-3)
    dbias = _sum_to(dscores, tuple(bias.shape)) if bias is not None else None
    return dq, dk, dv, dbias


def _sum_to(t: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """`t` summed over the dimensions a tensor of `shape` was broadcast along."""
    lead = t.dim() - len(shape)
    t = t.sum(dim=tuple(range(lead))) if lead > 0 else t
    dims = tuple(i for i, n in enumerate(shape) if n == 1 and t.shape[i] != 1)
    return t.sum(dim=dims, keepdim=True) if dims else t


STAND_INS = {
    "_scaled_dot_product_efficient_attention": sdpa_forward,
    "_scaled_dot_product_flash_attention": sdpa_forward,
    "_scaled_dot_product_cudnn_attention": sdpa_forward,
    "_scaled_dot_product_efficient_attention_backward": sdpa_backward,
    "_scaled_dot_product_flash_attention_backward": sdpa_backward,
    "_scaled_dot_product_cudnn_attention_backward": sdpa_backward,
}
# stand-ins whose values are drawn from the CUDA generator (when their dropout_p > 0)
DRAWS = {name for name in STAND_INS if not name.endswith("_backward")}
