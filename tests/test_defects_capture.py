"""Issue 12, the recorder side: a gate never passes a program it did not observe.

Logging reconfigured by the program, capture lost anyway, an unknown function, compiles in
child processes, the exit status of a raising program, and text that is not valid UTF-8.
Every test runs tcx as a user does, on a real torch.compile run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tcx_fork
from conftest import PROGRAMS, run_tcx, torch_trace_records

pytestmark = pytest.mark.torch


def _json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


# --- 1. logging reconfigured by the program ----------------------------------------------------


def test_program_that_reconfigures_logging_keeps_every_trace_event(program):
    target = program("broken/logging_reconfigured.py")
    doc = _json(run_tcx("explain", target, "--format", "json"))
    assert doc["program"]["status"] == "ok"
    # One print() in step: a break, the graph before it and the resume function's graph.
    assert (doc["graph_break_count"], doc["graph_count"]) == (1, 2)
    check = run_tcx("check", target, "--max-graph-breaks", "0")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "check failed: graph breaks 1 > 0" in check.stdout


def test_in_process_recorder_keeps_capture_through_dict_config():
    """The pytest plugin's recorder pins the same handler, and gives torch's logger back after."""
    code = """
import logging, logging.config, torch
from torch._logging._internal import trace_log
from tcx.core.recorder.inprocess import InProcessRecorder
from tcx.core.model import build_model
before = (type(trace_log), list(trace_log.handlers), trace_log.propagate)
with InProcessRecorder() as rec:
    logging.config.dictConfig({"version": 1, "loggers": {"torch": {"level": "ERROR"}}})
    logging.config.dictConfig({"version": 1})
    def f(x):
        x = x + 1
        print("break")
        return x * 2
    torch.compile(f, backend="eager")(torch.ones(2))
print(len(build_model(rec.recording()).graph_breaks))
print(type(trace_log) is before[0], list(trace_log.handlers) == before[1], trace_log.propagate is before[2])
"""
    proc = tcx_fork.run_python(["-c", code])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[-3:] == ["1", "True True True", ""], proc.stdout


def test_lost_capture_is_an_error_never_a_pass(program, tmp_path):
    target = program("broken/capture_defeated.py")
    save = tmp_path / "lost.tcx"
    check = run_tcx("check", target, "--max-graph-breaks", "0", "--save", str(save))
    assert check.returncode == 4, check.stdout + check.stderr
    assert "capture was lost" in check.stderr and "0/0" in check.stderr
    assert "check passed" not in check.stdout
    assert "Traceback" not in check.stderr
    # What was recorded is kept, and reading it again gives the same answer.
    shown = run_tcx("show", str(save), "--format", "json")
    assert shown.returncode == 4 and not shown.stdout
    assert "capture was lost" in shown.stderr
    explained = run_tcx("explain", target)
    assert explained.returncode == 4 and "No graph breaks" not in explained.stdout


# --- 2. unknown function -----------------------------------------------------------------------


def test_check_of_a_function_that_never_compiled_is_a_usage_error(tmp_path):
    script = tmp_path / "two.py"
    script.write_text(
        "import torch\n\n"
        "def never(x):\n    return x\n\n"
        "@torch.compile(backend='eager')\n"
        "def ran(x):\n    print('break')\n    return x + 1\n\n"
        "ran(torch.ones(2))\n"
    )
    for function in ("missing", "never"):
        proc = run_tcx("check", f"{script}:{function}", "--max-graph-breaks", "0")
        assert proc.returncode == 2, (function, proc.stdout, proc.stderr)
        assert "check passed" not in proc.stdout
        assert f"'{function}'" in proc.stderr and "ran" in proc.stderr  # the functions compiled
        assert "Traceback" not in proc.stderr


def test_function_tcx_calls_itself_is_judged_by_its_forward(tmp_path):
    """`script.py:net --call ...`: the compiled frame is the module's `forward`, not `net`."""
    script = tmp_path / "net.py"
    script.write_text(
        "import torch\n\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = torch.nn.Linear(16, 4)\n\n"
        "    def forward(self, x):\n        x = self.fc(x)\n        print('break')\n"
        "        return x.relu()\n\n"
        "net = Net()\n"
    )
    proc = run_tcx("check", f"{script}:net", "--call", "8x16", "--max-graph-breaks", "0", "--format", "json")
    assert proc.returncode == 1, proc.stderr
    doc = _json(proc)
    assert doc["graph_break_count"] == 1 and doc["frames_compiled"] == ["forward"]


# --- 3. child processes ------------------------------------------------------------------------


