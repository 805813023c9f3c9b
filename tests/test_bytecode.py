"""`tcx bytecode`: original vs transformed code per compiled frame, decompiled, and the chain between them."""

from __future__ import annotations

import json

import pytest
from conftest import run_tcx

pytestmark = pytest.mark.torch


def test_data_dependent_if_chain_and_fallback(dynamo_recorded):
    run = dynamo_recorded("data_dependent_if.py")
    trace_dir = run.torch_trace
    doc = run.view("bytecode")
    assert doc["schema"] == "tcx.bytecode/1"
    frames = {f["compile_id"]: f for f in doc["frames"]}
    g = frames["0/0"]
    assert g["function"] == "g" and g["original"] and g["transformed"]
    # Every frame's transformed code comes back as text: depyf's Python, or annotated dis when it fails.
    assert all(f["transformed_source"] and f["decompiled_with"] in ("depyf", "dis") for f in doc["frames"])
    kinds = [c["kind"] for c in g["calls"]]
    assert kinds[0] == "graph" and "resume" in kinds
    resumed = {cid for c in g["calls"] if c["kind"] == "resume" for cid in c["compile_ids"]}
    resume_frames = {
        cid for cid, f in frames.items() if f["function"].startswith("torch_dynamo_resume_in_g_at_")
    }
    assert resumed == resume_frames and resume_frames
    assert all(frames[cid]["original_source"] for cid in resume_frames)
    # Offline: torch's *_BYTECODE artifacts give the same code — where this torch logs them (2.13 does,
    # for resume functions; 2.11 does not, and then the offline view must say why it is empty).
    logged = "_BYTECODE" in "".join(p.read_text() for p in trace_dir.glob("*.log"))
    offline = json.loads(run_tcx("bytecode", str(trace_dir), "--format", "json").stdout)
    if not logged:
        assert offline["frames"] == [] and offline["unavailable_reason"]
        return
    assert offline["frames"] and {f["compile_id"] for f in offline["frames"]} <= set(frames)
    for off in offline["frames"]:
        live = frames[off["compile_id"]]
        assert [r["opname"] for r in off["original"]] == [r["opname"] for r in live["original"]]
        assert [r["opname"] for r in off["transformed"]] == [r["opname"] for r in live["transformed"]]


def test_text_report_never_crashes_on_a_model(dynamo_recorded):
    proc = run_tcx("bytecode", str(dynamo_recorded("models/tiny_llama.py").recording), "--all")
    assert proc.returncode == 0, proc.stderr
    assert "transformed by Dynamo" in proc.stdout and "calls, in order" in proc.stdout
