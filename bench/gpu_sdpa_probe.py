"""Run on a GPU machine: the device's facts, torch's SDPA backend choices and composite graphs.

    python bench/gpu_sdpa_probe.py OUT_DIR

Writes OUT_DIR/probe.json: device properties (torch and Triton), the cuDNN version, the SDPA
priority order, `torch._fused_sdp_choice` for a grid of cases next to tcx's model of it, and the
aten graphs make_fx traces for eight cases next to tcx's composite. fixtures/gpu/h200_sdpa.json
holds what it recorded on the H200; tests/test_cuda_preview.py checks tcx's SDPA model against it.
"""

from __future__ import annotations

import itertools
import json
import sys
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from tcx.core.recorder.compat_fakecuda_sdpa import NAMES, Model, composite

GRAPH_CASES = [
    (torch.float32, 16, 12, "bool", False, False, False),
    (torch.float32, 16, 12, "float", False, False, True),
    (torch.float32, 16, 16, "none", True, True, False),
    (torch.float32, 16, 16, "none", True, False, False),
    (torch.bfloat16, 20, 16, "none", True, False, False),
    (torch.bfloat16, 64, 16, "none", False, True, True),
    (torch.bfloat16, 64, 16, "bool", False, False, False),
    (torch.float16, 128, 16, "none", True, False, True),
]


def facts() -> dict[str, Any]:
    import torch._inductor.utils as iu

    props = torch.cuda.get_device_properties(0)
    out: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "props": {k: str(getattr(props, k)) for k in dir(props) if not k.startswith("_")},
        "order_before": list(torch._C._get_sdp_priority_order()),
        "mem_get_info": [int(x) for x in torch.cuda.mem_get_info()],
    }
    try:
        from triton.runtime import driver

        out["triton_props"] = {k: str(v) for k, v in driver.active.utils.get_device_properties(0).items()}
    except Exception as exc:
        out["triton_props"] = repr(exc)
    for name in ("get_gpu_shared_memory", "is_big_gpu", "get_num_sms"):
        try:
            out[name] = str(getattr(iu, name)())
        except Exception as exc:
            out[name] = repr(exc)
    for key in ("cudagraph_support_input_mutation", "cudagraph_skip_dynamic_graphs", "cudagraph_trees"):
        out[key] = getattr(torch._inductor.config.triton, key, None)
    return out


def inputs(dtype: torch.dtype, d: int, s: int, mask: str, gqa: bool, grad: bool) -> tuple:
    def make(heads: int) -> torch.Tensor:
        return torch.randn(2, heads, s, d, device="cuda", dtype=dtype, requires_grad=grad)

    m = None
    if mask == "bool":
        m = torch.ones(2, 1, s, s, device="cuda", dtype=torch.bool).tril()
    elif mask == "float":
        m = torch.zeros(2, 1, s, s, device="cuda", dtype=dtype)
    return make(4), make(2 if gqa else 4), make(2 if gqa else 4), m


def choices() -> list[dict[str, Any]]:
    rows = []
    grid = itertools.product(
        (torch.float32, torch.bfloat16, torch.float16),
        (16, 20, 64, 128),
        (12, 16),
        ("none", "bool", "float"),
        (False, True),
        (False, True),
        (False, True),
    )
    for dtype, d, s, mask, causal, gqa, grad in grid:
        if causal and mask != "none":
            continue
        q, k, v, m = inputs(dtype, d, s, mask, gqa, grad)
        real = int(torch._fused_sdp_choice(q, k, v, m, 0.0, causal, scale=None, enable_gqa=gqa))
        model = Model(90, torch.backends.cudnn.version(), (q, k, v, m, 0.0, causal), {"enable_gqa": gqa})
        row = dict(dtype=str(dtype), d=d, S=s, mask=mask, causal=causal, gqa=gqa, grad=grad)
        rows.append({**row, "real": NAMES.get(real, real), "mine": NAMES[model.choose()[0]]})
    return rows


def graphs() -> list[dict[str, Any]]:
    out = []
    for dtype, d, s, mask, causal, gqa, grad in GRAPH_CASES:
        q, k, v, m = inputs(dtype, d, s, mask, gqa, grad)

        def theirs(q: Any, k: Any, v: Any, m: Any = m, causal: bool = causal, gqa: bool = gqa) -> Any:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal, enable_gqa=gqa)

        def ours(q: Any, k: Any, v: Any, m: Any = m, causal: bool = causal, gqa: bool = gqa) -> Any:
            model = Model(90, torch.backends.cudnn.version(), (q, k, v, m, 0.0, causal), {"enable_gqa": gqa})
            return composite(model.choose()[0], model)

        entry = {"case": f"{dtype} d={d} S={s} mask={mask} causal={causal} gqa={gqa} grad={grad}"}
        for name, fn in (("torch", theirs), ("tcx", ours)):
            try:
                entry[name] = make_fx(lambda q, k, v, fn=fn: fn(q, k, v))(q, k, v).code
            except Exception:
                entry[name] = "ERROR " + traceback.format_exc()[-1500:]
        entry["same"] = entry["torch"] == entry["tcx"]
        out.append(entry)
    return out


def main() -> None:
    out = Path(sys.argv[1])
    found = facts()
    rows = choices()
    found["order_after"] = list(torch._C._get_sdp_priority_order())
    found["sdpa_mismatches"] = sum(1 for r in rows if r["real"] != r["mine"])
    traced = graphs()
    (out / "probe.json").write_text(json.dumps({"facts": found, "sdpa": rows, "graphs": traced}, indent=1))
    print(json.dumps(found, indent=1)[:6000])
    print("sdpa mismatches", found["sdpa_mismatches"], "of", len(rows))
    print("composite graphs same:", [g["same"] for g in traced])


if __name__ == "__main__":
    main()
