"""`tcx fix`: each remedy re-run in a fresh process, verified (or not) from that run's own figures.

The truth is torch's: every count tcx fix reports for a run equals what torch wrote to its own
TORCH_TRACE log of that very run (`--keep-logs`), read by the tiny independent parser in
conftest.py; one remedy is also checked against a plain `python` run of the program with that
config set by hand, no tcx anywhere. Runs use the eager backend (Dynamo only) to stay fast.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PROGRAMS, REPO, TorchTrace, read_torch_trace, run_tcx, shared_value, tool
from fix_runs import counts, figures, fix_json, recompile_reasons, remedy

pytestmark = [pytest.mark.torch]

# A plain run of a program with one dynamo config set and every torch.compile on the eager
# backend, as `tcx fix --backend eager` runs it: argv is the program, the config name, its value.
PLAIN_WITH_CONFIG = """
import runpy, sys, torch
setattr(torch._dynamo.config, sys.argv[2], sys.argv[3] == "True")
_compile = torch.compile
def compile(fn=None, **kwargs):
    kwargs["backend"] = "eager"
    return _compile(fn, **kwargs) if fn is not None else lambda f: _compile(f, **kwargs)
torch.compile = compile
sys.argv = sys.argv[1:2]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def lines_with_breaks(trace: TorchTrace) -> set[str]:
    return {line for _file, line, _reason in trace.break_sites}


@pytest.fixture
def demo() -> tuple[dict, Path]:
    """`tcx fix demo.py`, once per session (conftest.shared_value): each finding's first remedy (the
    .item() and print configs, the torch.cond rewrite, mark_dynamic); the recompile's other remedies
    (maybe_mark_dynamic, shapes_spec, dynamic=True) are left out."""
    return shared_value("fix demo.py", _fix_demo)


def _fix_demo(folder: Path) -> tuple[dict, Path]:
    logs = folder / "logs"
    return fix_json(PROGRAMS / "demo.py", logs, "--backend", "eager", "--max-runs", "4"), logs


def test_the_baseline_is_torchs_count_of_the_program_as_it_runs(demo):
    doc, logs = demo
    assert doc["schema"] == "tcx.fix/1" and doc["program"]["status"] == "ok"
    assert doc["baseline_trace_log"] == str(logs / "baseline")
    baseline = read_torch_trace(logs / "baseline")
    assert figures(doc["before"]) == counts(baseline)
    assert {"13", "15", "16"} <= lines_with_breaks(baseline)  # the if, the print, the .item()


def test_item_break_is_verified_by_capture_scalar_outputs_with_torchs_counts(demo):
    doc, _ = demo
    r = remedy(doc, "capture_scalar_outputs = True")
    assert r["kind"] == "config" and r["finding"]["kind"] == "graph_break"
    assert r["finding"]["site"]["line"] == 16 and "item()" in r["finding"]["what"]
    after = read_torch_trace(Path(r["trace_log"]))
    assert figures(r["after"]) == counts(after)
    assert "16" not in lines_with_breaks(after)  # torch's log of the re-run: the .item() break is gone
    assert counts(after)["graph_breaks"] < doc["before"]["graph_breaks"]
    assert r["verified"] is True and r["why_not"] is None
    assert r["outputs_match"] is True, r["outputs_note"]


def test_print_break_is_verified_by_reorderable_logging_functions_with_torchs_counts(demo):
    doc, _ = demo
    r = remedy(doc, "reorderable_logging_functions.add(print)")
    assert r["finding"]["site"]["line"] == 15
    after = read_torch_trace(Path(r["trace_log"]))
    assert figures(r["after"]) == counts(after)
    assert "15" not in lines_with_breaks(after) and "16" in lines_with_breaks(after)  # only the print's went
    assert r["verified"] is True and r["outputs_match"] is True


