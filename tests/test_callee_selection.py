"""`script.py:func` selects every compile that ran while func was on the stack: a compiled
function it calls, a compiled module's forward, a function behind a decorator of the program's
own — live, from the saved recording, and (where torch's log has the stack) from a log.

fixtures/programs/calls/callers.py: `outer` calls `inner` (decorated, breaks on a print), a
compiled module and `decorated` (behind a decorator of the program's own); `elsewhere` calls
`normalize`, compiled only there. Which compile ids exist and what they are comes from torch's
own log of a plain run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import tcx_fork
from conftest import PROGRAMS, run_tcx, torch_trace_records

pytestmark = pytest.mark.torch

PROGRAM = str(PROGRAMS / "calls" / "callers.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    """A saved tcx recording and torch's log of a plain run; compile id -> code name."""
    tmp = tmp_path_factory.mktemp("callers")
    plain = tcx_fork.run_python([PROGRAM], {**os.environ, "TORCH_TRACE": str(tmp / "trace")})
    assert plain.returncode == 0, plain.stderr[-3000:]
    names = {
        f"{md['frame_id']}/{md['frame_compile_id']}": md[name]["co_name"]
        for name, md, _ in torch_trace_records(tmp / "trace")
        if name == "compilation_metrics"
    }
    save = tmp / "run.tcx"
    assert run_tcx("explain", PROGRAM, "--save", str(save)).returncode == 0
    return save, tmp / "trace", names


def selected(target: str) -> list[str]:
    proc = run_tcx("explain", target, "--no-save", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return sorted(json.loads(proc.stdout)["selection"]["compile_ids"])


def test_outer_selects_what_it_calls_live_and_from_the_recording(runs):
    save, _, compiles = runs
    called = sorted(c for c, name in compiles.items() if name != "normalize")
    assert {compiles[c] for c in called} >= {"inner", "forward", "decorated"}
    assert selected(PROGRAM + ":outer") == called
    assert selected(f"{save}:outer") == called


def test_a_function_selects_only_the_compiles_made_while_it_ran(runs):
    save, _, compiles = runs
    mine = sorted(c for c, name in compiles.items() if name == "normalize")
    assert len(mine) == 1
    assert selected(PROGRAM + ":elsewhere") == mine
    assert selected(f"{save}:elsewhere") == mine


def test_a_budget_on_the_caller_fails_where_its_callee_breaks_the_budget(runs):
    save, _, _ = runs
    over = run_tcx("check", PROGRAM + ":outer", "--max-graph-breaks", "0", "--no-save")
    assert over.returncode == 1, over.stdout
    assert "callers.py:15" in over.stdout and "Failed to trace builtin operator" in over.stdout
    assert run_tcx("check", f"{save}:elsewhere", "--max-graph-breaks", "0").returncode == 0


def test_a_log_without_the_callers_says_so_instead_of_guessing(runs):
    """torch's own stacks leave out the direct caller of a compiled function: `elsewhere` only
    calls `normalize`, so the log cannot tell its compile apart; tcx says so."""
    _, trace, _ = runs
    proc = run_tcx("explain", f"{trace}:elsewhere")
    assert proc.returncode == 2
    assert "leave out the direct caller" in proc.stderr and "record the program with tcx" in proc.stderr
    found = run_tcx("explain", f"{trace}:outer")  # found through the other frames of the stacks
    assert found.returncode == 0
    assert "may miss compiles called directly from outer" in " ".join(found.stdout.split())
