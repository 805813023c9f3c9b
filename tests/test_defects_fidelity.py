"""Issue 12, fidelity: what tcx says matches what torch said, live and from torch's log of the run.

5. a break raised through `torch._dynamo.step_unsupported()` has torch's title (GB4636), and the
   frame is reported skipped after it;
6. a guard failure whose source holds quotes and brackets keeps its source, values and kind;
7. a method decorated with `@torch.no_grad()` and compiled is a compiled frame's calls in the
   recompiles timeline, not one eager call of the decorator's wrapper.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import explain_with_trace, run_tcx

from tcx.core.torchtext.graph_break_text import parse_graph_break

DATA = Path(__file__).parent / "data"
STEP_TITLE = "Call to `torch._dynamo.step_unsupported()`"
STEP_LOG = DATA / "traces" / "torch2.13_eager_step_unsupported.log.gz"
POSITION_IDS = "tensor 'model_kwargs['position_ids']' size mismatch at index 1. expected 7, actual 8"


def json_of(*args: str) -> dict:
    proc = run_tcx(*args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def step_break(doc: dict) -> dict:
    [site] = doc["graph_breaks"]
    return site


# ---------------------------------------------------------------- 5. step_unsupported


@pytest.mark.parametrize("version", ["2.13", "2.14"])
def test_step_unsupported_text_has_torchs_title_and_skips_the_rest(version):
    path = DATA / "graph_break_texts" / f"torch{version}_step_unsupported.txt"
    text = path.read_text(encoding="utf-8")
    parsed = parse_graph_break(text)
    assert parsed.primary.gb_type == STEP_TITLE
    assert parsed.primary.gb_id == "GB4636"
    assert parsed.primary.explanation == "User-inserted step_unsupported."
    assert parsed.frame_skipped


def test_step_unsupported_offline():
    site = step_break(json_of("explain", str(STEP_LOG)))
    assert (site["type"], site["gb_id"], site["frame_skipped"]) == (STEP_TITLE, "GB4636", True)
    assert site["line"] == 12 and site["file"].endswith("fixtures/programs/step_unsupported.py")
    text = run_tcx("explain", str(STEP_LOG), "--width", "120").stdout
    assert STEP_TITLE in text and "Encountered graph break" not in text
    assert "the rest of the frame runs in eager Python" in text


@pytest.mark.torch
def test_step_unsupported_live_and_from_the_log_of_the_same_run(program, tmp_path):
    doc, _, proc = explain_with_trace(program("step_unsupported.py"), tmp_path)
    assert proc.returncode == 0, proc.stderr
    live = step_break(doc)
    assert (live["type"], live["gb_id"], live["frame_skipped"]) == (STEP_TITLE, "GB4636", True)
    offline = step_break(json_of("explain", str(tmp_path / "torch_trace")))
    keys = ("type", "gb_id", "frame_skipped", "line", "explanation", "hints")
    assert {k: offline[k] for k in keys} == {k: live[k] for k in keys}


# ---------------------------------------------------------------- 6. guard sources with quotes


def first_guard(doc: dict, compile_id: str) -> dict:
    [call] = [c for c in doc["calls"] if c["compile_id"] == compile_id]
    return call["failed_guards"][0] | {"cause": call["cause"], "remedy": call["remedy"]}


def check_position_ids(g: dict) -> None:
    assert g["guard"] == POSITION_IDS
    assert (g["kind"], g["arg"], g["dim"], g["expected"], g["actual"]) == (
        "shape",
        "model_kwargs['position_ids']",
        1,
        "7",
        "8",
    )
    assert g["cause"] == "shape specialization"
    assert "mark_dynamic(model_kwargs['position_ids'], 1)" in g["remedy"]


@pytest.mark.torch
def test_quoted_guard_source_live_and_from_the_log_of_the_same_run(program, tmp_path):
    trace_dir = tmp_path / "torch_trace"
    target = program("recompiles/guard_shapes.py")
    proc = run_tcx("recompiles", target, "--format", "json", env={"TORCH_TRACE": str(trace_dir)})
    assert proc.returncode == 0, proc.stderr
    live = json.loads(proc.stdout)
    check_position_ids(first_guard(live, "0/1"))
    dtype = first_guard(live, "0/2")
    assert (dtype["kind"], dtype["arg"], dtype["expected"], dtype["actual"]) == (
        "dtype",
        "model_kwargs['position_ids']",
        "Float",
        "Double",
    )
    assert first_guard(live, "1/3")["kind"] == "requires_grad"
    rank = live["calls"][6]["failed_guards"][1]
    assert (rank["kind"], rank["arg"], rank["expected"], rank["actual"]) == ("rank", "x", "1", "2")
    length = first_guard(live, "7/1")
    assert (length["kind"], length["cause"]) == ("length", "container length change")
    assert all(g["kind"] != "other" for c in live["calls"] for g in c["failed_guards"])
    offline = json_of("recompiles", str(trace_dir))
    check_position_ids(first_guard(offline, "0/1"))
    assert [[(g["kind"], g["arg"], g["expected"]) for g in c["failed_guards"]] for c in offline["calls"]] == [
        [(g["kind"], g["arg"], g["expected"]) for g in c["failed_guards"]]
        for c in live["calls"]
        if c["outcome"] in ("compile", "recompile")
    ]


# ---------------------------------------------------------------- 7. decorator wrappers


@pytest.mark.torch
def test_no_grad_method_is_the_compiled_frames_calls(program):
    doc = json_of("recompiles", program("recompiles/no_grad_method.py"), "--what-if", "5x8")
    calls = doc["calls"]
    assert [c["outcome"] for c in calls] == ["compile", "hit", "recompile", "hit"]
    assert [c["entry"] for c in calls] == ["0/0", "0/0", "0/1", "0/1"]
    assert doc["outcomes"]["eager"] == 0 and doc["recompile_count"] == 1
    # The frame torch compiles is the one it put around the decorator's wrapper; the timeline
    # names it and the method the program compiled, with the method's arguments.
    assert {(c["function"], c["wraps"]) for c in calls} == {("inner", "TinyLM.generate")}
    assert [a["shape"] for c in calls for a in c["args"]] == [[4, 8], [4, 8], [6, 8], [6, 8]]
    g = calls[2]["failed_guards"][0]
    assert (g["kind"], g["dim"], g["expected"], g["actual"]) == ("shape", 0, "4", "6")
    # What-if evaluates torch's guards on that frame's locals: length 5 fits the dynamic entry.
    [what_if] = doc["what_if"]
    assert (what_if["verdict"], what_if["entry"]) == ("hit", "0/1")
    text = run_tcx("recompiles", program("recompiles/no_grad_method.py"), "--width", "120").stdout
    assert "TinyLM.generate(tokens=f32[4,8]) (Dynamo's frame inner)" in text and "EAGER" not in text
