"""`tcx export` on the logs torch writes of an export program — a plain TORCH_TRACE log, a
TORCH_DTRACE directory (with draft_export's own log in it) — against torch's own outcome of the
same program (what it printed about each call), torch's records read by a reader of the tests'
own (tests/export_truth.py), and tcx's live run of the program.

The logs are committed (fixtures/torch-trace/export/, made by its make_logs.sh on torch 2.13):
offline tests run no torch. One live run of `shapes.py` (with TORCH_DTRACE set, so torch writes a
fresh log of the same run) checks live against the logs, and the fresh log against the committed
one (torch drift). deploy.py's live run is tests/test_export.py's.
"""

from __future__ import annotations

import functools
import getpass
import json
from pathlib import Path

import pytest
from conftest import PROGRAMS, run_tcx
from export_truth import (
    EXPORT_LOGS,
    assert_log_agrees,
    log_records,
    program_file,
    program_outcomes,
    short,
)

EXPORT = PROGRAMS / "export"
PROGRAMS_WITH_LOGS = ("deploy", "shapes", "data_dependent_if")
ENV = {"NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb", "FORCE_COLOR": ""}


def source_line(program: Path, marker: str) -> int:
    (line,) = [i for i, text in enumerate(program.read_text().splitlines(), start=1) if marker in text]
    return line


@functools.cache
def offline(name: str, kind: str) -> dict:
    """tcx's reading of a committed log directory (`trace`: TORCH_TRACE, `dtrace`: TORCH_DTRACE)."""
    proc = run_tcx("export", str(EXPORT_LOGS / name / kind), "--format", "json", env=ENV)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def calls(name: str) -> list[tuple[str, str]]:
    """Each export call of the program and how it ended, in torch's words (its printed outcome)."""
    return program_outcomes((EXPORT_LOGS / name / "program.stdout").read_text())


def failure_records(directory: Path) -> int:
    """The failures torch recorded in a log: a strict export's failed Dynamo capture
    (`compilation_metrics` with a fail_type) and a failed non-strict trace (`make_fx_fail_partial`)."""
    return sum(
        1
        for name, md, _ in log_records(directory)
        if (name == "compilation_metrics" and md[name].get("fail_type"))
        or (name == "artifact" and md[name]["name"] == "make_fx_fail_partial")
    )


@pytest.mark.parametrize("name", PROGRAMS_WITH_LOGS)
def test_a_dtrace_log_holds_every_call_and_how_it_ended(name):
    """TORCH_DTRACE: every call of the program (draft_export's in its own log), each outcome torch's,
    each exception where torch logged one and named as missing where it did not."""
    doc = offline(name, "dtrace")
    truth = calls(name)
    assert len(doc["exports"]) == len(truth)
    for export, (label, outcome) in zip(doc["exports"], truth, strict=True):
        assert export["api"] == ("draft_export" if label.startswith("draft ") else "export"), label
        assert export["ok"] is (outcome == "ok"), label
        if export["exc_type"]:
            assert short(export["exc_type"]) == outcome, label
        elif outcome != "ok":
            assert any(lack.startswith("the exception") for lack in export["log_lacks"]), label
        assert all(i["line"] is not None for i in export["failures"]), label
    drafts = [label for label, _ in truth if label.startswith("draft ")]
    assert (doc["notes"] == []) is bool(drafts)  # draft_export's logs are in the directory, else where


@pytest.mark.parametrize("name", PROGRAMS_WITH_LOGS)
def test_a_plain_log_holds_the_calls_before_draft_export_and_the_failures_torch_recorded(name):
    """TORCH_TRACE: the calls up to the first draft_export (which takes torch's trace for itself);
    a call is failed where torch recorded its failure, and its outcome is named as missing elsewhere."""
    doc = offline(name, "trace")
    truth = calls(name)
    first_draft = next((i for i, (label, _) in enumerate(truth) if label.startswith("draft ")), len(truth))
    before_draft = truth[:first_draft]
    assert len(doc["exports"]) == len(before_draft)
    for export, (label, outcome) in zip(doc["exports"], before_draft, strict=True):
        assert export["logged_as"] == "TORCH_TRACE"
        if export["ok"] is None:
            assert any(lack.startswith("how the call ended") for lack in export["log_lacks"]), label
        else:
            assert export["ok"] is (outcome == "ok"), label
        if export["exc_type"]:
            assert short(export["exc_type"]) == outcome, label
    failed = [e for e in doc["exports"] if e["ok"] is False]
    assert len(failed) == failure_records(EXPORT_LOGS / name / "trace") > 0
    assert "torch.export.draft_export writes its own log" in doc["notes"][0]


