"""`tcx fix`'s other remedy kinds, its order and its safety: each remedy re-run for real on the CPU
(the eager backend), every count compared with torch's own TORCH_TRACE log of that very run
(`--keep-logs`, read by the tiny independent parser in conftest.py).

- the dynamism remedies of a size recompile (mark_dynamic, maybe_mark_dynamic, shapes_spec,
  dynamic=True), and mark_static on a guard of a symbolic size;
- recompile_limit raised above what a frame needed; suppress_errors listed, never run;
- the order `--max-runs` takes: the findings' compile seconds (torch's compilation metrics);
- the verified remedies run once together (combined);
- `--isolate`: a program that writes next to itself leaves its folder as it was.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import PROGRAMS, compile_id, read_torch_trace, run_tcx, shared_value, torch_trace_records
from fix_runs import counts, figures, fix_json, recompile_reasons, remedy

pytestmark = [pytest.mark.torch]

OPTIONS = PROGRAMS / "fix_options"


def torch_compile_seconds(trace: Path) -> dict[str, float]:
    """Each compile id's entire_frame_compile_time_s, as torch's compilation_metrics say."""
    return {
        compile_id(md): md["compilation_metrics"].get("entire_frame_compile_time_s") or 0.0
        for name, md, _ in torch_trace_records(trace)
        if name == "compilation_metrics"
    }


def fixed(program: str) -> tuple[dict, Path]:
    """`tcx fix OPTIONS/PROGRAM` and its logs, once per session (conftest.shared_value)."""
    return shared_value(
        f"fix options/{program}",
        lambda folder: (fix_json(OPTIONS / program, folder / "logs"), folder / "logs"),
    )


@pytest.fixture
def sizes() -> tuple[dict, Path]:
    return fixed("batch_sizes.py")


def test_the_baseline_recompiles_on_the_batch_size_as_torch_logs_it(sizes):
    doc, logs = sizes
    assert figures(doc["before"]) == counts(read_torch_trace(logs / "baseline"))
    assert any("tensor 'x' size mismatch at index 0" in r for r in recompile_reasons(logs / "baseline"))


@pytest.mark.parametrize(
    "change", ["._dynamo.mark_dynamic(x, 0)", "maybe_mark_dynamic(x, 0)", "shapes_spec="]
)
def test_each_marking_remedy_removes_the_recompile_in_torchs_log_of_its_run(sizes, change):
    doc, _ = sizes
    r = remedy(doc, change)
    assert r["kind"] == "dynamism" and r["finding"]["site"]["arg"] == "x" and r["finding"]["site"]["dim"] == 0
    after = Path(r["trace_log"])
    assert figures(r["after"]) == counts(read_torch_trace(after))
    assert recompile_reasons(after) == []  # torch compiled score once
    assert r["verified"] is True and r["outputs_match"] is True, r["why_not"]


def test_shapes_spec_is_written_as_torchs_own_spec_types(sizes):
    doc, _ = sizes
    r = remedy(doc, "shapes_spec=")
    assert r["change"] == 'torch.compile(score, shapes_spec={"x": TensorSpec([ShapeVar("x_0"), STATIC])})'


def test_dynamic_true_trades_the_recompile_for_a_duck_sizing_one_and_is_not_verified(sizes):
    doc, _ = sizes
    r = remedy(doc, "dynamic=True")
    after = Path(r["trace_log"])
    assert figures(r["after"]) == counts(read_torch_trace(after)) and r["after"]["recompiles"] == 1
    # torch's own reason: x's size 16 met w's size 16, so the symbolic graph's duck-sizing guard failed
    assert any("w.size()[1] == x.size()[0]" in reason for reason in recompile_reasons(after))
    assert r["verified"] is False and "a new recompile appeared" in r["why_not"]


def test_the_order_is_the_findings_compile_seconds_in_torchs_metrics(sizes):
    doc, logs = sizes
    assert "compile seconds" in doc["order"]["basis"]
    seconds = torch_compile_seconds(logs / "baseline")
    for r in doc["remedies"]:
        ids = {cid for f in r["findings"] for cid in f["compile_ids"]}
        assert ids and r["cost_s"] == pytest.approx(sum(seconds[cid] for cid in ids), abs=1e-3)
    # one finding here: its remedies run in the order they are preferred, dynamic=True last
    changes = [r["change"] for r in doc["remedies"]]
    assert [c.split("(")[0] for c in changes] == [
        "torch._dynamo.mark_dynamic",
        "torch._dynamo.maybe_mark_dynamic",
        "torch.compile",
        "torch.compile",
    ]
    assert "dynamic=True" in changes[-1]


@pytest.fixture
def limit() -> tuple[dict, Path]:
    return fixed("recompile_limit.py")


def test_recompile_limit_raised_above_what_the_frame_needed_keeps_every_call_compiled(limit):
    doc, logs = limit
    baseline = read_torch_trace(logs / "baseline")
    assert figures(doc["before"]) == counts(baseline)
    assert len(baseline.failed) == 1  # torch refused one compile: the recompile limit (8)
    r = remedy(doc, "recompile_limit")
    # 8 cache entries + the 2 calls that fell back to eager
    assert (
        r["change"] == "torch._dynamo.config.recompile_limit = 10"
        and r["finding"]["kind"] == "recompile_limit"
    )
    after = read_torch_trace(Path(r["trace_log"]))
    assert figures(r["after"]) == counts(after)
    assert after.failed == set() and after.graphs == 10  # torch compiled every one of the ten names
    assert r["verified"] is True and r["outputs_match"] is True, r["why_not"]


def test_mark_static_on_a_symbolic_size_is_run_and_reported_as_worse(tmp_path):
    logs = tmp_path / "logs"
    doc = fix_json(OPTIONS / "padded.py", logs)
    assert figures(doc["before"]) == counts(read_torch_trace(logs / "baseline"))
    r = remedy(doc, "mark_static(x, 0)")
    assert r["finding"]["what"].startswith("guard on a symbolic size")
    after = read_torch_trace(Path(r["trace_log"]))
    assert figures(r["after"]) == counts(after)
    # on torch 2.13 a static dimension compiles once per size: torch logged more recompiles
    assert after.recompiles > doc["before"]["recompiles"]
    assert r["verified"] is False and "more recompiles" in r["why_not"]


def test_suppress_errors_is_listed_for_information_and_never_run(tmp_path):
    proc = run_tcx("fix", str(OPTIONS / "fullgraph_print.py"), "--no-save", "--format", "json")
    assert proc.returncode == 3, proc.stderr[-2000:]  # the program failed: torch.compile raised
    doc = json.loads(proc.stdout)
    r = remedy(doc, "suppress_errors = True")
    assert r["ran"] is False and r["verified"] is False
    assert "information only" in r["why_not"] and "hides the failure" in r["why_not"]


def test_a_remedy_the_installed_torch_lacks_is_listed_as_not_available(monkeypatch):
    import torch

    from tcx.core.recorder.compat_fix import missing_remedies

    assert missing_remedies() == {}  # torch 2.13 has every one
    monkeypatch.delattr(torch._dynamo, "maybe_mark_dynamic")
    monkeypatch.setattr(torch, "compile", lambda model=None, *, dynamic=None: model)
    missing = missing_remedies()
    assert set(missing) == {"maybe_mark_dynamic", "shapes_spec"}
    assert missing["shapes_spec"].endswith(f"is not available on torch {torch.__version__}")


@pytest.fixture
def together() -> tuple[dict, Path]:
    return fixed("two_breaks.py")


def test_the_verified_remedies_run_together_with_torchs_counts(together):
    doc, logs = together
    assert figures(doc["before"]) == counts(read_torch_trace(logs / "baseline"))
    assert (
        remedy(doc, "capture_scalar_outputs")["verified"] and remedy(doc, "reorderable_logging")["verified"]
    )
    combined = doc["combined"]
    assert combined is not None and combined["trace_log"] == str(logs / "combined")
    # one remedy per break (the print's: the config or the rewrite that moves it, whichever gained more)
    lines = {f["site"]["line"] for f in combined["findings"]}
    assert "capture_scalar_outputs" in combined["change"] and lines == {10, 11}
    torch_counts = counts(read_torch_trace(logs / "combined"))
    assert figures(combined["before"]) == figures(doc["before"])
    assert figures(combined["after"]) == torch_counts
    assert torch_counts["graph_breaks"] == 0 and torch_counts["graphs"] == 1  # one graph, no break left
    assert combined["verified"] is True and combined["outputs_match"] is True, combined["why_not"]


def copy_of(program: str, folder: Path) -> Path:
    folder.mkdir()
    shutil.copy(OPTIONS / program, folder / program)
    return folder / program


def test_isolate_leaves_the_programs_folder_as_it_was(tmp_path):
    program = copy_of("writes_file.py", tmp_path / "prog")
    logs = tmp_path / "logs"
    doc = fix_json(program, logs, "--isolate")
    assert sorted(p.name for p in program.parent.iterdir()) == ["writes_file.py"]  # nothing written there
    r = remedy(doc, "reorderable_logging_functions")
    assert r["finding"]["site"]["file"] == str(program)  # named as the user's file, not the copy's
    assert figures(r["after"]) == counts(read_torch_trace(Path(r["trace_log"]))) and r["verified"] is True
    assert doc["target"] == str(program) and "a fresh copy of" in doc["runs_in"]


def test_without_isolate_the_program_writes_where_it_is_and_the_output_says_so(tmp_path):
    program = copy_of("writes_file.py", tmp_path / "prog")
    proc = run_tcx("fix", str(program), "--no-save", "--max-runs", "0")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (program.parent / "written_by_program.txt").is_file()  # the baseline ran in place
    assert "files it writes land where it writes them" in " ".join(proc.stdout.split())


def test_isolate_refuses_a_module_target_with_exit_code_2():
    proc = run_tcx("fix", "json.tool:main", "--isolate")
    assert proc.returncode == 2 and "--isolate copies the program's folder" in proc.stderr
    assert "Traceback" not in proc.stderr
