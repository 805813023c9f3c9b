"""explain and check renderers on a hand-written recording (events as the recorder writes them).

Torch-free. Text from programs and logs is data: rich markup prints literally and terminal
control sequences are neutralised in every format.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from tcx.cli.main import main
from tcx.core.errors import EXIT_BUDGET, EXIT_INPUT, EXIT_OK, UsageError
from tcx.core.ingest.recording import RecordingWriter, load_recording, write_header
from tcx.core.model import build_model
from tcx.core.views import registry as views
from tcx.core.views.check import budgets_from, evaluate
from tcx.core.views.explain import explain, to_json
from tcx.renderers.check_output import check_json, github, rule_id, sarif
from tcx.renderers.console import make_console
from tcx.renderers.explain_terminal import render_explain
from tcx.renderers.formats import write

PRINT_BREAK = (Path(__file__).parent / "data" / "graph_break_texts" / "torch2.13_print_break.txt").read_text()
RECORDED_FILE = "/work/main/fixtures/programs/print_break.py"  # recorded data, not read
PROGRAM = """\
import torch


@torch.compile
def step(x):
    x = x.sin()
    if x.sum() > 0:
        x = x + 1
    print("step", x.shape)
    return x.cos()


if __name__ == "__main__":
    step(torch.randn(4))
"""
DATA_DEPENDENT = """\
Graph break in user code at {file}:7
Graph Break Reason: Data-dependent branching
  Explanation: {explanation}
  Hint: Use `torch.cond` to express dynamic control flow.

  Developer debug context: attempted to jump with TensorVariable()

 For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0170.html

User code traceback:
  File "{file}", line 14, in <module>
    step(torch.randn(4))
  File "{file}", line 7, in {func}
    if x.sum() > 0:

