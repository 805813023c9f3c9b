"""The CUDA preview's CPU values for what a CPU-only torch cannot run (core/recorder/
compat_fakecuda_values.py): the GPU's fused attention kernels, compared with torch's own CPU
attention, and the CUDA generator's 16-byte state. Plain CPU tensors; no preview process."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tcx.core.recorder.compat_fakecuda_values import STAND_INS, PreviewCudaGenerator

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
