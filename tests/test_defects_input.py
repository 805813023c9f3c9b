"""Hostile input files (issue 12, items 11-13): reported and skipped, never an internal error;
never a window onto other local files; never live HTML in the Markdown report.

Every case starts from a real log or recording in the repository and changes one thing, the way
a corrupted or crafted file would. The CLI runs in-process (no torch is imported for a file).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, TRACE_FIXTURES, run_tcx

from tcx.cli.main import main
from tcx.core.errors import EXIT_INTERNAL, EXIT_OK

COMP_FAILURE = TRACE_FIXTURES / "tlparse-tests" / "inputs" / "comp_failure.log"
TINY = REPO / "tests" / "data" / "recordings" / "tiny.tcx.gz"
SECRET = "TOKEN-d41d8cd98f00"


def tcx(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as done:
        main([*args, "--no-color", "--width", "120"] if args[0] != "completion" else list(args))
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


def show_json(capsys: pytest.CaptureFixture, path: Path) -> dict[str, Any]:
    code, out, err = tcx(capsys, "show", str(path), "--format", "json")
    assert code == EXIT_OK, (code, err)
    assert "internal error" not in err
    return json.loads(out)


# ------------------------------------------------------------------ item 11: logs


def _log_with(tmp_path: Path, event: str, change: Any) -> tuple[Path, int]:
    """comp_failure.log with the first record of `event` changed; (path, its line number)."""
    lines = COMP_FAILURE.read_text(encoding="utf-8").splitlines(keepends=True)
    for n, line in enumerate(lines):
        head, sep, body = line.partition("] ")
        if sep and f'{{"{event}"' in body[:40]:
            md = json.loads(body)
            change(md)
            lines[n] = f"{head}] {json.dumps(md)}\n"
            break
    else:
        raise AssertionError(f"no {event} record")
    path = tmp_path / "trace.log"
    path.write_text("".join(lines), encoding="utf-8")
    return path, n + 1


@pytest.mark.parametrize(
    ("event", "change", "why"),
    [
        ("dynamo_start", lambda md: md.update(rank={"r": 1}), "`rank` is an object"),
        (
            "compilation_metrics",
            lambda md: md.update(compilation_metrics=[1]),
            "`compilation_metrics` is a list",
        ),
        (
            "dynamo_start",
            lambda md: md["dynamo_start"].update(stack=True),
            "`dynamo_start.stack` is a boolean",
        ),
        (
            "compilation_metrics",
            lambda md: md["compilation_metrics"].update(co_name=7),
            ".co_name` is an integer",
        ),
        (
            "compilation_metrics",
            lambda md: md["compilation_metrics"].update(fail_type={"x": 1}),
            ".fail_type` is an object",
        ),
    ],
    ids=["rank-object", "metrics-list", "stack-bool", "co_name-int", "fail_type-object"],
)
def test_type_confused_log_record_is_reported_and_skipped(tmp_path, capsys, event, change, why):
    path, line = _log_with(tmp_path, event, change)
    doc = show_json(capsys, path)
    reported = [
        p for p in doc["problems"] if p.startswith(f"trace.log:{line}: malformed trace record skipped")
    ]
    assert reported and why in reported[0], doc["problems"]
    assert doc["graph_count"] == 1  # the rest of the log is still read
    for view in ("explain", "recompiles", "guards", "graphs", "codegen", "report"):
        code, _, err = tcx(capsys, view, str(path), "--format", "json")
        assert code != EXIT_INTERNAL and "internal error" not in err, (view, err)


# ------------------------------------------------------------------ item 11: recordings


def tiny_events() -> list[dict[str, Any]]:
    with gzip.open(TINY, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def write_recording(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def _first(events: list[dict[str, Any]], kind: str) -> int:
    return next(i for i, e in enumerate(events) if e.get("kind") == kind)


@pytest.mark.parametrize(
    ("kind", "change", "why"),
    [
        ("graph_break", lambda e: e.update(kind=["graph_break"]), "`kind` is a list"),
        ("source", lambda e: e.update(file=[e["file"]]), "`file` is a list"),
        ("graph_break", lambda e: e["user_stack"][-1].pop("line"), "`user_stack[1].line` is missing"),
        ("frame_call", lambda e: e["args"][0].update(shape="4"), "`args[0].shape` is a string"),
    ],
    ids=["kind-list", "file-list", "frame-without-line", "shape-string"],
)
def test_type_confused_recording_event_is_reported_and_skipped(tmp_path, capsys, kind, change, why):
    events = tiny_events()
    i = _first(events, kind)
    change(events[i])
    path = write_recording(tmp_path / "run.tcx", events)
    doc = show_json(capsys, path)
    reported = [p for p in doc["problems"] if p.startswith(f"run.tcx:{i + 1}: malformed ")]
    assert reported and why in reported[0], doc["problems"]
    assert doc["graph_break_count"] == 2  # from the trace events, which are intact
    for view in ("recompiles", "guards", "trace", "bytecode", "fusion", "codegen", "report"):
        code, _, err = tcx(capsys, view, str(path), "--format", "json")
        assert code != EXIT_INTERNAL and "internal error" not in err, (view, err)


def test_many_malformed_events_are_counted_not_listed(tmp_path, capsys):
    events = tiny_events()
    events[1:1] = [{"kind": "frame_call", "index": "x"}] * 50
    doc = show_json(capsys, write_recording(tmp_path / "run.tcx", events))
    malformed = [p for p in doc["problems"] if "malformed" in p]
    assert len(malformed) == 21 and malformed[-1] == "run.tcx: 50 malformed events in all were skipped"


@pytest.mark.parametrize(
    "line",
    ["[" * 5000 + "]" * 5000, '{"kind": "log", "n": ' + "9" * 5000 + "}"],
    ids=["nested-too-deeply", "huge-integer"],
)
def test_pathological_json_line_is_a_reported_problem(tmp_path, capsys, line):
    events = [json.dumps(e) for e in tiny_events()]
    events.insert(3, line)
    path = tmp_path / "run.tcx"
    path.write_text("\n".join(events) + "\n", encoding="utf-8")
    assert "run.tcx:4: not a JSON event" in show_json(capsys, path)["problems"]
    log = COMP_FAILURE.read_text(encoding="utf-8").splitlines(keepends=True)
    log.insert(20, f"V1206 15:20:13.928000 1543231 x.py:1] {line}\n")
    (tmp_path / "trace.log").write_text("".join(log), encoding="utf-8")
    problems = show_json(capsys, tmp_path / "trace.log")["problems"]
    assert any(p.startswith("trace.log:21: corrupted JSON") for p in problems), problems


def test_lone_surrogate_escape_is_shown_escaped(tmp_path, capsys):
    """`"\\ud800"` in a recording's JSON decodes to a lone surrogate, which cannot be printed."""
    events = tiny_events()
    events[_first(events, "graph_break")]["gb_type"] = "bad \ud800 type"
    path = tmp_path / "run.tcx"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")  # ensure_ascii
    for args in (["show", str(path)], ["show", str(path), "--format", "json"], ["report", str(path)]):
        code, out, err = tcx(capsys, *args)
        assert code == EXIT_OK and "internal error" not in err, (args, err)
    assert "\\ud800" in out


