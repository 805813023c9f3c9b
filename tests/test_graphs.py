"""`tcx graphs`: AOT graphs, what the forward saves (bytes, input views) and what backward recomputes."""

from __future__ import annotations

import pytest
from conftest import run_tcx

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def seed_f(recorded):
    return recorded("seed_f").view("graphs")


def test_seed_f_saved_values_with_bytes_and_input_views(seed_f):
    assert seed_f["schema"] == "tcx.graphs/1"
    (comp,) = seed_f["compiles"]
    assert {"dynamo", "joint", "forward", "backward"} <= set(comp["graphs"])
    saved = {s["name"]: s for s in comp["saved"]}
    # the relu mask: 128x64 bools; the transposed inputs are views (0 extra bytes)
    mask = next(s for s in comp["saved"] if s["dtype"] == "b8")
    assert mask["shape"] == ["128", "64"] and mask["bytes"] == 128 * 64 and not mask["aliases_input"]
    views = [s for s in saved.values() if s["aliases_input"]]
    assert sorted(s["bytes"] for s in views) == [64 * 32 * 4, 32 * 128 * 4]
    assert all(s["extra_bytes"] == 0 for s in views)
    assert comp["saved_extra_bytes"] == 128 * 64
    assert comp["recomputed"] == []
    assert comp["verdict"].startswith("saves 3 tensors, 32 KiB, 24 KiB of them input views")


def test_text_view_and_recompute(tmp_path, request):
    # h recomputes its pointwise chain in backward (min-cut partitioner)
    prog = tmp_path / "h.py"
    prog.write_text(
        "import torch\n\n"
        "def h(x, w, b):\n"
        "    y = x @ w + b\n"
        "    z = torch.sin(y) * torch.sigmoid(y)\n"
        "    return torch.tanh(z) * y\n"
    )
    # the fast override (Inductor's decompositions and partitioner, no kernels), chosen explicitly
    backend = ("--backend", "aot_eager_decomp_partition")
    proc = run_tcx("graphs", f"{prog}:h", "--call", "128x32:grad,32x64:grad,64:grad", "--no-color", *backend)
    assert proc.returncode == 0, proc.stderr
    assert "recomputed in backward" in proc.stdout
    assert "partitioned backward graph" in proc.stdout
    header = " ".join(proc.stdout.split())
    assert "backend aot_eager_decomp_partition (chosen with --backend)" in header  # which backend and why
    assert "counts may differ from the program's own run" in header
