"""The suite's tcx starter (tests/tcx_fork.py): a fork of a process that imported tcx prints what a
fresh `python -m tcx` prints, and anything it cannot serve starts a fresh Python."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import tcx_fork
from conftest import REPO, TRACE_FIXTURES

RECORDING = str(REPO / "fixtures" / "recordings" / "demo_explain.tcx.gz")
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}


def fresh(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tcx", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "args, env",
    [
        (["--help"], ENV),
        (["report", RECORDING], ENV),
        (["guards", RECORDING, "--format", "json"], ENV),
        (["check", RECORDING, "--max-graph-breaks", "1"], ENV),  # a failed check: exit 1
        (["explain", "/no/such/file.tcx"], ENV),  # bad input: its message and exit code
        (["nonsense"], ENV),  # click's usage error, with the program name it prints
        (["explain", RECORDING], {**ENV, "FORCE_COLOR": "1", "COLUMNS": "60"}),  # colour, width
        (["show", str(TRACE_FIXTURES / "tlparse-tests")], ENV),
    ],
)
def test_a_fork_prints_what_a_fresh_python_prints(args, env):
    server = tcx_fork._get()
    assert server is not None and server.serves(env, REPO), "the worker's fork server is not serving"
    forked = tcx_fork.run(args, env, REPO, 120)
    started = fresh(args, env)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        started.returncode,
        started.stdout,
        started.stderr,
    )
    assert forked.stdout or forked.stderr  # something was compared


def test_what_python_reads_at_start_up_or_another_folder_starts_a_fresh_python():
    server = tcx_fork._get()
    assert server is not None and server.serves(ENV, REPO)
    assert not server.serves({**ENV, "PYTHONPATH": "/elsewhere"}, REPO)
    assert not server.serves({**ENV, "LC_ALL": "C"}, REPO)
    assert not server.serves({k: v for k, v in ENV.items() if k != "PATH"} | {"PYTHONHASHSEED": "1"}, REPO)
    assert not server.serves(ENV, REPO / "tests")
    # a variable read when a command runs is the fork's own to set
    assert server.serves({**ENV, "TCX_WARM_DIR": "off", "FORCE_COLOR": "1"}, REPO)


def test_a_fork_past_its_timeout_is_killed_and_says_so(tmp_path):
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as info:
        tcx_fork.run(["record", "--save", str(tmp_path / "logs"), "--", "sleep", "30"], ENV, REPO, 2)
    assert time.monotonic() - started < 25
    assert info.value.cmd[:3] == [sys.executable, "-m", "tcx"]
