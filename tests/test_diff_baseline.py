"""`tcx diff` between runs and `tcx check --baseline`: the same program with and without a print."""

from __future__ import annotations

import json

import pytest
from conftest import PROGRAMS, REPO, TRACE_FIXTURES, run_tcx

pytestmark = pytest.mark.torch

PRINT_LINE = '    print("step done")  # a side effect in the middle of the graph\n'


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Recordings of demo.py with its print (after) and without it (before), same file name."""
    source = (PROGRAMS / "demo.py").read_text()
    assert PRINT_LINE in source
    out = {}
    for name, text in (("before", source.replace(PRINT_LINE, "")), ("after", source)):
        folder = tmp_path_factory.mktemp(name)
        (folder / "demo.py").write_text(text)
        save = folder / "run.tcx"
        # Both sides take the same explicit fast path (eager): what diff compares is their difference.
        proc = run_tcx(
            "explain", str(folder / "demo.py"), "--backend", "eager", "--save", str(save), "--format", "json"
        )
        assert proc.returncode == 0, proc.stderr
        out[name] = save
    return out


def test_diff_lists_exactly_the_print_break_as_added(runs):
    proc = run_tcx("diff", str(runs["before"]), str(runs["after"]), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [b["type"] for b in doc["graph_breaks_added"]] == ["Failed to trace builtin operator"]
    assert doc["graph_breaks_added"][0]["code"].startswith('print("step done")')
    assert doc["graph_breaks_removed"] == []  # the .item() break moved a line down: still matched
    assert doc["counts"]["graph_break_count"]["delta"] == 1
    assert any("new graph break" in r for r in doc["regressions"])


def test_fail_on_regression_only_when_worse(runs):
    worse = run_tcx("diff", str(runs["before"]), str(runs["after"]), "--fail-on-regression")
    assert worse.returncode == 1
    assert "Failed to trace builtin operator" in worse.stdout
    better = run_tcx(
        "diff", str(runs["after"]), str(runs["before"]), "--fail-on-regression", "--format", "json"
    )
    assert better.returncode == 0
    assert [b["type"] for b in json.loads(better.stdout)["graph_breaks_removed"]] == [
        "Failed to trace builtin operator"
    ]
    md = run_tcx("diff", str(runs["before"]), str(runs["after"]), "--format", "markdown").stdout
    counts = json.loads(run_tcx("diff", str(runs["before"]), str(runs["after"]), "--format", "json").stdout)
    a, b = counts["counts"]["graph_break_count"]["a"], counts["counts"]["graph_break_count"]["b"]
    assert md.startswith("### tcx diff") and f"| graph breaks | {a} | {b} | +1 |" in md
    assert "compiled differently" not in md  # both sides took the same override


def test_baseline_fails_only_when_worse(runs, tmp_path):
    base = tmp_path / "baseline.json"
    eager = ("--backend", "eager")  # the recordings took that fast path: the check accepts it
    wrote = run_tcx("check", str(runs["before"]), "--write-baseline", str(base), *eager)
    assert wrote.returncode == 0 and base.exists()
    same = run_tcx("check", str(runs["before"]), "--baseline", str(base), "--format", "json", *eager)
    assert same.returncode == 0, same.stdout
    assert json.loads(same.stdout)["baseline"]["worse"] == []
    worse = run_tcx("check", str(runs["after"]), "--baseline", str(base), *eager)
    assert worse.returncode == 1
    assert "worse than the baseline" in worse.stdout and "Failed to trace builtin operator" in worse.stdout


def test_baseline_errors(tmp_path, runs):
    missing = run_tcx("check", str(runs["before"]), "--baseline", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "--write-baseline" in missing.stderr
    bogus = tmp_path / "bogus.json"
    bogus.write_text("{}")
    foreign = run_tcx("check", str(runs["before"]), "--baseline", str(bogus))
    assert foreign.returncode == 4 and "not a tcx baseline" in foreign.stderr
    program = run_tcx("diff", str(PROGRAMS / "demo.py"), str(runs["before"]))
    assert program.returncode == 2 and "Record it first" in program.stderr


def test_a_baseline_file_is_a_side_of_diff_read_into_the_same_facts(runs, tmp_path):
    """A baseline written from run A, compared with run B, says what diff of the two runs says."""
    base = tmp_path / "baseline.json"
    wrote = run_tcx("check", str(runs["before"]), "--write-baseline", str(base), "--backend", "eager")
    assert wrote.returncode == 0, wrote.stderr
    from_file = run_tcx("diff", str(base), str(runs["after"]), "--format", "json")
    from_runs = run_tcx("diff", str(runs["before"]), str(runs["after"]), "--format", "json")
    assert from_file.returncode == 0, from_file.stderr
    a, b = json.loads(from_file.stdout), json.loads(from_runs.stdout)
    for key in ("counts", "graph_breaks_added", "graph_breaks_removed", "kernels_compared", "regressions"):
        assert a[key] == b[key], key
    assert a["a"]["target"] == b["a"]["target"]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda d: d["counts"].update(graph_break_count="many"), "counts.graph_break_count is not a count"),
        (lambda d: d.update(graph_breaks={"type": "x"}), "'graph_breaks' is not a list"),
        (lambda d: d["graph_breaks"].append({"line": 3}), "a graph break without a type"),
        (lambda d: d.update(kernels=[7]), "a kernel without a name"),
    ],
)
def test_a_malformed_baseline_is_an_input_error_naming_what_is_wrong(runs, tmp_path, edit, says):
    base = tmp_path / "baseline.json"
    assert (
        run_tcx("check", str(runs["before"]), "--write-baseline", str(base), "--backend", "eager").returncode
        == 0
    )
    doc = json.loads(base.read_text())
    edit(doc)
    base.write_text(json.dumps(doc))
    for args in (
        ("check", str(runs["after"]), "--baseline", str(base), "--backend", "eager"),
        ("diff", str(base), str(runs["after"])),
    ):
        proc = run_tcx(*args)
        assert proc.returncode == 4, (args, proc.stdout, proc.stderr)
        assert says in proc.stderr and "Traceback" not in proc.stderr


def test_a_side_whose_program_did_not_finish_is_said_first_and_is_a_regression_on_b():
    """A saved H200 run whose program raised (RuntimeError from Inductor's CUDA-graph pools) against
    a log of a run that finished: its counts are of the part that ran, and a B that did not finish
    is worse than an A that did."""
    ok = str(TRACE_FIXTURES / "tlparse-tests" / "inputs" / "simple.log")
    failed = str(REPO / "fixtures" / "gpu" / "h200_cudagraphs_real.tcx")
    worse = run_tcx("diff", ok, failed, "--format", "json")
    doc = json.loads(worse.stdout)
    assert doc["programs_failed"] == ["B: the program did not finish (exception: RuntimeError)"]
    assert doc["regressions"][0] == "the program did not finish: RuntimeError"
    assert run_tcx("diff", ok, failed, "--fail-on-regression").returncode == 1
    better = json.loads(run_tcx("diff", failed, ok, "--format", "json").stdout)
    assert better["programs_failed"] == ["A: the program did not finish (exception: RuntimeError)"]
    assert not any("did not finish" in r for r in better["regressions"])
    text = run_tcx("diff", ok, failed).stdout
    assert "B: the program did not finish (exception: RuntimeError): its counts are of the part" in " ".join(
        text.split()
    )