def test_compiles_in_child_processes_are_recorded_and_counted(program, tmp_path):
    trace_dir = tmp_path / "torch_trace"
    target = program("children/workers.py")
    env = {"TORCH_TRACE": str(trace_dir)}
    save = tmp_path / "workers.tcx"
    budget = ("--max-graph-breaks", "0", "--format", "json")
    proc = run_tcx("check", target, *budget, "--save", str(save), env=env)
    assert proc.returncode == 1, proc.stderr
    doc = _json(proc)
    children = doc["program"]["child_processes"]
    assert children["observed_count"] == 3 and children["not_observed_count"] == 0
    assert sorted(c["how"] for c in children["processes"]) == ["fork", "spawn", "subprocess"]
    for child in children["processes"]:  # the fixture's worker: one print() in one function
        assert (child["graph_break_count"], child["graph_count"]) == (1, 2)
    # torch's own TORCH_TRACE logs of the same run (one per process; a forked child appends to
    # its parent's): together they hold every break and graph tcx reported.
    breaks = graphs = 0
    for index, log in enumerate(sorted(trace_dir.glob("*.log"))):
        (tmp_path / f"log{index}").mkdir()
        (tmp_path / f"log{index}" / log.name).write_bytes(log.read_bytes())
        for name, md, _ in torch_trace_records(tmp_path / f"log{index}"):
            breaks += name == "artifact" and md[name]["name"] == "dynamo_graph_break_reason"
            graphs += name == "dynamo_output_graph"
    assert breaks == doc["graph_break_count"] + children["graph_break_count"] == 3
    assert graphs == doc["graph_count"] + children["graph_count"] == 7
    assert doc["graph_break_count"] == 0  # the program's own process: one clean graph
    verdict = doc["budgets"][0]
    assert verdict == {**verdict, "actual": 3, "in_child_processes": 3, "exceeded": True}
    text = run_tcx("explain", str(save))  # the saved recording keeps the children's summaries
    assert "Compiles in 3 child processes" in text.stdout
    assert "No graph breaks: every compiled frame" not in text.stdout


def test_child_process_tcx_cannot_record_fails_the_check(program):
    proc = run_tcx("check", program("children/unobserved.py"), "--max-graph-breaks", "0")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "check passed" not in proc.stdout
    assert "1 child process(es) not observed" in proc.stdout
    assert "tcx cannot be imported" in proc.stdout


def test_a_python_child_tcx_cannot_follow_fails_the_check(program):
    """`python -I` skips the PYTHONPATH that carries tcx into children, and a child given an
    environment of its own lacks tcx's variables: the parent writes both down when it starts them."""
    proc = run_tcx("check", program("children/isolated.py"), "--max-graph-breaks", "0", "--format", "json")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    children = json.loads(proc.stdout)["program"]["child_processes"]
    assert children["not_observed_count"] == 2 and children["observed_count"] == 0
    reasons = [p["reason"] for p in children["processes"]]
    assert "-I: an isolated Python ignores PYTHONPATH" in reasons[0]
    assert "an environment that lacks tcx's variables" in reasons[1]
    assert all(p["argv"][1:3] in (["-I", "-c"], ["-c", p["argv"][2]]) for p in children["processes"])


@pytest.mark.parametrize(
    ("argv", "env", "skips"),
    [
        (["python3", "-I", "-c", "x"], None, "-I"),
        (["/usr/bin/python3.11", "-W", "ignore", "-E", "s.py"], None, "-E"),
        (["python", "-Wignore", "-sS", "s.py"], None, "-S"),
        (["python", "-X", "dev", "--check-hash-based-pycs", "never", "-I"], None, "-I"),
        (["python", "s.py"], {"PATH": "/bin"}, "environment"),
        (["python", "-c", "x", "-I"], None, None),  # the program's own argument
        (["python", "-m", "pip", "-E"], None, None),
        (["python", "s.py"], {"TCX_CHILD_RECORDING": "{}"}, None),
        (["gcc", "-I", "include"], None, None),  # not Python
    ],
)
def test_which_started_pythons_tcx_cannot_follow(argv, env, skips):
    from tcx.core.recorder.children import unfollowable

    reason = unfollowable(argv, None, env)
    assert (reason is None) if skips is None else (skips in reason)


# --- 4. exit status of a program ended by an uncaught exception --------------------------------


def test_raising_program_reports_the_exit_status_python_gives_it(program):
    target = program("broken/raises.py")
    plain = tcx_fork.run_python([target])
    doc = _json(run_tcx("explain", target, "--format", "json"))
    assert doc["program"]["status"] == "exception"
    assert doc["program"]["exit_code"] == plain.returncode == 1


# --- 9. text that is not valid UTF-8 -----------------------------------------------------------


def test_lone_surrogate_in_an_exception_is_recorded_and_reported(tmp_path):
    script = tmp_path / "surrogate.py"
    script.write_text(
        "import torch\n\n@torch.compile(backend='eager')\ndef f(x):\n    return x + 1\n\n"
        "f(torch.ones(2))\nraise RuntimeError('x \\udcff y')\n"
    )
    proc = run_tcx("explain", str(script), "--format", "json")
    assert proc.returncode == 3, proc.stderr
    program = _json(proc)["program"]
    assert program["status"] == "exception" and program["exc_type"] == "RuntimeError"
    assert program["message"] == "x \\udcff y"  # the surrogate, visibly escaped
    text = run_tcx("explain", str(script))
    assert text.returncode == 3 and "it raised RuntimeError" in text.stdout and "x \\udcff y" in text.stdout


def test_script_whose_name_is_not_utf8_runs_as_python_runs_it(tmp_path):
    """tcx used to exit 5 before running it. (torch 2.13 itself then fails to compile with such a
    file on the stack, in a plain run too: tcx must report what Python does.)"""
    script = tmp_path / os.fsdecode(b"bad\xffname.py")
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(PROGRAMS)!r})\nimport torch\nfrom print_break import step\n"
        "step(torch.randn(4))\n"
    )
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, timeout=300)
    proc = run_tcx("explain", str(script), "--format", "json")
    assert proc.returncode == (0 if plain.returncode == 0 else 3), proc.stderr
    doc = _json(proc)
    assert doc["program"]["exit_code"] == plain.returncode
    assert Path(doc["target"]).name == "bad\\udcffname.py"
    if plain.returncode == 0:
        assert doc["graph_break_count"] == 1
