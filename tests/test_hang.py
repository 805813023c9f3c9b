"""A hung multi-rank job (gloo on the CPU): rank 0 waits in an all_reduce rank 1 never reaches.

Stopped by tcx's own timeout or by SIGTERM from outside (a CI timeout), tcx stops every rank,
keeps every rank's log, and reports that the job was hung, where each rank stopped logging,
and the divergence that explains it. (The NCCL version of this needs two GPUs; CI has none.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import PROGRAMS, REPO, run_tcx

pytestmark = pytest.mark.torch


def _program(tmp_path: Path) -> Path:
    """A copy of the hang program under a unique name, to find its processes afterwards."""
    copy = tmp_path / f"hang_{uuid.uuid4().hex[:8]}.py"
    shutil.copy(PROGRAMS / "distributed" / "hang.py", copy)
    return copy


def _torchrun(program: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        str(program),
    ]


def _running(program: Path) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if str(program) in line]


def _check_report(doc: dict, logs: Path, stopped_by: str) -> None:
    hang = doc["hang"]
    assert hang["hung"] is True and stopped_by in hang["stopped_by"]
    last = {r["rank"]: r for r in hang["last_events"]}
    # rank 0 stopped logging after its only compile; rank 1 after the recompile rank 0 never did
    assert last[0]["compile_id"] == "0/0" and last[0]["finished"]
    assert last[1]["compile_id"] == "0/1" and last[1]["finished"]
    assert "ranks [0] after compile 0/0; ranks [1] after compile 0/1" in hang["summary"]
    assert hang["divergence"]["compile_id"] == "0/1"
    assert "size mismatch" in hang["divergence"]["cause"]
    assert sorted(p.name.split("_rank_")[1][0] for p in logs.iterdir()) == ["0", "1"]  # every rank's log
    check = run_tcx("check", str(logs), "--max-rank-divergence", "0")
    assert check.returncode == 1, check.stdout + check.stderr


def test_timeout_stops_every_rank_and_says_where_each_was(tmp_path):
    program, logs = _program(tmp_path), tmp_path / "logs"
    proc = run_tcx(
        "record",
        "--timeout",
        "25",
        "--save",
        str(logs),
        "--format",
        "json",
        "--",
        *_torchrun(program),
        timeout=180,
    )
    assert proc.returncode == 3, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["program"]["status"] == "timeout"
    _check_report(doc, logs, "timeout")
    assert _running(program) == []


def test_sigterm_from_outside_stops_every_rank_and_keeps_the_logs(tmp_path):
    program, logs = _program(tmp_path), tmp_path / "logs"
    out = tmp_path / "out.json"
    with open(out, "w") as fh:
        tcx = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tcx",
                "record",
                "--save",
                str(logs),
                "--format",
                "json",
                "--",
                *_torchrun(program),
            ],
            cwd=REPO,
            env={**os.environ, "NO_COLOR": "1"},
            stdout=fh,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "never reaches" not in _stderr_so_far(tcx):
            time.sleep(0.5)
        time.sleep(3)  # rank 0 is in the all_reduce by now
        tcx.send_signal(signal.SIGTERM)
        _, err = tcx.communicate(timeout=120)
    assert tcx.returncode == 128 + signal.SIGTERM, err  # docs/exit-codes.md: 143, stopped by SIGTERM
    doc = json.loads(out.read_text())
    assert doc["program"]["status"] == "interrupted"
    _check_report(doc, logs, "SIGTERM")
    assert _running(program) == []


_SEEN: dict[int, str] = {}


def _stderr_so_far(proc: subprocess.Popen) -> str:
    """What the job printed so far (read without blocking)."""
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    text = _SEEN.get(proc.pid, "")
    while sel.select(timeout=0):
        chunk = os.read(proc.stderr.fileno(), 65536).decode(errors="replace")
        if not chunk:
            break
        text += chunk
    _SEEN[proc.pid] = text
    return text
