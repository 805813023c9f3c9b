"""Live runs as a user makes them: targets, --call, failures, --save and `tcx show`."""

from __future__ import annotations

import json

import pytest
from conftest import PROGRAMS, explain_with_trace, run_tcx, shared_run

pytestmark = pytest.mark.torch


def _json(proc) -> dict:
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.smoke  # the one live run of `make test-fast`: a program under the recorder, torch's log beside
def test_raising_program_keeps_what_was_recorded(program, tmp_path):
    doc, trace, proc = explain_with_trace(program("broken/raises.py"), tmp_path)
    assert proc.returncode == 3
    assert doc["program"]["status"] == "exception"
    assert doc["program"]["exc_type"] == "RuntimeError"
    assert "raises.py" in doc["program"]["traceback"] and "tcx/core" not in doc["program"]["traceback"]
    assert doc["graph_break_count"] == trace.graph_breaks == 1
    assert "Traceback" not in proc.stderr


def test_sys_exit_is_reported(program):
    proc = run_tcx("explain", program("broken/exits.py"), "--format", "json")
    assert proc.returncode == 3
    doc = _json(proc)
    assert doc["program"] == {**doc["program"], "status": "exit", "exit_code": 7}
    assert doc["graph_count"] == 1


def test_segfault_keeps_events_and_names_the_signal(program, tmp_path):
    doc, trace, proc = explain_with_trace(program("broken/segfault.py"), tmp_path)
    assert proc.returncode == 3
    assert doc["program"]["status"] == "crashed" and doc["program"]["signal"] == "SIGSEGV"
    assert doc["graph_break_count"] == trace.graph_breaks == 1


def test_timeout_stops_the_program_and_reports(program, tmp_path):
    save = tmp_path / "hang.tcx"
    # 10 s: the program compiles its one function (eager) in about a second, then sleeps
    proc = run_tcx("explain", program("broken/hangs.py"), "--timeout", "10", "--save", str(save))
    assert proc.returncode == 3, proc.stderr
    assert "--timeout 10" in proc.stdout
    assert "Graph break" in proc.stdout or "graph_break()" in proc.stdout
    shown = _json(run_tcx("show", str(save), "--format", "json"))
    assert shown["program"]["status"] == "timeout"
    assert shown["graph_break_count"] == 1


def test_syntax_error_is_a_target_failure(program):
    proc = run_tcx("explain", program("broken/syntax_error.py"))
    assert proc.returncode == 3
    assert "syntax error" in proc.stdout
    assert "Traceback (most recent call last)" not in proc.stderr


def test_missing_function_is_a_usage_error(program):
    proc = run_tcx("explain", program("seed_f.py") + ":nope", "--call", "4x32,32x64,64")
    assert proc.returncode == 2
    assert "no function 'nope' in the target (functions defined there: f" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_call_spec_is_a_usage_error(program):
    proc = run_tcx("explain", program("seed_f.py") + ":f", "--call", "4xq")
    assert proc.returncode == 2
    assert "4xq" in proc.stderr


def test_call_spec_drives_the_function(program, tmp_path):
    doc, trace, proc = explain_with_trace(
        program("seed_f.py") + ":f",
        tmp_path,
        "--call",
        "128x32,32x64,64",
        "--call",
        "32x32,32x64,64",
    )
    assert proc.returncode == 0, proc.stderr
    assert doc["graph_count"] == trace.graphs == 2
    assert doc["recompile_count"] == trace.recompiles == 1
    # Everything recorded came from tcx's own calls of f: the selection is the whole run.
    assert doc["selection"]["function"] == "f"
    assert set(doc["selection"]["compile_ids"]) == {f"{a}/{b}" for a, b in trace.compile_ids}


def test_examples_convention(program, tmp_path):
    doc, trace, _ = explain_with_trace(program("seed_f.py") + ":f", tmp_path)
    assert doc["compile_count"] == len(trace.compile_ids) == 3  # tcx_calls(): 128, 128, 256, 32
    # tcx compiles f itself: with torch.compile's default backend, and says it is the program's
    backend = doc["backend"]
    assert backend["name"] == "inductor" and backend["reason"] == "as the program asks"
    assert backend["as_program"] and not backend["counts_may_differ"] and backend["caches"] == "program"


def test_module_function_target(tmp_path):
    env = {"PYTHONPATH": str(PROGRAMS)}
    proc = run_tcx("explain", "pkg_example.ops:scale", "--call", "8x4", "--format", "json", env=env)
    assert proc.returncode == 0, proc.stderr
    doc = _json(proc)
    [brk] = doc["graph_breaks"]
    assert brk["type"] == "Data-dependent branching"
    assert brk["file"].endswith("ops.py") and brk["line"] == 8


def test_module_function_without_inputs_is_a_usage_error():
    proc = run_tcx("explain", "pkg_example.ops:scale", env={"PYTHONPATH": str(PROGRAMS)})
    assert proc.returncode == 2
    assert "--call" in proc.stderr


def test_function_filter_when_the_program_runs(program, tmp_path):
    doc, _, _ = explain_with_trace(program("nested_break.py") + ":middle", tmp_path)
    assert doc["selection"]["function"] == "middle"
    # Every break has middle on its user stack (outer inlined it, middle itself, inner called
    # from it); the resume of outer ran after middle returned, so it is not middle's.
    assert doc["graph_break_count"] == 3
    ids = {cid for b in doc["graph_breaks"] for cid in b["compile_ids"]}
    assert ids == {"0/0", "1/0", "2/0"}
    assert doc["compile_count"] < 6


def test_save_then_show_renders_the_same_without_torch(program):
    # the session's one `tcx explain demo.py --format json --save FOLDER/run.tcx.gz` (as the demo runs)
    run = shared_run("explain", program("demo.py"), "--format", "json", save=True, compressed=True).ok()
    save, live = run.recording, run.json()
    shown = _json(run_tcx("show", str(save), "--format", "json"))
    for key in (
        "graph_count",
        "graph_break_count",
        "unique_graph_break_count",
        "compile_count",
        "recompile_count",
    ):
        assert shown[key] == live[key]
    assert [b["type"] for b in shown["graph_breaks"]] == [b["type"] for b in live["graph_breaks"]]
    text = run_tcx("show", str(save)).stdout
    assert "if x.sum() > 0:" in text  # source embedded in the recording


def test_check_budgets(program, dynamo_recorded):
    eager = ("--backend", "eager")  # the session's recordings took that fast path: accepted here
    over = run_tcx("check", program("demo.py"), "--max-graph-breaks", "0", *eager)
    assert over.returncode == 1
    assert "graph breaks" in over.stdout and "FAIL" in over.stdout
    clean = str(dynamo_recorded("clean_module.py").recording)
    within = run_tcx("check", clean, "--max-graph-breaks", "0", "--max-recompiles", "0", *eager)
    assert within.returncode == 0, within.stdout + within.stderr
    demo = str(dynamo_recorded("demo.py").recording)
    sarif = json.loads(run_tcx("check", demo, "--max-graph-breaks", "0", "--format", "sarif", *eager).stdout)
    assert sarif["version"] == "2.1.0"
    results = sarif["runs"][0]["results"]
    assert len(results) == 3
    for res in results:
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"].endswith("demo.py")
        assert loc["region"]["startLine"] in (13, 15, 16)


def test_program_text_cannot_drive_the_terminal(program):
    proc = run_tcx("explain", program("broken/markup_names.py"), env={"NO_COLOR": ""})
    assert "\x1b[31m" not in proc.stdout
    assert "[bold red]not markup[/]" in proc.stdout
