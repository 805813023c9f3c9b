"""Read at a glance (issue 39): the overview first, guards that read, an HTML report that is a page.

The real-model fixtures are recorded once per session (tests/conftest.py): nanoGPT's train/eval loop
through Inductor (`recorded("nano_train_eval")`: the report and its HTML page need Inductor's output),
and HF Llama under the eager backend (`dynamo_recorded`: its guards and breaks need no Inductor).
Every other output is rendered from those recordings, as a user re-renders a saved run.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import run_tcx

pytestmark = pytest.mark.torch

OVERVIEW_MAX_LINES = 400  # a screen or two for a 2-layer model


@pytest.fixture(scope="module")
def nano(recorded) -> str:
    return str(recorded("nano_train_eval").recording)


@pytest.fixture(scope="module")
def llama(dynamo_recorded) -> str:
    return str(dynamo_recorded("models/tiny_llama.py").recording)


def _ok(*args: str) -> str:
    proc = run_tcx(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_report_prints_the_overview_and_full_prints_every_view(nano):
    overview = _ok("report", nano)
    full = _ok("report", nano, "--full")
    lines = overview.splitlines()
    assert len(lines) <= OVERVIEW_MAX_LINES, len(lines)
    assert len(full.splitlines()) > 5 * len(lines)  # every view whole
    assert "Top problems, worst first:" in overview or "No problems found" in overview
    # one row per compile, and each section with the command that prints it (on the recording: instant)
    assert re.search(r"^0/0 +forward ", overview, re.M) and re.search(r"^0/1 +forward ", overview, re.M)
    for view in ("explain", "recompiles", "guards", "trace", "bytecode", "graphs", "fusion", "codegen"):
        assert f"tcx {view} {nano}" in overview, view
    assert f"tcx report {nano} --full" in overview
    # the sections only come with --full; a section with nothing to show never does
    assert "Dynamo's trace ─" not in overview and "Dynamo's trace ─" in full
    assert "Export" not in full and "No torch.export call" not in full
    # one compile total, saying what it covers: the per-compile column's sum
    total_re = r"compile time ([\d.]+) s over 2 compile\(s\) \(the 'compile s' column's sum"
    [total] = re.findall(total_re, " ".join(overview.split()))
    column = [float(m) for m in re.findall(r"^0/\d +forward .* ([\d.]+)$", overview, re.M)]
    assert len(column) == 2 and abs(sum(column) - float(total)) < 0.02
    assert "cumulative per phase" not in full


def test_explain_with_no_breaks_names_the_recompiles(nano):
    text = _ok("explain", nano)
    doc = run_tcx("explain", nano, "--format", "json")
    counts = json.loads(doc.stdout)
    assert counts["graph_break_count"] == 0 and counts["recompile_count"] == 1
    assert "No graph breaks" in text
    flat = " ".join(text.split())
    assert f"1 recompile of forward: which guard failed on which call: tcx recompiles {nano}" in flat


def test_explain_opens_with_the_findings_and_folds_restarts_after(llama):
    text = _ok("explain", llama)
    lines = text.splitlines()
    findings = next(i for i, ln in enumerate(lines) if "distinct graph break" in ln)
    first_site = next(i for i, ln in enumerate(lines) if ln.startswith("#1 "))
    restarts = [i for i, ln in enumerate(lines) if ln.startswith("restarted ")]
    assert restarts and findings < first_site < restarts[0]  # findings, the breaks, then restarts
    assert re.search(r"^\d+ restarts? \(attempts torch threw away", text, re.M)
    # a reason already given is named by the restart that gave it: mostly one line each
    assert any(re.search(r": as \d+/\d+$", lines[i]) for i in restarts)
