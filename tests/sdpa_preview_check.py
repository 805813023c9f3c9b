"""Run by tests/test_cuda_preview.py in a fresh interpreter (the CUDA stand-in loads before torch):
tcx's SDPA model on fake CUDA tensors, against what torch did on a real H200.

    python tests/sdpa_preview_check.py fixtures/gpu/h200_sdpa.json   -> JSON on stdout
"""

from __future__ import annotations

import json
import sys

from tcx.core.recorder import compat_fakecuda_shim

compat_fakecuda_shim.preload(["cuda_preview=sm_90"])

import torch  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from tcx.core.recorder.compat_fakecuda import enter_fake_device  # noqa: E402
from tcx.core.recorder.compat_fakecuda_sdpa import NAMES, Model, composite  # noqa: E402


def tensors(case: dict, dtype: torch.dtype) -> tuple:
    d, s, grad = (
        case.get("head_dim", case.get("d")),
        case.get("seq", case.get("S")),
        case.get("requires_grad", case.get("grad")),
    )
    heads_kv = 2 if case.get("enable_gqa", case.get("gqa")) else 4
    q = torch.randn(2, 4, s, d, device="cuda", dtype=dtype, requires_grad=grad)
    k = torch.randn(2, heads_kv, s, d, device="cuda", dtype=dtype, requires_grad=grad)
    v = torch.randn(2, heads_kv, s, d, device="cuda", dtype=dtype, requires_grad=grad)
    mask = {
        "bool": lambda: torch.ones(2, 1, s, s, device="cuda", dtype=torch.bool).tril(),
        "float": lambda: torch.zeros(2, 1, s, s, device="cuda", dtype=dtype),
    }.get(case["mask"], lambda: None)()
    return q, k, v, mask


def lines(code: str) -> list[str]:
    out = []
    for line in code.splitlines():
        line = line.strip()
        if not line or line.startswith("def forward") or "= self._tensor_constant0" in line:
            continue
        out.append(line.replace("_tensor_constant0", "mask_1"))
    return out


def _composite_of(case: dict, cudnn: int, with_mask: bool):
    def run(q, k, v, mask):
        model = Model(90, cudnn, (q, k, v, mask, 0.0, case["is_causal"]), {"enable_gqa": case["enable_gqa"]})
        return composite(model.choose()[0], model)

    if with_mask:
        return run
    return lambda q, k, v: run(q, k, v, None)


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        data = json.load(fh)
    lib, why = compat_fakecuda_shim.library()
    assert lib is not None, why
    enter_fake_device(90, lib)
    torch.autograd.set_multithreading_enabled(False)
    cudnn = data["cudnn"]
    wrong = []
    with FakeTensorMode():
        for row in data["choices"]:
            q, k, v, mask = tensors(row, getattr(torch, row["dtype"]))
            mine = NAMES[
                Model(90, cudnn, (q, k, v, mask, 0.0, row["causal"]), {"enable_gqa": row["gqa"]}).choose()[0]
            ]
            if mine != row["real"]:
                wrong.append({**row, "tcx": mine})
    graphs = []
    for case in data["graphs"]:
        with FakeTensorMode():
            q, k, v, mask = tensors(case, getattr(torch, case["dtype"]))

        code = make_fx(_composite_of(case, cudnn, mask is not None), tracing_mode="fake")(
            *((q, k, v) if mask is None else (q, k, v, mask))
        ).code
        graphs.append({"same": lines(code) == lines(case["torch_graph"]), "tcx": code})
    print(json.dumps({"choices": len(data["choices"]), "wrong": wrong, "graphs": graphs}))


if __name__ == "__main__":
    main()
