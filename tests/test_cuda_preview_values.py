"""The CUDA preview's CPU values for what a CPU-only torch cannot run (core/recorder/
compat_fakecuda_attention.py, compat_fakecuda_random.py): the GPU's fused attention kernels in
inference and training shapes (no logsumexp, dropout, masks, backward), compared with torch's own
CPU attention and autograd, and the CUDA generator's 16-byte state. Plain CPU tensors; no preview
process."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tcx.core.recorder.compat_fakecuda_attention import STAND_INS, dropout_keep
from tcx.core.recorder.compat_fakecuda_random import CUDA_GENERATOR, PreviewCudaGenerator

pytestmark = pytest.mark.torch

aten = torch.ops.aten


def _outputs(func, *shapes_dtypes):  # type: ignore[no-untyped-def]
    """Meta tensors shaped as the CUDA op's outputs (the fake side's, in the preview)."""
    return tuple(torch.empty(s, dtype=d, device="meta") for s, d in shapes_dtypes)


@pytest.mark.parametrize("causal", [False, True])
def test_efficient_attention_stand_in_equals_torchs_cpu_attention(causal: bool) -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8) for _ in range(3))
    bias = torch.randn(2, 3, 5, 5)
    func = aten._scaled_dot_product_efficient_attention.default
    fake = (*_outputs(func, ((2, 3, 5, 8), torch.float32), ((2, 3, 32), torch.float32)), None, None)
    out, lse, *_ = STAND_INS["_scaled_dot_product_efficient_attention"](
        func, (q, k, v, bias, True), {"is_causal": causal}, fake
    )
    mask = bias if not causal else bias.masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), float("-inf"))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, expected)
    scores = q @ k.transpose(-2, -1) / 8**0.5 + mask
    torch.testing.assert_close(lse[..., :5], torch.logsumexp(scores, -1))
    assert lse.shape == (2, 3, 32) and bool((lse[..., 5:] == 0).all())  # padded as the CUDA kernel's


def test_flash_attention_backward_stand_in_equals_autograd_of_torchs_attention() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 4, 8, requires_grad=True) for _ in range(3))
    grad_out = torch.randn(2, 2, 4, 8)
    expected = torch.autograd.grad(
        F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), grad_out
    )
    func = aten._scaled_dot_product_flash_attention_backward.default
    fake = _outputs(func, *[((2, 2, 4, 8), torch.float32)] * 3)
    args = (grad_out, q.detach(), k.detach(), v.detach(), None, None, None, None, 4, 4, 0.0, True, None, None)
    got = STAND_INS["_scaled_dot_product_flash_attention_backward"](func, args, {}, fake)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)


def test_cuda_generator_state_is_sixteen_bytes_and_replays() -> None:
    """get_rng_state/set_rng_state of a CUDA generator carry (seed, offset): a checkpointed region
    that restores the state draws the same numbers again."""
    gen = PreviewCudaGenerator().manual_seed(1234)
    state = gen.get_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    first = torch.rand(6, generator=gen.cpu_generator_for_next_op(6))
    assert gen.get_offset() == 8
    gen.set_state(state)
    again = torch.rand(6, generator=gen.cpu_generator_for_next_op(6))
    assert torch.equal(first, again)
    assert not torch.equal(first, torch.rand(6, generator=gen.cpu_generator_for_next_op(6)))
    view = gen.graphsafe_get_state()
    gen.set_offset(40)
    assert view.get_offset() == 40 and gen.clone_state().get_offset() == 40
    assert gen.device == torch.device("cuda", 0) and isinstance(gen, torch.Generator)


def test_efficient_attention_without_logsumexp_has_the_cuda_ops_empty_logsumexp() -> None:
    """Inference (no grad): the CUDA op returns a [B, H, 0] logsumexp; the stand-in fills what the
    op returns (nanoGPT's evaluation under no_grad stopped at "Target sizes: [4, 2, 0]")."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(4, 2, 16, 8) for _ in range(3))
    func = aten._scaled_dot_product_efficient_attention.default
    fake = (*_outputs(func, ((4, 2, 16, 8), torch.float32), ((4, 2, 0), torch.float32)), None, None)
    out, lse, *_ = STAND_INS["_scaled_dot_product_efficient_attention"](
        func, (q, k, v, None, False), {"is_causal": True}, fake
    )
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert lse.shape == (4, 2, 0)


def _seed_outputs() -> tuple[tuple, ...]:
    return (((), torch.int64), ((), torch.int64))


def test_efficient_attention_dropout_forward_and_backward_use_one_mask() -> None:
    """Training with dropout: the forward drops attention weights with a mask drawn for the (seed,
    offset) it takes from the CUDA generator and returns; the backward, given them, draws the same
    mask, so its gradients are autograd's of the forward that ran (plain torch, same mask)."""
    torch.manual_seed(0)
    p, scale = 0.25, 8**-0.5
    q, k, v = (torch.randn(2, 2, 6, 8, requires_grad=True) for _ in range(3))
    bias = torch.randn(2, 2, 6, 6, requires_grad=True)
    CUDA_GENERATOR.manual_seed(7)
    forward = aten._scaled_dot_product_efficient_attention.default
    fake = _outputs(forward, ((2, 2, 6, 8), torch.float32), ((2, 2, 32), torch.float32), *_seed_outputs())
    args = (q.detach(), k.detach(), v.detach(), bias.detach(), True, p)
    out, lse, seed, offset = STAND_INS["_scaled_dot_product_efficient_attention"](forward, args, {}, fake)
    assert (int(seed), int(offset)) == (7, 0) and CUDA_GENERATOR.get_offset() == 2 * 2 * 6 * 6

    keep = dropout_keep((2, 2, 6, 6), p, 7, 0)
    assert 0 < int(keep.sum()) < keep.numel()  # some weights dropped, some kept
    weights = torch.softmax(q @ k.transpose(-2, -1) * scale + bias, dim=-1) * keep / (1 - p)
    expected = weights @ v
    torch.testing.assert_close(out, expected.detach())

    grad_out = torch.randn(2, 2, 6, 8)
    backward = aten._scaled_dot_product_efficient_attention_backward.default
    fake_grads = _outputs(backward, *[((2, 2, 6, 8), torch.float32)] * 3, ((2, 2, 6, 6), torch.float32))
    bargs = (
        grad_out,
        q.detach(),
        k.detach(),
        v.detach(),
        bias.detach(),
        out,
        lse,
        seed,
        offset,
        p,
        [True] * 4,
    )
    got = STAND_INS["_scaled_dot_product_efficient_attention_backward"](backward, bargs, {}, fake_grads)
    want = torch.autograd.grad(expected, (q, k, v, bias), grad_out)
    for g, e in zip(got, want, strict=True):
        torch.testing.assert_close(g, e)


def test_flash_attention_dropout_returns_its_seed_and_offset_as_rng_state() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    CUDA_GENERATOR.manual_seed(11)
    CUDA_GENERATOR.set_offset(40)
    func = aten._scaled_dot_product_flash_attention.default
    fake = (
        *_outputs(func, ((1, 2, 4, 8), torch.float32), ((1, 2, 4), torch.float32)),
        *_outputs(func, ((0,), torch.int32), ((0,), torch.int32)),
        4,
        4,
        *_outputs(func, ((2,), torch.uint64), ((), torch.uint64), ((0,), torch.float32)),
    )
    outputs = STAND_INS["_scaled_dot_product_flash_attention"](func, (q, k, v, 0.5, True), {}, fake)
    assert outputs[6].to(torch.int64).tolist() == [11, 40]
    assert CUDA_GENERATOR.get_offset() == 40 + 1 * 2 * 32


def test_cudnn_attention_backward_with_a_mask_equals_autograd_of_torchs_attention() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 5, 8, requires_grad=True) for _ in range(3))
    mask = torch.randn(1, 1, 5, 5)
    grad_out = torch.randn(2, 4, 5, 8)
    expected = torch.autograd.grad(
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask), (q, k, v), grad_out
    )
    func = aten._scaled_dot_product_cudnn_attention_backward.default
    fake = _outputs(func, *[((2, 4, 5, 8), torch.float32)] * 3)
    seed, offset = torch.zeros((), dtype=torch.int64), torch.zeros((), dtype=torch.int64)
    out, lse = torch.zeros(2, 4, 5, 8), torch.zeros(2, 4, 5, 1)
    args = (
        grad_out,
        q.detach(),
        k.detach(),
        v.detach(),
        out,
        lse,
        seed,
        offset,
        mask,
        None,
        None,
        5,
        5,
        0.0,
        False,
    )
    got = STAND_INS["_scaled_dot_product_cudnn_attention_backward"](func, args, {}, fake)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)


def test_grouped_query_attention_backward_sums_the_shared_heads() -> None:
    """Flash attention with 4 query heads sharing 2 key/value heads: the key and value gradients
    are those of torch's own attention with enable_gqa (autograd on the CPU)."""
    torch.manual_seed(0)
    q = torch.randn(1, 4, 5, 8, requires_grad=True)
    k, v = (torch.randn(1, 2, 5, 8, requires_grad=True) for _ in range(2))
    grad_out = torch.randn(1, 4, 5, 8)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    expected = torch.autograd.grad(out, (q, k, v), grad_out)
    func = aten._scaled_dot_product_flash_attention_backward.default
    fake = _outputs(func, ((1, 4, 5, 8), torch.float32), *[((1, 2, 5, 8), torch.float32)] * 2)
    args = (
        grad_out,
        q.detach(),
        k.detach(),
        v.detach(),
        out.detach(),
        None,
        None,
        None,
        5,
        5,
        0.0,
        True,
        None,
        None,
    )
    got = STAND_INS["_scaled_dot_product_flash_attention_backward"](func, args, {}, fake)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