NoneType: None
"""


def render_check(result, fmt, console):
    """What `tcx check --format FMT` writes (renderers/formats.py)."""
    write(views.get("check"), result, fmt, console)


def trace(key, body, cid=None, attempt=0, payload=None):
    md = {key: body}
    if cid:
        frame, comp = cid.split("/")
        md.update(frame_id=int(frame), frame_compile_id=int(comp), attempt=attempt)
    return {"kind": "trace", "md": md, "payload": payload}


def metrics(cid, co_name, file, first_line, ops, recompile_reason=None):
    body = {"compile_id": cid, "co_name": co_name, "co_filename": file, "co_firstlineno": first_line,
            "graph_op_count": ops, "fail_type": None, "fail_reason": None,
            "recompile_reason": recompile_reason, "restart_reasons": []}  # fmt: skip
    return trace("compilation_metrics", body, cid)


def program_events(file, *, func="step", explanation=None, program_exit=None, gb_type=None):
    """A run of PROGRAM: a data-dependent break in compile 0/0 (and 0/1 after a recompile), a
    print break in the resume function 1/0."""
    explanation = explanation or "Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`)."
    dd = DATA_DEPENDENT.format(file=file, func=func, explanation=explanation)
    pb = PRINT_BREAK.replace(RECORDED_FILE, file).replace(", in step\n", f", in {func}\n")
    stack = [{"file": file, "line": 14, "name": "<module>", "code": "step(torch.randn(4))"},
             {"file": file, "line": 9, "name": func, "code": 'print("step", x.shape)'}]  # fmt: skip
    typed = {"kind": "graph_break", "compile_id": "1/0", "attempt": 0, "gb_id": "GB0059",
             "gb_type": gb_type or "Failed to trace builtin operator",
             "frame": "torch_dynamo_resume_in_step_at_7", "user_stack": stack}  # fmt: skip
    return [
        {"kind": "run_start", "torch_version": "2.13.0", "backend": None, "caches": "program",
         "features": {}},
        {"kind": "compile_call", "asked": {"backend": "eager"}, "used": {"backend": "eager"}, "target": func},
        trace("str", [file, 0]),
        trace("dynamo_start", {"stack": [{"line": 14, "name": "<module>", "filename": 0, "loc": ""},
                                         {"line": 5, "name": func, "filename": 0}]}, "0/0"),
        trace("artifact", {"name": "dynamo_graph_break_reason", "encoding": "string"}, "0/0", payload=dd),
        trace("dynamo_output_graph", {}, "0/0", attempt=1, payload="class GraphModule: ..."),
        metrics("0/0", func, file, 5, 3),
        trace("dynamo_start", {"stack": [{"line": 7, "name": "torch_dynamo_resume_in_step_at_7",
                                          "filename": 0}]}, "1/0"),
        typed,
        trace("artifact", {"name": "dynamo_graph_break_reason", "encoding": "string"}, "1/0", payload=pb),
        trace("dynamo_output_graph", {}, "1/0", attempt=1, payload="class GraphModule: ..."),
        metrics("1/0", "torch_dynamo_resume_in_step_at_7", file, 7, 1),
        trace("artifact", {"name": "recompile_reasons", "encoding": "json"}, "0/1",
              payload='[\n"0/0: tensor \'x\' size mismatch at index 0. expected 4, actual 8"\n]'),
        trace("dynamo_start", {"stack": []}, "0/1"),
        trace("artifact", {"name": "dynamo_graph_break_reason", "encoding": "string"}, "0/1", payload=dd),
        trace("dynamo_output_graph", {}, "0/1", attempt=1, payload="class GraphModule: ..."),
        metrics("0/1", func, file, 5, 3, recompile_reason="0/0: tensor 'x' size mismatch"),
        trace("some_future_event", {"x": 1}, "0/1"),
        program_exit or {"kind": "program_exit", "status": "ok", "exit_code": 0},
        {"kind": "outcome", "returncode": 0, "signal": None, "timed_out": False, "output_tail": []},
        {"kind": "source", "file": file, "text": PROGRAM},
    ]  # fmt: skip


def save_recording(path: Path, events: list[dict], target: str) -> Path:
    write_header(path, target=target, argv=["tcx", "explain", target])
    writer = RecordingWriter(path)
    for event in events:
        writer.write(**event)
    writer.close()
    return path


@pytest.fixture
def recording(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    return save_recording(tmp_path / "run.tcx", program_events(str(program)), str(program))


@pytest.fixture
def explanation(recording):
    return explain(build_model(load_recording(recording)))


def render_text(ex, *, color=False, width=200) -> str:
    buf = io.StringIO()
    render_explain(ex, make_console(buf, color=color, width=width))
    return buf.getvalue()


# --- explain ----------------------------------------------------------------------------------------


def test_explain_json_counts(explanation, recording):
    doc = to_json(explanation)
    assert doc["schema"] == "tcx.explain/1" and doc["torch_version"] == "2.13.0"
    assert doc["target"] == str(recording.parent / "prog.py")
    counts = {k: doc[k] for k in ("graph_count", "graph_break_count", "unique_graph_break_count",
                                  "compile_count", "recompile_count", "failed_frame_count")}  # fmt: skip
    assert counts == {"graph_count": 3, "graph_break_count": 3, "unique_graph_break_count": 2,
                      "compile_count": 3, "recompile_count": 1, "failed_frame_count": 0}  # fmt: skip
    first, second = doc["graph_breaks"]  # worst first: the site that broke twice
    assert (first["type"], first["gb_id"], first["line"], first["occurrences"]) == (
        "Data-dependent branching", "GB0170", 7, 2)  # fmt: skip
    assert first["compile_ids"] == ["0/0", "0/1"] and first["function"] == "step"
    assert first["regions"][0]["resumed_in"] == "1/0"
    assert (second["type"], second["gb_id"], second["line"]) == (
        "Failed to trace builtin operator",
        "GB0059",
        9,
    )
    assert "reorderable_logging_functions" in second["suggestion"]
    assert doc["unknown_events"] == {"some_future_event": 1}
    assert doc["program"]["status"] == "ok"
    json.dumps(doc)


def test_explain_text(explanation):
    out = render_text(explanation)
    assert "\x1b" not in out
    assert "graphs 3  compiles 3  recompiles 1  graph breaks 3  distinct 2  failed frames 0" in out
    assert "2 distinct graph breaks (3 events): below, worst first" in out
    assert out.index("#1 Data-dependent branching  GB0170  ×2") < out.index(
        "#2 Failed to trace builtin operator  GB0059  ×1"
    )
    assert "prog.py:7 in step" in out and "prog.py:9 in step" in out
    # the excerpt comes from the recorded source, the break line marked
    assert re.search(r"❱ +9 +print\(\"step\", x\.shape\)", out)
    assert "torch.where" in out  # the remedy for data-dependent branching
    assert "backend eager" in out


HOSTILE_FILE = "evil\x1b[31m[bold red]x[/]\x07.py"
HOSTILE_EXPLANATION = (
    "boom \x1b[31mRED\x1b[0m [bold red]x[/] [link=https://e.vil]click[/link] \x07\x1b]0;title\x07 \x9b2J"
)


@pytest.fixture
def hostile(tmp_path):
    program = tmp_path / HOSTILE_FILE  # only recorded, never on disk: its source is in the recording
    exit_event = {"kind": "program_exit", "status": "exception", "exc_type": "RuntimeError[/]",
                  "message": "[red]failed\x1b[5m",
                  "traceback": "Traceback:\n  \x1b[2J[blink]x[/blink]"}  # fmt: skip
    events = program_events(str(program), func="st\x1b[7mep[/]", explanation=HOSTILE_EXPLANATION,
                            program_exit=exit_event,
                            gb_type="Bad\nType\x1b[1m, with: punctuation")  # fmt: skip
    events[-1]["text"] = PROGRAM.replace("print(", "print('\x1b[2J[red]', ")
    rec = save_recording(tmp_path / "evil.tcx", events, str(program) + "\x1b[2J")
    return explain(build_model(load_recording(rec)))


def _assert_neutralised(out: str) -> None:
    """None of the sequences planted in the data reaches the output raw (rich's own styling may)."""
    planted = (
        "\x1b[31mRED",
        "evil\x1b",
        "\x1b[2J",
        "\x1b[5m",
        "st\x1b[7m",
        "Type\x1b[1m",
        "\x1b]0;",
        "\x07",
        "\x9b",
    )
    for raw in planted:
        assert raw not in out, repr(raw)


def test_hostile_text_prints_literally_without_color(hostile):
    out = render_text(hostile)
    assert "\x1b" not in out and "\x07" not in out
    assert "[bold red]x[/]" in out  # markup is data, printed as written
    assert "[link=https://e.vil]click[/link]" in out
    assert "boom \\x1b[31mRED\\x1b[0m" in out  # the escape is shown, visibly
    assert "evil\\x1b[31m[bold red]x[/]\\x07.py" in out  # file names too
    assert "st\\x1b[7mep[/]" in out
    assert "it raised RuntimeError[/]" in out and "[red]failed\\x1b[5m" in out


def test_hostile_text_is_neutralised_with_color(hostile, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    out = render_text(hostile, color=True)
    assert "\x1b[" in out  # colour really is on: styling escapes are there
    _assert_neutralised(out)
    assert "[bold red]x[/]" in out


def test_hostile_text_in_check_formats(hostile, capsys):
    result = evaluate(hostile, {"max_graph_breaks": 0})
    for fmt in ("text", "json", "sarif", "github"):
        buf = io.StringIO()
        render_check(result, fmt, make_console(buf, color=False, width=200))
        out = buf.getvalue() + capsys.readouterr().out
        assert out.strip(), fmt
        _assert_neutralised(out)
        if fmt in ("json", "sarif"):
            json.loads(out)
        if fmt == "text":
            assert "evil\\x1b[31m[bold red]x[/]\\x07.py:9" in out
    gh = github(result)
    for line in gh.splitlines():
        assert line.startswith(("::error ", "::warning ", "::notice ")), line
    bad_type = next(ln for ln in gh.splitlines() if "Bad" in ln)
    # properties escape newline, colon and comma; the message escapes newlines
    assert "title=graph break%3A Bad%0AType\\x1b[1m%2C with%3A punctuation::" in bad_type
    assert "::Graph break: Bad%0AType\\x1b[1m, with: punctuation (GB0059)" in bad_type


# --- check ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budgets", "code", "failed"),
    [
        ({"max_graph_breaks": 2}, EXIT_BUDGET, ["--max-graph-breaks"]),
        ({"max_graph_breaks": 3}, EXIT_OK, []),
        ({"max_unique_graph_breaks": 1, "max_recompiles": 1}, EXIT_BUDGET, ["--max-unique-graph-breaks"]),
        ({"max_graphs": 3, "max_failed_frames": 0, "max_recompiles": 0}, EXIT_BUDGET, ["--max-recompiles"]),
        ({"max_graphs": 3, "max_failed_frames": 0}, EXIT_OK, []),
    ],
)
def test_check_verdicts(explanation, budgets, code, failed):
    result = evaluate(explanation, budgets)
    assert result.exit_code == code
    assert [v.option for v in result.failed] == failed
    doc = check_json(result)
    assert doc["schema"] == "tcx.check/1" and doc["passed"] is (code == EXIT_OK)
    assert {b["option"]: b["exceeded"] for b in doc["budgets"]} == {
        "--" + k.replace("_", "-"): ("--" + k.replace("_", "-")) in failed for k in budgets
    }


def test_check_fails_a_run_made_with_an_override_unless_it_is_accepted(tmp_path):
    program = tmp_path / "prog.py"
    events = program_events(str(program))
    events[0] = {**events[0], "backend": "eager"}  # recorded with --backend eager
    events[1] = {**events[1], "asked": {}}  # the program asks torch.compile's default (inductor)
    ex = explain(build_model(load_recording(save_recording(tmp_path / "r.tcx", events, str(program)))))
    refused = evaluate(ex, {"max_graph_breaks": 10})
    assert refused.exit_code == EXIT_INPUT and not refused.passed
    assert refused.not_as_program == ["backend eager (the program asks for inductor)"]
    assert evaluate(ex, {"max_graph_breaks": 10}, accepted={"backend": "eager"}).exit_code == EXIT_OK
    assert evaluate(ex, {"max_graph_breaks": 1}).exit_code == EXIT_BUDGET  # a failed budget still says 1


def test_check_text(explanation):
    buf = io.StringIO()
    render_check(
        evaluate(explanation, {"max_graph_breaks": 1, "max_graphs": 5}),
        "text",
        make_console(buf, color=False),
    )
    out = buf.getvalue()
    assert "FAIL  graph breaks: 3 (budget --max-graph-breaks 1)" in out
    assert "  ok  graphs: 3 (budget --max-graphs 5)" in out
    assert "check failed: graph breaks 3 > 1" in out
    buf = io.StringIO()
    render_check(evaluate(explanation, {"max_graph_breaks": 3}), "text", make_console(buf, color=False))
    assert "check passed" in buf.getvalue()


def test_budgets_need_one_and_no_negatives():
    with pytest.raises(UsageError, match="at least one budget"):
        budgets_from({"max_graph_breaks": None})
    with pytest.raises(UsageError, match="--max-recompiles must be 0 or more"):
        budgets_from({"max_recompiles": -1})
    assert budgets_from({"max_graph_breaks": 0, "max_graphs": None}) == {"max_graph_breaks": 0}


def test_sarif(explanation, capsys):
    render_check(evaluate(explanation, {"max_graph_breaks": 0}), "sarif", make_console(io.StringIO()))
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == "2.1.0" and "sarif-2.1.0" in doc["$schema"]
    (run,) = doc["runs"]
    assert run["tool"]["driver"]["name"] == "tcx"
    results = run["results"]
    assert [r["ruleId"] for r in results] == [
        "tcx/graph-break/data-dependent-branching",
        "tcx/graph-break/failed-to-trace-builtin-operator",
    ]
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} == {r["ruleId"] for r in results}
    for res, line in zip(results, (7, 9), strict=True):
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"].endswith("/prog.py")
        assert loc["region"]["startLine"] == line
        assert res["level"] == "error"
        assert res["message"]["text"].startswith("Graph break: ")
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert rules["tcx/graph-break/data-dependent-branching"]["helpUri"].endswith("/gb/gb0170.html")
    # within budget the same breaks are warnings
    assert {
        r["level"] for r in sarif(evaluate(explanation, {"max_graph_breaks": 5}))["runs"][0]["results"]
    } == {"warning"}