def test_the_batch_size_recompile_is_verified_by_mark_dynamic_with_torchs_counts(demo):
    doc, _ = demo
    r = remedy(doc, "._dynamo.mark_dynamic(x, 0)")
    assert r["kind"] == "dynamism" and r["finding"]["kind"] == "recompile"
    assert r["finding"]["site"] == {
        "file": str(PROGRAMS / "demo.py"),
        "line": 10,
        "function": "g",
        "arg": "x",
        "dim": 0,
    }
    baseline = Path(doc["baseline_trace_log"])
    after = Path(r["trace_log"])
    assert figures(r["after"]) == counts(read_torch_trace(after))
    # torch's own recompile reasons: g's size guard on x failed in the baseline, never in the re-run
    assert any("tensor 'x' size mismatch at index 0" in reason for reason in recompile_reasons(baseline))
    assert not any("tensor 'x'" in reason for reason in recompile_reasons(after))
    assert r["verified"] is True and r["outputs_match"] is True


def test_max_runs_leaves_the_other_remedies_unrun_and_says_so(demo):
    doc, logs = demo
    assert sorted(p.name for p in logs.iterdir()) == [
        "baseline",
        "remedy-1",
        "remedy-2",
        "remedy-3",
        "remedy-4",
    ]
    for left in (remedy(doc, "dynamic=True"), remedy(doc, "maybe_mark_dynamic"), remedy(doc, "shapes_spec")):
        assert not left["ran"] and left["why_not"] == "not run: --max-runs 4 reached"
    ran = [r["ran"] for r in doc["remedies"]]
    assert ran == [True] * 4 + [False] * (len(ran) - 4)  # remedies[] is the order they ran in
    assert doc["combined"] is None  # no run left to combine the verified ones


