"""The program behind tiny.tcx: one graph break (a print) and one recompile (a dtype change).

Recorded with every capture:
`tcx report tests/data/recordings/tiny.py --save tests/data/recordings/tiny.tcx.gz`.
"""

import torch


@torch.compile
def step(x):
    y = x.sin() + 1
    print("step")
    return y.cos() * 2


step(torch.randn(4))
step(torch.randn(4, dtype=torch.float64))
