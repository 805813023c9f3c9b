"""`tcx codegen`: kernels, extern calls, the annotated wrapper and lifetimes from real Inductor runs.

kernel_count is checked against the kernels in torch's own output code (its TORCH_TRACE log of
the same run), never against hard-coded numbers.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_tcx
from pipeline_helpers import torch_kernel_count

pytestmark = [pytest.mark.torch, pytest.mark.inductor]


@pytest.fixture(scope="module")
def seed_f(recorded):
    run = recorded("seed_f")
    return run.view("codegen"), run.torch_trace, run.recording


def test_seed_f_kernels_extern_and_reuse(seed_f):
    doc, trace, _ = seed_f
    assert doc["schema"] == "tcx.codegen/1"
    assert doc["kernel_count"] == torch_kernel_count(trace) == len(doc["kernels"])
    graphs = {k["graph"] for k in doc["kernels"]}
    assert graphs == {"forward", "backward"}
    fw = next(k for k in doc["kernels"] if k["graph"] == "forward")
    assert fw["kind"] == "cpp" and "relu" in fw["fused_ops"]
    assert any(line["line"] == 13 for line in fw["origins"]["user_lines"])  # return torch.relu(y)
    externs = {e["name"] for e in doc["extern_calls"]}
    assert externs & {"extern_kernels.addmm", "extern_kernels.mm"}
    fw_wrapper = next(w for w in doc["wrappers"] if w["graph"] == "forward")
    assert fw_wrapper["reuse_count"] >= 1
    reuse = next(s for s in fw_wrapper["steps"] if s["kind"] == "reuse")
    assert reuse["text"].startswith("buf1 = buf0")
    assert any(s["kind"] == "del" for s in fw_wrapper["steps"])
    assert fw_wrapper["returns"]
    rows = {r["name"]: r for r in fw_wrapper["lifetimes"]}
    assert rows["buf0"]["end"] == "reused" and rows["buf1"]["storage"] == "buf0"


def test_saved_recording_renders_without_running(seed_f):
    _, _, saved = seed_f
    proc = run_tcx("codegen", str(saved), "--no-color", "--width", "120")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "wrapper call(), annotated" in out
    assert "buf1 = buf0; del buf0  # reuse" in out
    assert "buffer lifetimes" in out and "extern_kernels." in out
    one = run_tcx("codegen", str(saved), "--kernel", "cpp_fused_relu", "--format", "json")
    assert [k["name"] for k in json.loads(one.stdout)["kernels"]] == ["cpp_fused_relu_threshold_backward_0"]
    bw = json.loads(run_tcx("codegen", str(saved), "--graph", "backward", "--format", "json").stdout)
    assert {w["graph"] for w in bw["wrappers"]} == {"backward"}


@pytest.mark.parametrize("name", ["train_step", "tiny_llama"])
def test_kernel_count_matches_torch_output_code(name, recorded):
    run = recorded(name)
    doc = run.view("codegen")
    expected = torch_kernel_count(run.torch_trace)
    assert expected > 0
    assert doc["kernel_count"] == expected
    if name == "train_step":
        assert {w["graph"] for w in doc["wrappers"]} == {"forward", "backward"}
