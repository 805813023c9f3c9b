"""Multi-rank input: a per-rank summary and the first divergence, from logs and from torchrun."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import PROGRAMS, TRACE_FIXTURES, read_torch_trace, run_tcx

from tcx.core.ingest.trace_log import load_trace
from tcx.core.model import build_model
from tcx.core.model.ranks import rank_models
from tcx.core.views.ranks import multi_rank_report

MULTI = TRACE_FIXTURES / "tlparse-tests" / "inputs" / "multi_rank_logs"


def test_each_rank_counts_like_its_own_log():
    """Each rank's row against that rank's log, read by the tests' own tiny parser (conftest.py)."""
    summaries, _ = multi_rank_report(build_model(load_trace(MULTI), "trace"))
    assert [s.rank for s in summaries] == [0, 1, 2, 3]
    for s in summaries:
        torch_log = read_torch_trace(MULTI / f"dedicated_log_torch_trace_rank_{s.rank}.log")
        assert s.compiles == len(torch_log.compile_ids)
        assert s.graphs == torch_log.graphs
        assert s.recompiles == torch_log.recompiles


def test_compile_ids_do_not_collide_across_ranks():
    model = build_model(load_trace(MULTI), "trace")
    per_rank = rank_models(model)
    assert len(model.compiles) == sum(len(m.compiles) for m in per_rank.values())
    assert all(cid.startswith("rank") for cid in model.compiles)


def test_first_divergence_names_the_ranks_on_each_side():
    _, div = multi_rank_report(build_model(load_trace(MULTI), "trace"))
    assert div is not None and div.compile_id == "0/0"
    assert sorted(g["ranks"] for g in div.groups) == [[0, 2], [1, 3]]
    assert "different functions compiled" in div.cause


def test_check_fails_on_rank_divergence():
    proc = run_tcx("check", str(MULTI), "--max-rank-divergence", "0", "--format", "json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["divergence"]["compile_id"] == "0/0"
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3]


def test_single_rank_log_has_no_rank_keys():
    doc = json.loads(
        run_tcx("show", str(MULTI / "dedicated_log_torch_trace_rank_1.log"), "--format", "json").stdout
    )
    assert "ranks" not in doc and "divergence" not in doc


@pytest.mark.torch
def test_torchrun_job_where_one_rank_recompiles(tmp_path):
    saved = tmp_path / "logs"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        str(PROGRAMS / "distributed" / "diverge.py"),
    ]
    proc = run_tcx("record", "--save", str(saved), "--format", "json", "--", *cmd)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert [r["recompiles"] for r in doc["ranks"]] == [0, 1]
    div = doc["divergence"]
    assert div["compile_id"] == "0/1"
    assert "size mismatch" in div["cause"] and "expected 8, actual 16" in div["cause"]
    groups = {tuple(g["ranks"]): g["facts"] for g in div["groups"]}
    assert groups[(0,)]["compiled"] is False and groups[(1,)]["compiled"] is True
    check = run_tcx("check", str(saved), "--max-rank-divergence", "0")
    assert check.returncode == 1
    assert "ranks diverge" in check.stdout
