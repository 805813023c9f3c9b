"""TORCH_TRACE logs through the views: recompiles and kernels per log agree with tlparse;
events this tcx does not know are kept and shown raw, never a crash."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import TRACE_FIXTURES, run_tcx, tool

from tcx.core.ingest.trace_log import load_trace
from tcx.core.model import build_model
from tcx.core.torchtext.output_code import count_kernels

INPUTS = TRACE_FIXTURES / "tlparse-tests" / "inputs"
LOGS = [
    "simple.log",
    "cache_hit_miss.log",
    "comp_metrics.log",
    "artifacts.log",
    "inductor_provenance_jit_cuda_log.txt",
    "multi_rank_logs/dedicated_log_torch_trace_rank_1.log",
]


def _tlparse_plain(log: Path, out: Path) -> tuple[int, int]:
    """(recompile_reasons artifacts, kernels in the output code files) as tlparse wrote them."""
    exe = tool("tlparse", "a dev dependency: pip install -e '.[dev]'")
    proc = subprocess.run(
        [
            exe,
            str(log),
            "-o",
            str(out),
            "--no-browser",
            "--overwrite",
            "--plain-text",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    directory = json.loads((out / "compile_directory.json").read_text())
    recompiles = kernels = 0
    for entry in directory.values():
        for art in entry["artifacts"]:
            if art["name"].startswith("recompile_reasons"):
                recompiles += 1
            if art["name"].startswith("inductor_output_code"):
                text = (out / art["url"]).read_text()
                kernels += len(re.findall(r"^\w+ = async_compile\.\w+\(", text, re.M))
    return recompiles, kernels


@pytest.mark.parametrize("name", LOGS)
def test_recompiles_and_kernels_match_tlparse(name, tmp_path):
    log = INPUTS / name
    recompiles, kernels = _tlparse_plain(log, tmp_path / "tl")
    model = build_model(load_trace(log), "trace")
    assert model.recompile_count == recompiles
    codes = [ev.payload or "" for ev in model.raw_trace_events() if ev.name == "inductor_output_code"]
    ours = sum(count_kernels(code) for code in codes)
    assert ours == kernels


def test_unknown_events_are_kept_and_shown_raw(tmp_path):
    lines = (INPUTS / "simple.log").read_text().splitlines(keepends=True)
    prefix = re.match(r"^\S+ \S+ +\d+ [^\]]*\] ", lines[0]).group(0)
    future = (
        prefix
        + json.dumps(
            {
                "tensor_lifetimes_v9": {"alive": 3},
                "frame_id": 0,
                "frame_compile_id": 0,
                "attempt": 0,
                "has_payload": "x",
            }
        )
        + "\n\tfuture payload\n"
    )
    log = tmp_path / "future.log"
    at = next(i for i, line in enumerate(lines) if i > 3 and not line.startswith("\t"))  # a record start
    log.write_text("".join(lines[:at]) + future + "".join(lines[at:]))
    doc = json.loads(run_tcx("show", str(log), "--format", "json").stdout)
    assert doc["unknown_events"] == {"tensor_lifetimes_v9": 1}
    assert (
        doc["graph_count"]
        == json.loads(run_tcx("show", str(INPUTS / "simple.log"), "--format", "json").stdout)["graph_count"]
    )
    listing = json.loads(run_tcx("show", str(log), "--events", "--format", "json").stdout)
    row = next(r for r in listing["events"] if r["event"] == "tensor_lifetimes_v9")
    assert row["known"] is False
    raw = json.loads(run_tcx("show", str(log), "--event", "tensor_lifetimes_v9", "--format", "json").stdout)
    assert raw["matches"][0]["payload"].strip() == "future payload"
    text = run_tcx("show", str(log), "--events").stdout
    assert "unknown to this tcx" in text
