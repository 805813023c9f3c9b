"""The suite's tcx starter (tests/tcx_fork.py): a fork of a process that imported tcx prints what a
fresh `python -m tcx` prints, and anything it cannot serve starts a fresh Python."""

from __future__ import annotations

import json
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


# ------------------------------------------------------------------ plain programs (torch imported once)

PROGRAM = """\
import json, os, sys
import torch

@torch.compile(backend="eager")
def f(x):
    x = x.sin()
    print("mid", x.sum().item())  # a graph break
    return x.cos()

for n in (4, 5, 6):  # a recompile (the size), then a dynamic entry
    f(torch.ones(n))
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "name": __name__, "file": __file__,
                  "cwd": os.getcwd(), "trace": os.environ.get("TORCH_TRACE")}))
"""
# How a program ends is Python's business, not torch's: a program that never imports it.
ENDINGS = """\
import sys
print(sys.argv, __name__)
if sys.argv[1] == "fail":
    raise ValueError("the program's own error")
sys.exit(int(sys.argv[1]))
"""


def _events(folder) -> tuple[list[tuple[str, object, object, object]], list[list[tuple[str, int, str]]]]:
    """torch's log: every event as (name, frame id, compile id, attempt) in order, but the table of
    file names (`str`); and each compile's stack (file, line, function) from the program's first frame
    on (a fork's starts with the server's own frames, below the program's)."""
    from conftest import torch_trace_records

    records = torch_trace_records(folder)
    names = {md["str"][1]: md["str"][0] for n, md, _ in records if n == "str"}
    stacks = []
    for n, md, _ in records:
        if n == "dynamo_start":
            frames = [(names[f["filename"]], f["line"], f["name"]) for f in md["dynamo_start"]["stack"]]
            first = next(i for i, f in enumerate(frames) if f[0].endswith("prog.py"))
            stacks.append(frames[first:])
    events = [
        (n, md.get("frame_id"), md.get("frame_compile_id"), md.get("attempt"))
        for n, md, _ in records
        if n != "str"
    ]
    return events, stacks


@pytest.mark.torch
def test_a_plain_program_forked_with_torch_imported_runs_as_a_fresh_python_runs_it(tmp_path):
    """sys.argv, sys.path's first entry, __main__, its folder, every event torch logs to TORCH_TRACE,
    in order, and the program's frames of each compile's stack."""
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    env = {**os.environ, "TORCH_TRACE": str(tmp_path / "forked")}
    server = tcx_fork._get("python")
    assert server is not None and server.serves(env, tmp_path), "the worker's torch server is not serving"
    forked = tcx_fork.run_python([str(program)], env, tmp_path, 300)
    env["TORCH_TRACE"] = str(tmp_path / "fresh")
    fresh = subprocess.run(
        [sys.executable, str(program)], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert forked.returncode == fresh.returncode == 0, forked.stderr[-3000:]
    assert forked.stdout.replace(str(tmp_path / "forked"), str(tmp_path / "fresh")) == fresh.stdout
    assert json.loads(forked.stdout.splitlines()[-1])["path0"] == str(tmp_path)
    events, stacks = _events(tmp_path / "forked")
    assert (events, stacks) == _events(tmp_path / "fresh")
    assert len(stacks) >= 4 and len(events) > 100  # f and its resume, each compiled again for the size


@pytest.mark.torch  # forked from the process that imported torch
@pytest.mark.parametrize("ending", ["0", "3", "fail"])
def test_a_forked_program_ends_as_in_a_fresh_python(tmp_path, ending):
    """Its exit status, and an uncaught exception's traceback: the program's frames only."""
    program = tmp_path / "ends.py"
    program.write_text(ENDINGS)
    forked = tcx_fork.run_python([str(program), ending], None, tmp_path, 60)
    fresh = subprocess.run(
        [sys.executable, str(program), ending], cwd=tmp_path, capture_output=True, text=True
    )
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert forked.returncode == {"3": 3, "fail": 1}.get(ending, 0)
    assert ("Traceback (most recent call last)" in forked.stderr) == (ending == "fail")


@pytest.mark.torch
def test_python_dash_c_forked_runs_as_a_fresh_python_runs_it(tmp_path):
    code = "import sys, torch; print(__name__, sys.argv, repr(sys.path[0]), torch.compile is not None)"
    forked = tcx_fork.run_python(["-c", code, "a"], None, tmp_path, 300)
    fresh = subprocess.run([sys.executable, "-c", code, "a"], cwd=tmp_path, capture_output=True, text=True)
    assert (forked.returncode, forked.stdout, forked.stderr) == (0, fresh.stdout, fresh.stderr)
    assert forked.stdout == "__main__ ['-c', 'a'] '' True\n"


@pytest.mark.torch  # starts the process that imports torch
def test_a_program_whose_environment_torch_reads_at_import_differs_starts_a_fresh_python():
    server = tcx_fork._get("python")
    assert server is not None and server.serves(ENV, REPO / "tests")
    assert server.serves({**ENV, "TORCH_TRACE": "/tmp/t"}, REPO)
    assert not server.serves({**ENV, "TORCH_LOGS": "+dynamo"}, REPO)
    assert not server.serves({**ENV, "TORCHINDUCTOR_CACHE_DIR": "/elsewhere"}, REPO)
    assert not server.serves({k: v for k, v in ENV.items() if k != "HOME"}, REPO)
