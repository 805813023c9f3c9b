"""The CUDA preview on a CPU-only machine: Triton kernels and a CUDA wrapper for f, forward and backward."""

from __future__ import annotations

import json

import pytest
from conftest import run_tcx

pytestmark = [pytest.mark.torch, pytest.mark.inductor]


@pytest.fixture(scope="module")
def preview(request, tmp_path_factory):
    pytest.importorskip("triton")
    saved = tmp_path_factory.mktemp("preview") / "f.tcx"
    proc = run_tcx(
        "codegen",
        f"{request.config.rootpath}/fixtures/programs/seed_f.py:f",
        "--call",
        "128x32:grad,32x64:grad,64:grad",
        "--target",
        "cuda:sm_90",
        "--ptx",
        "--format",
        "json",
        "--save",
        str(saved),
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), saved


def test_triton_kernels_and_cuda_wrapper_for_forward_and_backward(preview):
    doc, _ = preview
    assert doc["preview"] and doc["target"] == "cuda:sm_90" and doc["unavailable"] is None
    assert {k["graph"] for k in doc["kernels"]} == {"forward", "backward"}
    for k in doc["kernels"]:
        assert k["kind"] == "triton" and "@triton.jit" in k["source"]
        assert "cc=90" in k["source"]
        assert ".target sm_90" in k["ptx"]
    for w in doc["wrappers"]:
        assert w["device"] == "cuda preview sm_90"
        assert any("empty_strided_cuda" in s["text"] for s in w["steps"])
    assert any(k["category"] == "pointwise" for k in doc["kernels"])


def test_preview_is_labelled_and_rerenders(preview):
    _, saved = preview
    out = run_tcx("codegen", str(saved), "--target", "cuda:sm_90", "--no-color", "--width", "120").stdout
    assert "PREVIEW for sm_90" in out and "partition ran on the CPU" in out
    other = run_tcx("codegen", str(saved), "--target", "cuda:sm_80", "--no-color").stdout
    assert "not available" in other and "sm_90" in other