@pytest.mark.parametrize("name", PROGRAMS_WITH_LOGS)
def test_each_data_dependent_error_torch_logged_is_an_issue_at_its_line(name):
    """Each `guard_on_data_dependent_error` record (TORCH_DTRACE) is the issue of its call, with
    torch's expression and the innermost line of the program on its stack."""
    records = log_records(EXPORT_LOGS / name / "dtrace")
    files = {md["str"][1]: md["str"][0] for n, md, _ in records if n == "str"}
    logged = []
    for n, md, _ in records:
        if n == "guard_on_data_dependent_error":
            mine = [f for f in md[n]["stack"] if "fixtures/programs/" in files[f["filename"]]]
            logged.append((md[n]["expr"], program_file(files[mine[-1]["filename"]]), mine[-1]["line"]))
    ours = [
        (i["expr"], program_file(i["file"]), i["line"])
        for e in offline(name, "dtrace")["exports"]
        for i in e["failures"]
        if i["torch_type"] == "GuardOnDataDependentSymNode"
    ]
    assert ours == logged
    if name != "shapes":
        assert logged


def test_an_uncaught_failure_from_its_logs():
    """data_dependent_if.py raises out of its only export: TORCH_DTRACE logs the data-dependent
    error at the branch; a plain log, the partial graph ending there (its cause named as missing).
    tests/test_export.py checks the live run shows the same line."""
    program = EXPORT / "data_dependent_if.py"
    line = source_line(program, "# data-dependent")
    assert calls("data_dependent_if") == [("raised", "GuardOnDataDependentSymNode")]
    (dtrace,) = offline("data_dependent_if", "dtrace")["exports"]
    (issue,) = dtrace["failures"]
    assert (issue["kind"], issue["expr"], issue["line"]) == ("data-dependent branch", "Eq(u0, 1)", line)
    assert "torch.cond(" in issue["suggestion"]
    (plain,) = offline("data_dependent_if", "trace")["exports"]
    (issue,) = plain["failures"]
    assert (issue["kind"], issue["line"], plain["ok"]) == ("export error", line, False)
    assert any("TORCH_DTRACE" in lack for lack in plain["log_lacks"])