def test_sarif_ids_and_fingerprints_are_stable(tmp_path, explanation):
    # the same breaks recorded in another run (a different recording file) get the same ids
    program = tmp_path / "prog.py"
    other = save_recording(tmp_path / "again.tcx", program_events(str(program)), str(program))
    again = explain(build_model(load_recording(other)))
    first = sarif(evaluate(explanation, {"max_graph_breaks": 0}))["runs"][0]["results"]
    second = sarif(evaluate(again, {"max_graph_breaks": 0}))["runs"][0]["results"]
    assert [r["ruleId"] for r in first] == [r["ruleId"] for r in second]
    assert [r["partialFingerprints"] for r in first] == [r["partialFingerprints"] for r in second]
    assert len({r["partialFingerprints"]["tcxGraphBreak/v1"] for r in first}) == 2
    assert rule_id("Failed to trace builtin operator") == "tcx/graph-break/failed-to-trace-builtin-operator"
    assert (
        rule_id("Call to `torch._dynamo.graph_break()`") == "tcx/graph-break/call-to-torch-dynamo-graph-break"
    )
    assert rule_id("???") == "tcx/graph-break/graph-break"


def test_sarif_uri_is_a_valid_uri_reference(tmp_path):
    program = tmp_path / "my model#1.py"
    rec = save_recording(tmp_path / "r.tcx", program_events(str(program)), str(program))
    doc = sarif(evaluate(explain(build_model(load_recording(rec))), {"max_graph_breaks": 0}))
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.endswith("/my%20model%231.py")


