"""`tcx guards`: each cache entry's guards, counted as torch counts them in the same run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import compile_id, run_tcx, torch_trace_records

pytestmark = pytest.mark.torch


def guards_json(target: str, tmp_path: Path, *extra: str) -> tuple[dict, dict[str, int | None], Path]:
    trace_dir = tmp_path / "torch_trace"
    proc = run_tcx("guards", target, "--format", "json", *extra, env={"TORCH_TRACE": str(trace_dir)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), torch_guard_counts(trace_dir), trace_dir


def torch_guard_counts(directory: Path) -> dict[str, int | None]:
    """compile id -> guard_count from torch's own compilation_metrics events."""
    return {
        compile_id(md): md[name].get("guard_count")
        for name, md, _ in torch_trace_records(directory)
        if name == "compilation_metrics"
    }


def _entry(doc: dict, compile_id: str) -> dict:
    return next(e for e in doc["entries"] if e["compile_id"] == compile_id)


def test_seed_f_shape_guard_then_relation(program, tmp_path):
    doc, _, trace_dir = guards_json(
        f"{program('seed_f.py')}:f", tmp_path, "--call", "128x32,32x64,64", "--call", "256x32,32x64,64"
    )
    assert doc["schema"] == "tcx.guards/1"
    static = _entry(doc, "0/0")
    x = next(g for g in static["groups"] if g["category"] == "input tensor" and g["subject"] == "x")
    assert "size=[128, 32]" in x["summary"]
    dynamic = _entry(doc, "0/1")
    shapes = next(g for g in dynamic["groups"] if g["category"] == "symbolic shapes")
    relation = next(g for g in shapes["guards"] if any("64" in t for t in g["text"]))
    assert relation["line"] == 12 and relation["code"] == "if x.shape[0] > 64:"
    assert any("> 64" in r for r in dynamic["shape_relations"])
    # The same run's TORCH_TRACE log: guards come from torch's guard tree.
    offline = json.loads(run_tcx("guards", str(trace_dir), "--format", "json").stdout)
    tree = _entry(offline, "0/1")
    assert tree["counted_as"] == "guard tree leaves"
    assert any(
        "64" in t and g["line"] == 12 for g in tree["guards"] for t in g["text"] if g["kind"] == "SHAPE_ENV"
    )


@pytest.mark.parametrize(
    "name", ["seed_f.py", "data_dependent_if.py", "nested_break.py", "models/tiny_llama.py"]
)
def test_guard_counts_equal_torch_metrics(name, dynamo_recorded):
    run = dynamo_recorded(name)
    doc, counts = run.view("guards"), torch_guard_counts(run.torch_trace)
    assert doc["entries"]
    for entry in doc["entries"]:
        assert entry["guard_count"] == counts[entry["compile_id"]], entry["compile_id"]
        assert entry["torch_guard_count"] == counts[entry["compile_id"]]
        assert entry["guard_count"] == sum(len(g["guards"]) for g in entry["groups"])


def test_text_report(program):
    proc = run_tcx(
        "guards", f"{program('seed_f.py')}:f", "--call", "256x32,32x64,64", "--call", "32x32,32x64,64"
    )
    assert proc.returncode == 0, proc.stderr
    assert "entry 0/0" in proc.stdout and "input tensor" in proc.stdout and "seed_f.py:11" in proc.stdout