# --- one live run of shapes.py, with torch's TORCH_DTRACE log of the same run ---------------------


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The one live run of this file: tcx's view of shapes.py, and the log torch wrote meanwhile."""
    folder = tmp_path_factory.mktemp("shapes")
    env = {**ENV, "TORCH_DTRACE": str(folder / "dtrace"), "TMPDIR": str(folder)}
    proc = run_tcx("export", str(EXPORT / "shapes.py"), "--format", "json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    fresh = run_tcx("export", str(folder / "dtrace"), "--format", "json", env=ENV)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    return {"live": json.loads(proc.stdout), "fresh": json.loads(fresh.stdout), "dtrace": folder / "dtrace"}


@pytest.mark.torch
def test_live_and_every_log_of_shapes_agree(shapes):
    live = shapes["live"]["exports"]
    for export, (label, outcome) in zip(live, calls("shapes"), strict=True):
        assert label.startswith(("draft " if export["api"] == "draft_export" else "") + export["name"])
        assert (export["ok"], short(export["exc_type"]) or "ok") == (outcome == "ok", outcome)
    for logged in (offline("shapes", "dtrace"), shapes["fresh"]):
        assert len(logged["exports"]) == len(live)
        for mine, theirs in zip(logged["exports"], live, strict=True):
            assert_log_agrees(mine, theirs)
    plain = offline("shapes", "trace")["exports"]
    for mine, theirs in zip(plain, live[: len(plain)], strict=True):
        assert_log_agrees(mine, theirs)


@pytest.mark.torch
def test_the_fresh_log_is_the_committed_one(shapes):
    """torch 2.13 still writes what the committed log holds (a changed torch shows here first)."""

    def facts(doc: dict) -> list:
        return [
            (e["api"], e["ok"], e["exc_type"], [(i["kind"], i["expr"], i["line"]) for i in e["failures"]])
            for e in doc["exports"]
        ]

    assert facts(shapes["fresh"]) == facts(offline("shapes", "dtrace"))
    assert len(list(shapes["dtrace"].iterdir())) == 2  # the run's log, then draft_export's


@pytest.mark.torch
def test_every_violated_constraint_is_an_issue_at_its_own_line(shapes):
    """torch lists two specialized dims for TwoPinned: one issue each, at the line that pinned it
    (in a helper, then in forward), each the line of its guard in the guards list."""
    program = EXPORT / "shapes.py"
    lines = [source_line(program, "# a helper pins"), source_line(program, "# pins y's first dim")]
    two = [e for e in shapes["live"]["exports"] if e["name"] == "TwoPinned"]
    assert [(e["api"], e["strict"]) for e in two] == [
        ("export", False),
        ("export", True),
        ("draft_export", False),
    ]
    for export in two:
        assert [i["line"] for i in export["failures"]] == lines
        assert {i["kind"] for i in export["failures"]} == {"specialized dynamic dim"}
        guards = {(g["expr"], g["line"]) for g in export["guards_added"]}
        assert all((i["expr"], i["line"]) in guards for i in export["failures"])


@pytest.mark.torch
def test_a_guard_of_an_export_that_succeeded_is_no_issue(shapes):
    """AddXY with both dims dynamic returns its program; torch logged the guard Eq(s77, s17) that
    made the dims one (a `guard_added` with prefix eval, which tlparse lists as an issue): a guard,
    not an issue, live and from the log. Its named-Dim twin fails on it: the issue is there."""
    program = EXPORT / "shapes.py"
    line = source_line(program, "# the two dims must be equal")
    guard_records = [
        md["guard_added"]
        for n, md, _ in log_records(EXPORT_LOGS / "shapes" / "dtrace")
        if n == "guard_added" and md["guard_added"]["expr"] == "Eq(s77, s17)"
    ]
    assert guard_records and guard_records[0]["prefix"] == "eval"
    for doc in (shapes["live"], offline("shapes", "dtrace")):
        ok, named = doc["exports"][2], doc["exports"][3]
        assert ok["ok"] is True and ok["failures"] == []
        assert ("Eq(s77, s17)", line) in {(g["expr"], g["line"]) for g in ok["guards_added"]}
        assert named["ok"] is False and len(named["failures"]) == 1
    (issue,) = shapes["live"]["exports"][3]["failures"]
    assert (issue["kind"], issue["expr"], issue["line"]) == ("constraint violation", "Eq(s77, s17)", line)
    assert "dy = dx" in issue["suggestion"]  # torch's suggested fix


# --- where draft_export's log went ----------------------------------------------------------------


def test_an_empty_directory_says_where_draft_export_wrote(tmp_path):
    """A program whose first export is a draft_export leaves TORCH_TRACE empty: tcx says where
    torch put that log (`<tempdir>/export_<user>`, as torch computes it) and how many are there."""
    empty, tmp = tmp_path / "trace", tmp_path / "tmp"
    empty.mkdir()
    (tmp / f"export_{getpass.getuser()}").mkdir(parents=True)
    (tmp / f"export_{getpass.getuser()}" / "dedicated_log_torch_trace_x.log").write_text("V")
    proc = run_tcx("export", str(empty), env={**ENV, "TMPDIR": str(tmp)})
    assert proc.returncode == 4, proc.stderr  # docs/exit-codes.md: a log that cannot be read
    text = " ".join(proc.stderr.split())
    assert "is an empty directory" in text and "draft_export writes its own log" in text
    assert f"{tmp / ('export_' + getpass.getuser())} (1 log(s) there now)" in text
    proc = run_tcx("export", str(empty), env={**ENV, "TORCH_DTRACE": str(tmp_path / "dtrace")})
    assert f"here {tmp_path / 'dtrace'}" in " ".join(proc.stderr.split())


def test_a_plain_log_says_where_draft_export_wrote():
    proc = run_tcx("export", str(EXPORT_LOGS / "shapes" / "trace"), env=ENV)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "note: torch.export.draft_export writes its own log" in text
    assert "outcome not in the log" in text and "not logged how the call ended" in text