def test_github_annotations(explanation):
    out = github(evaluate(explanation, {"max_graph_breaks": 0}))
    lines = out.splitlines()
    assert out.endswith("\n") and len(lines) == 3
    assert (
        lines[0].startswith("::error file=")
        and ",line=7,title=graph break%3A Data-dependent branching::" in lines[0]
    )
    assert lines[1].startswith("::error file=") and ",line=9," in lines[1]
    assert lines[2] == "::error title=tcx check::graph breaks: 3 exceeds --max-graph-breaks 0"
    passed = github(evaluate(explanation, {"max_graph_breaks": 10})).splitlines()
    assert [ln.split(" ", 1)[0] for ln in passed] == ["::warning", "::warning", "::notice"]


def test_check_exit_codes_from_the_command_line(recording, capsys):
    with pytest.raises(SystemExit) as over:
        main(["check", str(recording), "--max-graph-breaks", "2", "--format", "json"])
    assert over.value.code == EXIT_BUDGET
    assert json.loads(capsys.readouterr().out)["passed"] is False
    with pytest.raises(SystemExit) as within:
        main(["check", str(recording), "--max-graph-breaks", "3", "--format", "github"])
    assert within.value.code == EXIT_OK
    assert capsys.readouterr().out.splitlines()[-1] == "::notice title=tcx check::all budgets met"
