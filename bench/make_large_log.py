"""Write a large TORCH_TRACE log (>= 45 MB by default): real programs compiled by Inductor.

Run with TORCH_TRACE=DIR set (bench.py does that, once; the log is kept under bench/results/).
Stages, in order, until the log in $TORCH_TRACE reaches `--min-mb` (each stage compiles anew):

1. a causal LM (tiny_llama's config, 8 layers) trained at eight sequence lengths, dynamic=False:
   every length recompiles the forward and the backward (Dynamo, AOT joint/forward/backward,
   post-grad and Inductor output code per compile);
2. the same model in inference with `output_attentions=True` (graph breaks in every layer);
3. a step with graph breaks of the user's own (a data-dependent branch, print, .item()),
   called at several batch sizes (recompiles);
4. wider models (hidden size doubling) trained at four lengths, until the size is reached.

Usage: TORCH_TRACE=DIR python bench/make_large_log.py [--backend inductor] [--min-mb 45]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures" / "programs" / "models"))
from tiny_llama import build

SEQ_LENS = (8, 16, 24, 32, 40, 48, 56, 64)


def log_mb() -> float:
    folder = Path(os.environ["TORCH_TRACE"])
    return sum(f.stat().st_size for f in folder.glob("*") if f.is_file()) / 2**20


def train(backend: str, layers: int, lens: tuple[int, ...], hidden: int | None = None) -> None:
    model = build(layers=layers).train()
    if hidden:
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(
            vocab_size=128,
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
        )
        model = LlamaForCausalLM(config).train()
    compiled = torch.compile(model, dynamic=False, backend=backend)
    for n in lens:
        ids = torch.randint(0, 128, (2, n))
        compiled(input_ids=ids, labels=ids).loss.backward()


def infer_with_attentions(backend: str, layers: int) -> None:
    model = build(layers=layers)
    compiled = torch.compile(model, dynamic=False, backend=backend)
    with torch.no_grad():
        for n in SEQ_LENS[:4]:
            compiled(input_ids=torch.randint(0, 128, (1, n)), output_attentions=True)


def user_breaks(backend: str) -> None:
    def step(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.gelu(x @ w + b)
        if y.sum() > 0:  # data-dependent branch
            y = y * 2
        print("step", y.shape)  # a side effect
        s = y.mean().item()  # a tensor value as a Python float
        return torch.layer_norm(y, y.shape[-1:]) + s

    compiled = torch.compile(step, backend=backend, dynamic=False)
    w = torch.randn(256, 256, requires_grad=True)
    b = torch.randn(256, requires_grad=True)
    for n in (64, 128, 192, 256, 320, 384):
        compiled(torch.randn(n, 256, requires_grad=True), w, b).sum().backward()


def stages(backend: str) -> Iterator[tuple[str, Callable[[], None]]]:
    yield "train 8 layers x 8 lengths", lambda: train(backend, 8, SEQ_LENS)
    yield "inference with output_attentions", lambda: infer_with_attentions(backend, 8)
    yield "user graph breaks", lambda: user_breaks(backend)
    hidden = 128
    while True:
        yield f"train hidden {hidden}", lambda h=hidden: train(backend, 4, SEQ_LENS[:4], hidden=h)
        hidden *= 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--min-mb", type=float, default=45.0, help="stop once the log is this large")
    args = parser.parse_args()
    if not os.environ.get("TORCH_TRACE"):
        parser.error("set TORCH_TRACE=DIR: the log is written there")
    torch._dynamo.config.recompile_limit = 64
    torch._dynamo.config.accumulated_recompile_limit = 4096
    for label, run in stages(args.backend):
        torch._dynamo.reset()
        torch.manual_seed(0)
        run()
        print(f"{label}: log {log_mb():.1f} MB", file=sys.stderr, flush=True)
        if log_mb() >= args.min_mb:
            break


if __name__ == "__main__":
    main()
