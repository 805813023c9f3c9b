"""Advice a user can act on, on programs shaped like real models (issue 35's defects, one test each).

Each program is recorded once per session (conftest.shared_run) and its views re-render the saved
recording; the truth is torch's own log of the same run, or a plain run with the remedy applied by hand.
"""

from __future__ import annotations

import json

import pytest
from conftest import PROGRAMS, run_tcx, shared_run

pytestmark = [pytest.mark.torch]

GENERATE = str(PROGRAMS / "models" / "generate_uncompiled.py")


def generate_recording() -> str:
    """`torch.compile(model)` then `compiled.generate()`: nothing compiles (eager: no kernel matters)."""
    run = shared_run("explain", GENERATE, "--backend", "eager", save=True).ok()
    return str(run.recording)


def test_explain_names_the_compile_call_whose_result_never_ran() -> None:
    run = shared_run("explain", GENERATE, "--backend", "eager", save=True).ok()
    text = " ".join(run.stdout.split())
    assert "Nothing was compiled: torch.compile(TinyLM) at " in text
    assert "generate_uncompiled.py:27 returned a compiled callable that was never called" in text


def test_check_fails_a_run_that_compiled_nothing() -> None:
    recording = generate_recording()
    proc = run_tcx(
        "check", recording, "--max-graph-breaks", "0", "--max-recompiles", "0", "--backend", "eager"
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = " ".join(proc.stdout.split())
    assert "FAIL Nothing was compiled: torch.compile(TinyLM) at" in out
    assert "check failed: nothing compiled" in out and "check passed" not in out

    doc = json.loads(
        run_tcx(
            "check", recording, "--max-graph-breaks", "0", "--backend", "eager", "--format", "json"
        ).stdout
    )
    assert doc["passed"] is False and doc["compile_count"] == 0
    assert doc["compiled_nothing"]["allowed"] is False and "TinyLM" in doc["compiled_nothing"]["text"]

    github = run_tcx(
        "check", recording, "--max-graph-breaks", "0", "--backend", "eager", "--format", "github"
    )
    assert github.returncode == 1
    assert "::error file=fixtures/programs/models/generate_uncompiled.py,line=27," in github.stdout

    sarif = json.loads(
        run_tcx(
            "check", recording, "--max-graph-breaks", "0", "--backend", "eager", "--format", "sarif"
        ).stdout
    )
    (result,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "tcx/nothing-compiled"]
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 27


def test_allow_empty_passes_a_run_that_compiled_nothing_and_says_so() -> None:
    proc = run_tcx(
        "check", generate_recording(), "--max-graph-breaks", "0", "--backend", "eager", "--allow-empty"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = " ".join(proc.stdout.split())
    assert "ok Nothing was compiled" in out and "(allowed by --allow-empty)" in out
    assert out.rstrip().endswith("check passed")


NANO = str(PROGRAMS / "models" / "nano_train_eval.py")


def nano_recording() -> tuple[str, object]:
    """nanoGPT-style train and eval of one compiled model (eager backend), with torch's log of the run."""
    run = shared_run("recompiles", NANO, "--backend", "eager", "--format", "json", save=True, trace=True).ok()
    return str(run.recording), run.torch_trace


def test_the_grad_mode_recompile_is_listed_as_expected_never_as_a_top_problem() -> None:
    from conftest import read_torch_trace

    recording, trace = nano_recording()
    assert read_torch_trace(trace).recompiles == 1  # torch: train and eval, one recompile
    proc = run_tcx("report", recording, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["views"]["explain"]["recompile_count"] == 1
    assert [p for p in doc["problems"] if p["kind"] == "recompiles"] == []
    [expected] = doc["expected"]
    assert expected["title"] == "forward recompiled (0/1)" and expected["detail"].startswith("grad mode")

    text = " ".join(run_tcx("report", recording, "--format", "text").stdout.split())
    assert "Top problems" not in text
    assert "Expected, not a problem: forward recompiled (0/1): grad mode" in text
    assert "No problems found: no graph breaks, failed frames or recompiles but the expected." in text
    markdown = run_tcx("report", recording, "--format", "markdown").stdout
    assert "- Expected, not a problem: forward recompiled (0/1): grad mode" in markdown