def test_header_field_of_the_wrong_type_is_ignored(tmp_path, capsys):
    events = tiny_events()
    events[0]["target"] = ["not", "a", "path"]
    doc = show_json(capsys, write_recording(tmp_path / "run.tcx", events))
    assert (
        "run.tcx:1: malformed header field ignored (`target` is a list, expected a string or null)"
        in (doc["problems"])
    )
    assert doc["target"] == str(tmp_path / "run.tcx")


# ------------------------------------------------------------------ item 12: local files


def _pointing_at(secret: Path, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recording's graph breaks and traced instructions moved to line 2 of `secret`."""
    for e in events:
        if e["kind"] == "graph_break":
            e["user_stack"][-1].update(file=str(secret), line=2)
        elif e["kind"] == "trace_instructions":
            for ins in e["instructions"]:
                ins.update(file=str(secret), line=2)
        elif e["kind"] == "trace" and "dynamo_graph_break_reason" in json.dumps(e["md"]):
            e["payload"] = e["payload"].replace("tests/data/recordings/tiny.py", str(secret))
    return events


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret.py"
    path.write_text(f"first = 1\npassword = '{SECRET}'\nthird = 3\n", encoding="utf-8")
    return path


OUTPUTS = [
    ["show"],
    ["explain"],
    ["trace"],
    ["report"],
    ["report", "--format", "markdown"],
    ["report", "--format", "html"],
]


@pytest.mark.parametrize(
    "other_source", [False, True], ids=["no-source-event", "source-event-for-another-path"]
)
def test_recording_cannot_print_a_local_file(tmp_path, capsys, secret_file, other_source):
    events = [e for e in _pointing_at(secret_file, tiny_events()) if e["kind"] != "source"]
    if other_source:
        events.insert(-2, {"kind": "source", "file": str(tmp_path / "elsewhere.py"), "text": "x = 1\n"})
    path = write_recording(tmp_path / "run.tcx", events)
    for args in OUTPUTS:
        code, out, err = tcx(capsys, args[0], str(path), *args[1:])
        assert code == EXIT_OK and "internal error" not in err, (args, err)
        assert SECRET not in out and SECRET not in err, args


def test_source_lines_come_from_the_snapshot_or_a_file_with_the_recorded_hash(tmp_path, capsys, secret_file):
    events = [e for e in _pointing_at(secret_file, tiny_events()) if e["kind"] != "source"]

    def shown(source: dict[str, Any]) -> str:
        path = write_recording(
            tmp_path / "run.tcx", [*events[:-2], {"kind": "source", **source}, *events[-2:]]
        )
        return tcx(capsys, "show", str(path))[1]

    sha = hashlib.sha256(secret_file.read_bytes()).hexdigest()
    # Outside the program's recorded folders (its cwd, its script's folder): never read, right hash or not.
    assert SECRET not in shown({"file": str(secret_file), "sha256": sha})
    events[0]["cwd"] = str(secret_file.parent)  # the program ran there
    assert SECRET in shown({"file": str(secret_file), "sha256": sha})  # the file on disk is the recorded one
    assert SECRET not in shown({"file": str(secret_file), "sha256": "0" * 64})  # it is not
    out = shown({"file": str(secret_file), "text": "first = 1\nrecorded = 'SNAPSHOT'\n"})
    assert "SNAPSHOT" in out and SECRET not in out  # the recording's own text, not the disk's


# ------------------------------------------------------------------ item 13: Markdown report

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"


def _outside_fences(markdown: str) -> str:
    kept, fence = [], None
    for line in markdown.splitlines():
        m = re.match(r"^(`{3,})", line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            kept.append(line)
    return "\n".join(kept)


def test_markdown_report_escapes_html(tmp_path, capsys):
    events = tiny_events()
    for e in events:
        metrics = e.get("md", {}).get("compilation_metrics") if e["kind"] == "trace" else None
        if metrics:
            metrics["co_name"] = SCRIPT
        if e["kind"] == "program_exit":
            e.update(status="exception", exc_type="RuntimeError", message=IMG, exit_code=1)
    path = write_recording(tmp_path / "run.tcx", events)
    code, out, err = tcx(capsys, "report", str(path), "--format", "markdown")
    assert code == 3 and "internal error" not in err  # the program raised
    text = _outside_fences(out)
    assert "<script" not in text and "<img" not in text, text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text  # in the pipeline table
    assert "&lt;img src=x onerror=alert(1)&gt;" in text  # in the top problems
    code, out, _ = tcx(capsys, "report", str(path), "--format", "html")
    assert "<script" not in out and "<img" not in out


def test_check_does_not_pass_a_log_with_unreadable_lines(tmp_path):
    """A corrupted line may have held a graph break: the gate cannot vouch for it (exit 4)."""
    source = REPO / "tests" / "data" / "traces" / "torch2.13_eager_demo.log.gz"
    lines = gzip.decompress(source.read_bytes()).decode().splitlines(keepends=True)
    whole = run_tcx("check", str(source), "--max-graph-breaks", "100", "--format", "json")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert json.loads(whole.stdout)["unreadable"] == []
    at = next(i for i, line in enumerate(lines) if "dynamo_graph_break_reason" in line)
    lines[at] = lines[at][:40] + "\n"  # the break's record cut short
    cut = tmp_path / "cut.log"
    cut.write_text("".join(lines))
    proc = run_tcx("check", str(cut), "--max-graph-breaks", "100")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "could not be read" in proc.stdout and "check failed" in proc.stdout
