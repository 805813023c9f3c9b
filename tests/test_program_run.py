"""The numbers are the program's: a live view runs the program as it runs (its own backend, mode
and caches), and its counts equal torch's own TORCH_TRACE log of a plain `python prog.py` run.

The programs are ones where the backend matters: under Inductor they compile more graphs and
recompile more than under `eager` (the demo; a training module with `.item()` and a data-dependent
branch across batch size 128; a gpt-fast-like decode loop whose `dynamic=True` prefill restarts).
The truth is torch's log, read by the tiny independent reader in conftest.py. The session shares
one Inductor cache (conftest.py), so the plain run compiles cold and tcx's run of the same program
compiles from the cache, as the program's own second run would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PROGRAMS, plain_trace, read_torch_trace, run_tcx, shared_run, torch_trace_records

pytestmark = [pytest.mark.torch, pytest.mark.inductor]

# Each differs between `eager` and the program's own backend (Inductor) in graphs or recompiles.
PROGRAMS_AS_THEY_RUN = ("demo.py", "train_item_branch.py", "models/fast_decode.py")


def guard_sets(trace: Path) -> int:
    """Cache entries torch built: one guard tree per compile that produced a graph."""
    return sum(name == "dynamo_cpp_guards_str" for name, _, _ in torch_trace_records(trace))


@pytest.fixture(params=PROGRAMS_AS_THEY_RUN)
def program_and_log(request):
    """tcx explain with no options, and torch's log of the program run plainly: each made once per session."""
    plain = shared_run(str(PROGRAMS / request.param), python=True, trace=True).ok()
    live = shared_run(
        "explain", str(PROGRAMS / request.param), "--format", "json", save=True, compressed=True
    ).ok()
    return request.param, live.json(), read_torch_trace(plain.torch_trace), live.recording, plain.torch_trace


def test_explain_with_no_options_reports_the_programs_own_counts(program_and_log):
    name, doc, torch_log, _, _ = program_and_log
    assert doc["backend"]["as_program"] and doc["backend"]["caches"] == "program", name
    assert doc["graph_count"] == torch_log.graphs, name
    assert doc["graph_break_count"] == torch_log.graph_breaks, name
    assert doc["recompile_count"] == torch_log.recompiles, name
    assert doc["compile_count"] == len(torch_log.compile_ids), name
    assert doc["failed_frame_count"] == len(torch_log.failed), name
    # Each break's stack starts at the program's own module: none of the recorder's frames (its
    # start-up script, runpy) sits below it.
    for site in doc["graph_breaks"]:
        first = site["user_stack"][0]
        assert (first["function"], Path(first["file"]).name) == ("<module>", Path(name).name), site


def test_eager_is_an_explicit_choice_that_says_its_counts_differ(program_and_log, dynamo_recorded):
    name, _, torch_log, _, _ = program_and_log
    run = dynamo_recorded(name)  # the session's `tcx report PROGRAM --backend eager` run, saved
    eager = run.view("explain")
    # the programs were chosen because the backend changes their counts
    assert (eager["graph_count"], eager["recompile_count"]) != (torch_log.graphs, torch_log.recompiles)
    assert eager["backend"]["counts_may_differ"] and not eager["backend"]["as_program"]
    assert eager["backend"]["overrides"] == [
        {"option": "backend", "used": "eager", "program_asks": ["inductor"]}
    ]
    text = shared_run("explain", str(run.recording)).ok().stdout
    assert "counts may differ from the program's own run" in text


def test_recompiles_and_guards_from_the_saved_run_agree_with_torch(program_and_log):
    name, _, torch_log, save, trace = program_and_log
    rec = json.loads(run_tcx("recompiles", str(save), "--format", "json").stdout)
    assert rec["recompile_count"] == torch_log.recompiles, name
    guards = json.loads(run_tcx("guards", str(save), "--format", "json").stdout)
    assert len(guards["entries"]) == guard_sets(trace), name


def test_check_passes_exactly_when_a_check_on_the_programs_log_passes(program_and_log):
    name, _, torch_log, save, trace = program_and_log
    for count, option in (
        (torch_log.graph_breaks, "--max-graph-breaks"),
        (torch_log.recompiles, "--max-recompiles"),
    ):
        for budget, code in ((count, 0), (count - 1, 1)):
            if budget < 0:
                continue
            on_run = run_tcx("check", str(save), option, str(budget))
            on_log = run_tcx("check", str(trace), option, str(budget))
            assert (on_run.returncode, on_log.returncode) == (code, code), (
                name,
                option,
                budget,
                on_run.stdout,
            )


def test_live_check_of_the_demo_fails_on_the_programs_own_counts():
    """The issue's own example: under eager the demo has 5 breaks and 4 recompiles, as it runs 7 and 6."""
    proc = run_tcx(
        "check", str(PROGRAMS / "demo.py"), "--max-graph-breaks", "5", "--max-recompiles", "4", "--no-save"
    )
    torch_log = plain_trace("demo.py")
    assert torch_log.graph_breaks > 5 and torch_log.recompiles > 4  # what makes this check fail
    assert proc.returncode == 1, proc.stdout
    assert f"graph breaks: {torch_log.graph_breaks}" in proc.stdout
    assert f"recompiles: {torch_log.recompiles}" in proc.stdout
    # the recompile failure names each recompile: compile id, function, the guard that failed
    assert "recompiled g" in proc.stdout and "size mismatch at index 0" in proc.stdout


def test_a_recording_made_with_an_override_fails_the_check_unless_the_check_accepts_it(dynamo_recorded):
    save = dynamo_recorded("demo.py").recording  # `tcx report demo.py --backend eager`, saved
    refused = run_tcx("check", str(save), "--max-graph-breaks", "100", "--format", "json")
    assert refused.returncode == 4
    doc = json.loads(refused.stdout)
    assert not doc["passed"] and doc["not_as_program"] == ["backend eager (the program asks for inductor)"]
    accepted = run_tcx("check", str(save), "--max-graph-breaks", "100", "--backend", "eager")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert "ignored" not in accepted.stderr  # --backend is the acceptance here, not a run option


def test_a_live_run_is_kept_for_every_other_view(tmp_path):
    """Record once, view many: .tcx/last.tcx in the current directory, with its own .gitignore.
    Its own runs: what is checked is what a run leaves in the folder it runs from."""
    proc = in_dir(tmp_path, "explain", str(PROGRAMS / "calls" / "callers.py"), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    last = tmp_path / ".tcx" / "last.tcx"
    assert last.is_file() and (tmp_path / ".tcx" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert "recording saved to .tcx/last.tcx" in proc.stderr
    again = in_dir(tmp_path, "show", "--format", "json")
    assert again.returncode == 0, again.stderr
    shown = json.loads(again.stdout)
    assert shown["source_kind"] == "recording"
    live = json.loads(proc.stdout)
    assert {k: shown[k] for k in ("graph_count", "graph_break_count", "recompile_count")} == {
        k: live[k] for k in ("graph_count", "graph_break_count", "recompile_count")
    }
    skipped = in_dir(tmp_path, "explain", str(PROGRAMS / "print_break.py"), "--no-save", "--backend", "eager")
    assert skipped.returncode == 0 and "recording saved" not in skipped.stderr
    after = json.loads(in_dir(tmp_path, "show", "--format", "json").stdout)
    assert after["target"].endswith("callers.py")  # --no-save left the last run as it was


def in_dir(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """tcx run from `cwd` (where .tcx/ is made), as a user in their project would."""
    return subprocess.run(
        [sys.executable, "-m", "tcx", *args],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "120"},
        capture_output=True,
        text=True,
        timeout=300,
    )
