"""parse_graph_break on real `dynamo_graph_break_reason` texts from torch 2.4 to 2.13 (no torch needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TRACE_FIXTURES

from tcx.core.ingest.trace_events import unpack
from tcx.core.ingest.trace_log import load_trace
from tcx.core.model import build_model
from tcx.core.torchtext.graph_break_text import parse_graph_break

DATA = Path(__file__).parent / "data"
TEXTS = DATA / "graph_break_texts"
TLPARSE_INPUTS = TRACE_FIXTURES / "tlparse-tests" / "inputs"


def sample(name: str) -> str:
    return (TEXTS / f"{name}.txt").read_text(encoding="utf-8")


# name: (file suffix, line, gb_type, gb_id, number of hints, frame skipped, innermost function, its code)
TORCH_2_13 = {
    "data_dependent_if": ("fixtures/programs/data_dependent_if.py", 9, "Data-dependent branching",
                          "GB0170", 3, False, "g", "if y.sum() > 0:"),
    "print_break": ("fixtures/programs/print_break.py", 9, "Failed to trace builtin operator",
                    "GB0059", 3, False, "step", 'print("step", x.shape)'),
    "loop_break": ("fixtures/programs/loop_break.py", 11, "Failed to trace builtin operator",
                   "GB0059", 3, True, "accumulate", 'print("iteration", i)'),
    "library_break": ("lib/python3.11/copy.py", 153, "Attempted to copy.deepcopy a tensor",
                      "GB4198", 1, False, "deepcopy", "y = copier(memo)"),
    "nested_break": ("fixtures/programs/nested_break.py", 7, "Call to `torch._dynamo.graph_break()`",
                     "GB0025", 1, False, "inner", "torch._dynamo.graph_break()"),
    "numpy_call": ("fixtures/programs/numpy_call.py", 10, "Data dependent operator",
                   "GB0033", 1, False, "normalize", "scale = float(np.linalg.norm(y.detach().numpy()))"),
    "item_branch": ("fixtures/programs/item_branch.py", 8,
                    "Unsupported Tensor.item() call with capture_scalar_outputs=False",
                    "GB0124", 1, False, "scale", "m = x.abs().max().item()"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(TORCH_2_13))
def test_torch_2_13_payload_fields(name):
    file, line, gb_type, gb_id, n_hints, skipped, func, code = TORCH_2_13[name]
    parsed = parse_graph_break(sample(f"torch2.13_{name}"))
    assert parsed.file.endswith(file)
    assert parsed.line == line
    assert parsed.primary.gb_type == gb_type
    assert parsed.primary.gb_id == gb_id
    assert len(parsed.primary.hints) == n_hints
    assert parsed.frame_skipped is skipped
    innermost = parsed.user_stack[-1]
    assert (innermost["name"], innermost["code"], innermost["line"]) == (func, code, line)
    assert innermost["file"] == parsed.file


@pytest.mark.parametrize("name", sorted(TORCH_2_13))
def test_preambles_and_torch_internals_stay_out_of_the_fields(name):
    parsed = parse_graph_break(sample(f"torch2.13_{name}"))
    for section in parsed.sections:
        assert not section.gb_type.startswith(("Encountered graph break", "Failed to handle graph break"))
        for field_text in (section.explanation, section.debug_context, *section.hints):
            assert "Traceback (most recent call last)" not in field_text
            assert "Stack variable source attribution" not in field_text
            assert "Hint:" not in field_text and "Developer debug context" not in field_text
    # The Python traceback torch appends after the user stack is not part of the user stack.
    assert parsed.user_stack, "no user frames parsed"
    assert not any(
        "torch/_dynamo" in fr["file"] or "torch/_subclasses" in fr["file"] for fr in parsed.user_stack
    )
    assert parsed.user_stack[0]["name"] == "<module>"


def test_explanation_keeps_its_indented_continuation():
    parsed = parse_graph_break(sample("torch2.13_data_dependent_if"))
    expl = parsed.primary.explanation
    assert expl.startswith("Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`).")
    assert "The branch condition involves a tensor computed as follows:" in expl
    assert "gt = gt(sum_1, 0)" in expl
    # dedented: the continuation keeps its relative indentation, not torch's 6-space margin
    assert "\nThe branch condition" in expl
    assert parsed.primary.debug_context == "attempted to jump with TensorVariable()"
    assert parsed.primary.hints[-1] == "Use `torch.cond` to express dynamic control flow."


def test_break_in_loop_keeps_root_cause_first_and_the_caused_break_second():
    parsed = parse_graph_break(sample("torch2.13_loop_break"))
    assert [s.gb_type for s in parsed.sections] == ["Failed to trace builtin operator", "graph break in loop"]
    assert [s.gb_id for s in parsed.sections] == ["GB0059", "GB7000"]
    assert parsed.sections[1].debug_context.startswith("frame skipped: accumulate")
    assert "print" in parsed.primary.explanation
    assert parsed.frame_skipped
    assert [fr["line"] for fr in parsed.user_stack] == [16, 11]


def test_break_inside_a_library_keeps_every_frame_in_order():
    parsed = parse_graph_break(sample("torch2.13_library_break"))
    names = [fr["name"] for fr in parsed.user_stack]
    assert names[0] == "<module>"
    assert "forward" in names
    forward = parsed.user_stack[names.index("forward")]
    assert forward["file"].endswith("fixtures/programs/library_break.py")
    assert forward["code"] == "shadow = copy.deepcopy(self.lin)"
    assert names[-1] == "deepcopy"
    assert len(parsed.user_stack) == 13


def test_nested_user_frames():
    parsed = parse_graph_break(sample("torch2.13_nested_break"))
    assert [fr["name"] for fr in parsed.user_stack] == ["<module>", "outer", "middle", "inner"]
    assert [fr["line"] for fr in parsed.user_stack] == [21, 17, 12, 7]
    assert parsed.primary.explanation == "User-inserted graph break. Message: None"


def test_chained_python_exceptions_after_the_user_stack_are_ignored():
    parsed = parse_graph_break(sample("torch2.13_numpy_call"))
    assert len(parsed.user_stack) == 2
    assert parsed.primary.gb_type == "Data dependent operator"
    assert "aten._local_scalar_dense.default" in parsed.primary.explanation


def test_torch_2_7_text_without_registry_link():
    parsed = parse_graph_break(sample("torch2.7_docs_item"))
    assert (parsed.file, parsed.line) == ("/tmp/ipykernel_230947/3495555842.py", 5)
    assert parsed.primary.gb_type == "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    assert parsed.primary.gb_id is None
    assert parsed.primary.debug_context == "call_method TensorVariable() item () {}"
    assert len(parsed.primary.hints) == 1
    # frames with no source line (frozen modules) parse with empty code and do not eat the next frame
    frozen = [fr for fr in parsed.user_stack if fr["file"] == "<frozen runpy>"]
    assert [(fr["line"], fr["code"]) for fr in frozen] == [(198, ""), (88, "")]
    assert len(parsed.user_stack) == 8
    assert parsed.user_stack[-1] == {
        "file": "/tmp/ipykernel_230947/3495555842.py",
        "line": 5,
        "name": "fn",
        "code": "return x + y.item()",
    }


def test_torch_2_4_restart_reason_is_kept_as_the_type():
    text = sample("torch2.4_restart_reason")
    parsed = parse_graph_break(text)
    assert parsed.file is None and parsed.line is None
    assert parsed.primary.gb_type == text.strip()
    assert parsed.primary.gb_id is None
    assert parsed.user_stack == []
    assert not parsed.frame_skipped


def test_torch_2_4_sample_is_what_the_tlparse_fixture_carries():
    rec = load_trace(TLPARSE_INPUTS / "comp_metrics.log")
    reasons = [
        r for e in rec.events for r in (e["md"].get("compilation_metrics") or {}).get("restart_reasons", [])
    ]
    assert sample("torch2.4_restart_reason").strip() in reasons


@pytest.mark.parametrize("log", sorted(p.name for p in (DATA / "traces").glob("*.log.gz")))
def test_every_break_in_saved_torch_2_13_logs_parses(log):
    rec = load_trace(DATA / "traces" / log)
    payloads = [
        unpack(e["payload"])  # large payloads stay compressed while a log is loaded
        for e in rec.events
        if (e["md"].get("artifact") or {}).get("name") == "dynamo_graph_break_reason"
    ]
    assert payloads
    for text in payloads:
        parsed = parse_graph_break(text)
        assert parsed.file and parsed.line
        assert parsed.primary.gb_id and parsed.primary.gb_id.startswith("GB")
        assert not parsed.primary.gb_type.startswith("Encountered")
        assert parsed.user_stack[-1]["line"] == parsed.line
    assert all(b.gb_type and not b.gb_type.startswith("Encountered") for b in build_model(rec).graph_breaks)


def test_empty_and_cut_off_texts_do_not_raise():
    assert parse_graph_break("").primary.gb_type == "unknown graph break"
    assert parse_graph_break("").user_stack == []
    full = sample("torch2.13_print_break")
    for cut in (40, 120, 400, full.index("User code traceback:") + 30):
        parsed = parse_graph_break(full[:cut])
        assert parsed.primary.gb_type
    cut = parse_graph_break(full[: full.index("User code traceback:") + 60])
    assert (cut.file or "").endswith("print_break.py") and cut.line == 9
    assert cut.primary.gb_type == "Failed to trace builtin operator"


def test_windows_path_with_drive_colon():
    text = (
        "Graph break in user code at C:\\work\\model.py:12\n"
        "Graph Break Reason: Data-dependent branching\n"
        "  Explanation: Detected data-dependent branching.\n"
        "\n"
        "User code traceback:\n"
        '  File "C:\\work\\model.py", line 12, in forward\n'
        "    if x.sum() > 0:\n"
    )
    parsed = parse_graph_break(text)
    assert (parsed.file, parsed.line) == ("C:\\work\\model.py", 12)
    assert parsed.user_stack == [
        {"file": "C:\\work\\model.py", "line": 12, "name": "forward", "code": "if x.sum() > 0:"}
    ]
