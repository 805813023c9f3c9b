"""The CUDA preview on a CPU-only machine: the program runs on fake CUDA tensors, so Dynamo,
AOTAutograd and Inductor take the GPU's decisions (checked against a real H200 in bench/)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import PROGRAMS, REPO, module, run_tcx, shared_run

pytestmark = [pytest.mark.torch, pytest.mark.inductor]


@pytest.fixture
def preview():
    """seed_f previewed for sm_90 once per session (`shared_run`, whichever xdist worker asks first)."""
    module("triton")
    run = shared_run(
        "codegen",
        str(PROGRAMS / "seed_f.py") + ":f",
        "--call",
        "128x32:grad,32x64:grad,64:grad",
        "--target",
        "cuda:sm_90",
        "--ptx",
        "--format",
        "json",
        save=True,
        env={"CUDA_VISIBLE_DEVICES": ""},  # no GPU, as every preview the suite makes
    ).ok()
    return run.json(), run.recording


def test_triton_kernels_and_cuda_wrapper_for_forward_and_backward(preview):
    doc, _ = preview
    assert doc["preview"] and doc["device"] == "cuda:sm_90" and doc["unavailable"] is None
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
    assert "PREVIEW for sm_90" in out and "program ran on fake CUDA tensors" in out
    assert "132 SMs" in out and "a preview cannot know" in out
    other = run_tcx("codegen", str(saved), "--target", "cuda:sm_80", "--no-color").stdout
    assert "not available" in other and "sm_90" in other


def _preview(*args: str) -> dict:
    module("triton")
    proc = run_tcx(*args, "--target", "cuda:sm_90", "--format", "json", env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_adamw_foreach_step_becomes_combo_kernels_as_on_the_gpu():
    """The optimizer sees CUDA parameters (capturable, CUDA step counters): Inductor groups the
    per-parameter updates into foreach combo kernels, as it did on the H200."""
    doc = _preview("codegen", str(PROGRAMS / "gpu" / "adamw_foreach.py"))
    assert [k["name"] for k in doc["kernels"]] == ["triton_for_fused_0", "triton_for_fused_1"]


def test_bert_attention_is_memory_efficient_sdpa_with_a_padded_mask():
    doc = _preview("codegen", str(PROGRAMS / "gpu" / "bert.py"))
    names = [k["name"] for k in doc["kernels"]]
    attention = [n for n in names if "_scaled_dot_product_efficient_attention" in n]
    assert attention and "constant_pad_nd" in attention[0] and "where" in attention[0], names
    assert not any("flash_attention_for_cpu" in n for n in names)
    sdpa = [d for d in doc["preview_notes"]["decisions"] if d["decision"] == "sdpa"]
    assert sdpa and sdpa[0]["assumed"] == "efficient" and "flash" in sdpa[0]["details"]["refused"]


def test_max_autotune_names_what_only_a_gpu_can_decide():
    doc = _preview("codegen", str(PROGRAMS / "gpu" / "max_autotune.py"))
    (decision,) = [d for d in doc["preview_notes"]["decisions"] if d["decision"] == "autotune"]
    assert decision["compile_id"] == "0/0" and decision["assumed"] == "mm"
    assert "candidates" in decision["what"] and "GPU" in decision["why"]
    assert any("runtime choices" in line for line in doc["preview_notes"]["cannot_know"])


def test_sdpa_model_matches_torch_on_an_h200():
    """tcx's stand-in for torch's C++ SDPA selection and composite, on fake CUDA tensors here,
    against what torch 2.11 did on a real H200 (fixtures/gpu/h200_sdpa.json)."""
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "sdpa_preview_check.py"),
            str(REPO / "fixtures/gpu/h200_sdpa.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["choices"] == 384 and result["wrong"] == []
    assert [g["same"] for g in result["graphs"]] == [True] * 8, [g["tcx"] for g in result["graphs"]]


def test_cudagraphs_preview_decides_compile_time_reasons_and_marks_runtime_ones():
    doc = _preview("cudagraphs", str(PROGRAMS / "gpu" / "cudagraphs.py"))
    graphs = {g["compile_id"]: g for g in doc["graphs"]}
    reasons = {cid: {r["category"]: r for r in g["reasons"]} for cid, g in graphs.items()}
    assert graphs["0/0"]["status"] == "wrapped"  # `clean`: recorded on the GPU, later
    mutated = reasons["1/0"]["mutated inputs"]
    assert mutated["needs_gpu"] and mutated["user_line"]["code"] == "x.add_(1)"
    cpu = reasons["2/0"]["CPU tensors"]
    assert not cpu["needs_gpu"] and cpu["user_line"]["line"] == 31
    assert "nonzero" in reasons["4/0"]["incompatible ops"]["text"]


def test_cudagraphs_view_of_a_real_h200_run():
    """The same program on the H200 (fixtures/gpu: its cudagraph events, kept from bench/gpu_compare.py):
    what the trees captured, the run-time mutation skip with its line, and the CPU partition."""
    proc = run_tcx("cudagraphs", str(REPO / "fixtures/gpu/h200_cudagraphs_real.tcx"), "--format", "json")
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "tcx.cudagraphs/1" and not doc["preview"]
    status = {g["compile_id"]: g["status"] for g in doc["graphs"]}
    assert status == {
        "0/0": "captured",
        "1/0": "skipped",
        "2/0": "captured",
        "3/0": "wrapped",
        "4/0": "partly",
    }
    (mutation,) = doc["graphs"][1]["reasons"]
    assert mutation["category"] == "mutated inputs" and mutation["decided"] == "runtime"
    assert mutation["text"].startswith("mutated inputs (1 instances)") and mutation["user_line"]["line"] == 25
    assert doc["captured_count"] == 2
