"""A failed run never reads as a clean one: it ends with what failed and where (the user's line,
torch's message once), exit 3 — for a program that raises before compiling, a syntax error, a
compile that crashes in the program's own backend, and a recorder that cannot start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PROGRAMS, run_tcx

from tcx.core.run import driver

pytestmark = pytest.mark.torch


def test_a_program_that_raises_before_compiling_ends_with_the_failure_at_its_line():
    proc = run_tcx("explain", str(PROGRAMS / "broken" / "raises_early.py"), "--no-save")
    assert proc.returncode == 3, proc.stderr
    out = proc.stdout
    assert "No graph breaks" not in out and "whole graphs" not in out
    tail = out[out.index("The program did not finish") :]
    assert "it raised ValueError" in tail
    assert "bad config: no dataset named 'imagenet-tiny'" in tail
    assert "raises_early.py:12 in load_config" in tail  # where it was raised
    assert "raises_early.py:15 in <module>" in tail  # the user's line that called it
    assert "before anything was compiled" in tail
    doc = json.loads(
        run_tcx(
            "explain", str(PROGRAMS / "broken" / "raises_early.py"), "--no-save", "--format", "json"
        ).stdout
    )
    assert doc["program"]["status"] == "exception" and doc["compile_count"] == 0


def test_a_syntax_error_names_the_file_and_line():
    proc = run_tcx("explain", str(PROGRAMS / "broken" / "syntax_error.py"), "--no-save")
    assert proc.returncode == 3
    assert "No graph breaks" not in proc.stdout
    assert "it has a syntax error" in proc.stdout and "syntax_error.py:" in proc.stdout


def test_a_crashing_backend_shows_torchs_message_once_and_no_internal_traceback():
    proc = run_tcx("explain", str(PROGRAMS / "broken" / "backend_crash.py"), "--no-save")
    assert proc.returncode == 3, proc.stderr
    out = proc.stdout
    assert out.count("strict_backend cannot lower this graph") == 2  # the failed frame's line, the paragraph
    assert "Traceback (most recent call last)" not in out
    assert "TORCHDYNAMO_VERBOSE" not in out and "_dynamo/output_graph.py" not in out
    assert "backend_crash.py:15 in <module>" in out and "backend_crash.py:7 in strict_backend" in out
    assert "while torch.compile was compiling" in out
    assert "No graph breaks" not in out and "whole graphs" not in out
    check = run_tcx(
        "check", str(PROGRAMS / "broken" / "backend_crash.py"), "--max-graph-breaks", "5", "--no-save"
    )
    assert check.returncode == 3 and "check passed" not in check.stdout
    assert "the program did not finish" in check.stdout


def test_a_checkout_with_a_tcx_folder_in_the_current_directory_does_not_break_the_recorder(tmp_path):
    """A `tcx/` folder where tcx runs (a source checkout, a project of that name) once shadowed the
    installed package in the recorder ("No module named 'tcx.core'") and the run read as clean."""
    (tmp_path / "tcx").mkdir()
    (tmp_path / "tcx" / "__init__.py").write_text("")
    program = tmp_path / "prog.py"
    program.write_text(
        "import torch\n\n@torch.compile(backend='eager')\n"
        "def f(x):\n    print('hi')\n    return x + 1\n\nf(torch.ones(2))\n"
    )
    console_script = Path(sys.executable).parent / "tcx"
    proc = subprocess.run(
        [str(console_script), "explain", "prog.py", "--no-save", "--format", "json"],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert json.loads(proc.stdout)["graph_break_count"] == 1


def test_a_recorder_that_cannot_start_is_a_failure_not_a_clean_run(monkeypatch, capsys, tmp_path):
    from tcx.cli.main import main

    boot = tmp_path / "boot.py"
    boot.write_text("import tcx.core.no_such_module\n", encoding="utf-8")
    monkeypatch.setattr(driver, "CHILD_BOOT", str(boot))
    monkeypatch.delenv("TCX_WARM_DIR", raising=False)  # the usual start is the one that fails here
    monkeypatch.setenv("NO_COLOR", "1")
    with pytest.raises(SystemExit) as stop:
        main(["explain", str(PROGRAMS / "print_break.py"), "--no-save"])
    out = capsys.readouterr().out
    assert stop.value.code == 3
    assert "tcx's recorder did not start" in out
    assert "No module named 'tcx.core.no_such_module'" in out
    assert "No graph breaks" not in out
