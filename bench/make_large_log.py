"""Write a large TORCH_TRACE log: a 4-layer causal LM trained at eight sequence lengths, dynamic=False.

Every sequence length recompiles the forward and backward, so the log holds dozens of
Dynamo, AOT joint/forward/backward and Inductor graphs: the kind of log a real job writes.
Run with TORCH_TRACE=DIR set (bench.py does that); tens of MB on torch 2.13.
"""

from __future__ import annotations

import sys

import torch

sys.path.insert(0, "fixtures/programs/models")
from tiny_llama import build

SEQ_LENS = (8, 16, 24, 32, 40, 48, 56, 64)


def main() -> None:
    torch._dynamo.config.recompile_limit = 64
    model = build(layers=4).train()
    compiled = torch.compile(model, dynamic=False, backend=sys.argv[1] if len(sys.argv) > 1 else "inductor")
    for n in SEQ_LENS:
        ids = torch.randint(0, 128, (2, n))
        out = compiled(input_ids=ids, labels=ids)
        out.loss.backward()


if __name__ == "__main__":
    main()
