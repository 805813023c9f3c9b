"""TCX_WARM_DIR: a live run starts as a fork of a process that imported torch once, and is the same
run a cold start makes — its counts, its folder and environment, its output and exit status, a
signal that ends it, a timeout that stops it.

The tests share one warm folder of their own (not the session's): its first two runs start cold
(the first leaves a mark, the second starts the warm process), later ones fork. Which process a
run's program ran under is the program's own observation: its parent's command line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, read_torch_trace

pytestmark = [pytest.mark.torch]

PROBE = """\
import json, os, sys
import torch

parent = open(f"/proc/{os.getppid()}/cmdline", "rb").read().split(b"\\0")
with open(sys.argv[1], "w") as out:
    json.dump({"parent": [p.decode() for p in parent if p], "cwd": os.getcwd(),
               "columns": os.environ.get("COLUMNS"), "argv": sys.argv[1:]}, out)

@torch.compile(backend="eager")
def f(x):
    x = x.sin()
    print("between graphs")
    return x.cos()

f(torch.ones(3))
if len(sys.argv) > 2 and sys.argv[2] == "exit":
    sys.exit(3)
if len(sys.argv) > 2 and sys.argv[2] == "segfault":
    import ctypes
    ctypes.string_at(0)
if len(sys.argv) > 2 and sys.argv[2] == "hang":
    import time
    time.sleep(600)
"""


class Warm:
    """tcx with its own warm folder; `run` returns the finished process and what the program saw."""

    def __init__(self, folder: Path, program: Path) -> None:
        self.folder, self.program = folder, program

    def run(self, *args: str, mode: str = "", cwd: Path | None = None, columns: str = "120", **env: str):
        seen = self.folder.parent / f"seen-{time.monotonic_ns()}.json"
        env = {**os.environ, "TCX_WARM_DIR": str(self.folder), "NO_COLOR": "1", "COLUMNS": columns, **env}
        proc = subprocess.run(
            [sys.executable, "-m", "tcx", *args, str(self.program), "--no-save", "--", str(seen), mode],
            cwd=cwd or REPO,
            env={**env, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        return proc, (json.loads(seen.read_text()) if seen.exists() else None)


def forked(seen: dict) -> bool:
    return any(part.endswith("warm_boot.py") for part in seen["parent"])


@dataclass
class Warmed:
    """A warm folder after its first three runs (made once per test process: each xdist worker has
    its own), and those runs."""

    tcx: Warm
    runs: list


@pytest.fixture(scope="module")
def warmed(tmp_path_factory) -> Iterator[Warmed]:
    base = tmp_path_factory.mktemp("warm")
    folder = base / "warm"
    folder.mkdir(mode=0o700)
    program = base / "probe.py"
    program.write_text(PROBE)
    tcx = Warm(folder, program)
    yield Warmed(tcx, [tcx.run("explain", "--backend", "eager", "--format", "json") for _ in range(3)])
    shutil.rmtree(folder, ignore_errors=True)  # its warm process exits when its socket is gone


@pytest.fixture
def warm(warmed: Warmed) -> Warm:
    return warmed.tcx


def test_the_third_run_forks_and_counts_as_the_cold_runs(warmed: Warmed) -> None:
    runs = warmed.runs
    for proc, _ in runs:
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert [forked(seen) for _, seen in runs] == [False, False, True]
    docs = [json.loads(proc.stdout) for proc, _ in runs]
    keys = ("graph_count", "graph_break_count", "compile_count", "recompile_count")
    assert (
        {k: docs[2][k] for k in keys}
        == {k: docs[0][k] for k in keys}
        == {
            "graph_count": 2,
            "graph_break_count": 1,
            "compile_count": 2,
            "recompile_count": 0,
        }
    )
    assert [b["user_stack"][-1]["line"] for b in docs[2]["graph_breaks"]] == [
        b["user_stack"][-1]["line"] for b in docs[0]["graph_breaks"]
    ]
    assert len(list(warmed.tcx.folder.glob("*.sock"))) == 1


def test_the_fork_runs_in_the_runs_folder_with_its_environment(warm: Warm, tmp_path: Path) -> None:
    proc, seen = warm.run("explain", "--backend", "eager", cwd=tmp_path, columns="97")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # a different terminal width is the same environment at import: still a fork
    assert forked(seen) and seen["cwd"] == str(tmp_path) and seen["columns"] == "97"


def test_the_fork_writes_torchs_own_log_where_the_runs_torch_trace_says(warm: Warm, tmp_path: Path) -> None:
    """torch reads TORCH_TRACE once, at import: the fork has it read its run's folder again."""
    for name in ("a", "b"):
        proc, seen = warm.run(
            "explain", "--backend", "eager", "--format", "json", TORCH_TRACE=str(tmp_path / name)
        )
        assert forked(seen) and proc.returncode == 0, proc.stderr[-3000:]
        torch_log = read_torch_trace(tmp_path / name)
        doc = json.loads(proc.stdout)
        assert (
            (torch_log.graphs, torch_log.graph_breaks)
            == (doc["graph_count"], doc["graph_break_count"])
            == (2, 1)
        )
    assert not list(warm.folder.parent.glob("*.log"))  # nothing written where no run asked


def test_an_exit_status_and_a_signal_come_through_the_fork(warm: Warm) -> None:
    exited, seen = warm.run("explain", "--backend", "eager", "--format", "json", mode="exit")
    assert forked(seen) and exited.returncode == 3, exited.stderr[-3000:]
    assert json.loads(exited.stdout)["program"] == {
        **json.loads(exited.stdout)["program"],
        "status": "exit",
        "exit_code": 3,
    }
    crashed, seen = warm.run("explain", "--backend", "eager", "--format", "json", mode="segfault")
    assert forked(seen) and crashed.returncode == 3, crashed.stderr[-3000:]
    assert json.loads(crashed.stdout)["program"]["status"] == "crashed"
    assert json.loads(crashed.stdout)["program"]["signal"] == "SIGSEGV"


def test_a_timeout_stops_the_forked_program(warm: Warm) -> None:
    proc, seen = warm.run("explain", "--backend", "eager", "--timeout", "12", "--format", "json", mode="hang")
    assert forked(seen) and proc.returncode == 3, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["program"]["status"] == "timeout"


def test_a_folder_others_may_write_to_is_not_used(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    program = tmp_path / "probe.py"
    program.write_text(PROBE)
    proc, seen = Warm(folder, program).run("explain", "--backend", "eager")
    assert proc.returncode == 0 and not forked(seen), proc.stderr[-3000:]
    assert list(folder.iterdir()) == []  # not even the mark a first run leaves