def test_a_plain_run_with_the_config_set_by_hand_has_the_remedys_counts(demo, tmp_path):
    doc, _ = demo
    r = remedy(doc, "capture_scalar_outputs = True")
    trace = tmp_path / "trace"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            PLAIN_WITH_CONFIG,
            str(PROGRAMS / "demo.py"),
            "capture_scalar_outputs",
            "True",
        ],
        # caches off, as tcx fix runs it: no run inherits an earlier one's PGO dimensions
        env={**os.environ, "TORCH_TRACE": str(trace), "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert figures(r["after"]) == counts(read_torch_trace(trace))


def test_the_data_dependent_if_of_the_demo_gets_a_torch_cond_rewrite(demo):
    doc, _ = demo
    r = remedy(doc, "torch.cond")
    assert r["kind"] == "code" and r["finding"]["site"]["line"] == 13
    assert r["change"] == "y = torch.cond(x.sum() > 0, lambda y: y * 2, lambda y: y.clone(), (y,))"
    assert "-    if x.sum() > 0:  # data-dependent branch\n" in r["patch"]
    assert f"+    {r['change']}" in r["patch"]


def test_a_branch_rewritten_as_torch_cond_on_a_copy_is_verified_with_torchs_counts(tmp_path):
    """data_dependent_if.py's branch, in a latin-1 file (its coding cookie) with a form feed line and
    \\v, \\x1c-\\x1e and \\x85 above it (str.splitlines splits there, Python does not:
    tests/data/README.md, round3/): rewritten at Python's line, run from a copy in the file's own
    encoding, verified with torch's counts; --apply replaces a FILE.tcx.patch symlink, never writing
    its target (issue 36, items 2, 9, 12)."""
    program = tmp_path / "latin1_branch.py"  # --apply writes beside it: not into the repository
    program.write_bytes((REPO / "tests" / "data" / "round3" / "latin1_branch.py.txt").read_bytes())
    original = program.read_bytes()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    patch = Path(f"{program}.tcx.patch")
    patch.symlink_to(victim)
    logs = tmp_path / "logs"
    proc = run_tcx(
        "fix", str(program), "--no-save", "--keep-logs", str(logs), "--format", "json", "--backend", "eager",
        "--apply", timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    r = remedy(doc, "torch.cond")
    assert r["change"] == "return torch.cond(y.sum() > 0, lambda y: y + 1, lambda y: y - 1, (y,))"
    assert r["finding"]["site"]["line"] == 13  # Python's line of the `if` (str.splitlines counts 19)
    baseline, after = read_torch_trace(logs / "baseline"), read_torch_trace(Path(r["trace_log"]))
    assert figures(doc["before"]) == counts(baseline) and baseline.graph_breaks == 1
    assert figures(r["after"]) == counts(after) and after.graph_breaks == 0  # torch's log of the copy's run
    assert r["verified"] is True and r["outputs_match"] is True, r["why_not"]
    assert program.read_bytes() == original  # the program ran from a copy; its file is as it was
    # --apply: the verified rewrite's diff beside the file, in the file's bytes; the link replaced
    assert (
        victim.read_text() == "keep me\n"
        and not patch.is_symlink()
        and f"patch written to {patch}" in proc.stderr
    )
    assert patch.read_bytes().decode("latin-1") == r["patch"]
    patch_tool = tool("patch", "applies the FILE.tcx.patch that --apply writes")
    applied = subprocess.run(
        [patch_tool, "-s", "-o", "-", str(program)], input=patch.read_bytes(), capture_output=True
    )
    assert applied.returncode == 0, applied.stderr
    lines = applied.stdout.split(b"\n")
    assert lines[0] == b"# -*- coding: latin-1 -*-" and b'"caf\xe9"' in applied.stdout
    assert lines[12].startswith(b"    return torch.cond(y.sum() > 0")


def test_mark_dynamic_on_a_size_the_code_specializes_is_not_verified(tmp_path):
    logs = tmp_path / "logs"
    doc = fix_json(PROGRAMS / "fix_specialized.py", logs)
    baseline = read_torch_trace(logs / "baseline")
    assert figures(doc["before"]) == counts(baseline) and baseline.recompiles == 1
    marked = remedy(doc, "._dynamo.mark_dynamic(x, 0)")
    assert marked["finding"]["kind"] == "recompile" and marked["finding"]["site"]["arg"] == "x"
    assert marked["ran"] and marked["verified"] is False
    assert "ConstraintViolationError" in marked["why_not"]  # torch refused: the code specialized it
    # torch's whole reason, not its first line: what was violated, and the user line it names
    assert "You marked L['x'].size()[0] as dynamic but your code specialized it" in marked["why_not"]
    assert marked["outputs_match"] is None and "could not compare" in marked["outputs_note"]
    # a variant of the refuted idea (maybe_mark_dynamic, shapes_spec of the same size) uses no run, and
    # names the remedy that refuted it by its change (the rendered list is ranked: a number would not fit)
    refuted = marked["change"].split("  # ", 1)[0]
    for variant in (remedy(doc, "maybe_mark_dynamic(x, 0)"), remedy(doc, "shapes_spec")):
        assert variant["ran"] is False and f"not run: a variant of `{refuted}`" in variant["why_not"]
    dynamic = remedy(doc, "dynamic=True")
    after = read_torch_trace(Path(dynamic["trace_log"]))
    assert figures(dynamic["after"]) == counts(after) and after.recompiles == 1  # it still recompiles
    assert dynamic["verified"] is False and "the finding stayed" in dynamic["why_not"]
    assert doc["combined"] is None  # nothing verified, nothing to combine


def test_outputs_a_program_does_not_repeat_are_not_blamed_on_the_remedy(tmp_path):
    logs = tmp_path / "logs"
    doc = fix_json(PROGRAMS / "fix_unseeded.py", logs)
    r = remedy(doc, "reorderable_logging_functions")
    after = read_torch_trace(Path(r["trace_log"]))
    assert figures(r["after"]) == counts(after) and after.graph_breaks == 0
    # the remedy's outputs differed, so the program ran again with no remedy: they differed too
    assert (logs / "baseline-again").is_dir() and doc["outputs_repeatable"] is False
    assert r["outputs_match"] is None and "could not compare" in r["outputs_note"]
    assert r["verified"] is True  # the break is gone and nothing got worse


def test_outputs_are_compared_call_by_call_within_the_dtypes_tolerance(tmp_path):
    import torch

    from tcx.core.fix.outputs import compare_outputs

    def saved(name: str, *tensors: torch.Tensor) -> str:
        path = tmp_path / name
        calls = [{"function": "g", "tensors": [t], "others": [1.5]} for t in tensors]
        torch.save({"calls": calls, "dropped": 0, "errors": []}, path)
        return str(path)

    x = torch.linspace(0, 1, 100)
    base = saved("base.pt", x, x * 2)
    assert compare_outputs(base, saved("close.pt", x + 1e-7, x * 2))[0] is True
    match, note = compare_outputs(base, saved("far.pt", x, x * 2 + 1e-3))
    assert match is False and note.startswith("call #1 (g): output 0 differs"), note
    assert compare_outputs(base, saved("fewer.pt", x))[0] is False
    assert compare_outputs(base, str(tmp_path / "missing.pt"))[0] is None


def test_max_runs_bounds_the_reruns_and_the_text_says_so(tmp_path):
    proc = run_tcx("fix", str(PROGRAMS / "fix_specialized.py"), "--no-save", "--max-runs", "0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "tcx fix" in proc.stdout and "baseline" in proc.stdout
    # mark_dynamic, maybe_mark_dynamic, shapes_spec, dynamic=True
    assert proc.stdout.count("not run: --max-runs 0 reached") == 4, proc.stdout
    assert "remedy-" not in proc.stderr  # only the baseline ran


def test_a_recording_or_a_log_is_refused_with_exit_code_2():
    proc = run_tcx("fix", str(REPO / "fixtures" / "gpu" / "h200_cudagraphs_real.tcx"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "tcx fix runs a program" in proc.stderr and "Traceback" not in proc.stderr


def test_a_remedy_whose_finding_gives_way_to_another_is_not_verified(tmp_path):
    """On torch's own logs of the demo and its mark_static re-run (Inductor): the targeted guard is
    gone, but a size-mismatch recompile of the same frame took its place, so nothing went down."""
    from tcx.core.fix.candidates import candidates
    from tcx.core.fix.verify import Run, _why_not, measure
    from tcx.core.ingest.trace_log import load_trace
    from tcx.core.model import build_model
    from tcx.core.selection import whole_run
    from tcx.core.views.explain import explain
    from tcx.core.views.recompiles import analyze

    def run_of(name: str) -> Run:
        log = REPO / "tests" / "data" / "fix" / f"demo_inductor_{name}.log.gz"
        model = build_model(load_trace(log), "trace")
        selection = whole_run(model)
        ex = explain(model, selection)
        return Run(model, selection, ex, analyze(model, selection), measure(model, selection, ex), outputs="")

    def torchs_counts(name: str) -> dict[str, int]:
        log = tmp_path / f"{name}.log"
        log.write_bytes(
            gzip.decompress((REPO / "tests" / "data" / "fix" / f"demo_inductor_{name}.log.gz").read_bytes())
        )
        return counts(read_torch_trace(log))

    baseline, after = run_of("baseline"), run_of("mark_static")
    assert torchs_counts("baseline") == torchs_counts("mark_static") == figures(after.figures.to_json())
    [static] = [r for r in candidates(baseline.ex, baseline.recompiles, False) if "mark_static" in r.change]
    why = _why_not(static, baseline, after, True, None)
    assert why == ["nothing went down: as many graph breaks, graphs and recompiles as before"]
    assert not any("the finding stayed" in w for w in why)  # the targeted guard itself is gone
