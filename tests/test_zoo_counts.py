"""The graph-break zoo: tcx's counts equal what torch's own structured trace says for the same run.

Each program is recorded once per session (`dynamo_recorded` in conftest.py); tcx's explain of
that recording is compared with torch's TORCH_TRACE log of the very same run."""

from __future__ import annotations

import json

import pytest
from conftest import run_tcx

pytestmark = pytest.mark.torch

ZOO = [
    "seed_f.py",
    "data_dependent_if.py",
    "item_branch.py",
    "print_break.py",
    "numpy_call.py",
    "nested_break.py",
    "loop_break.py",
    "library_break.py",
    "clean_module.py",
    "demo.py",
    "try_block.py",
    "models/tiny_llama.py",
]


@pytest.mark.parametrize("name", ZOO)
def test_counts_equal_torch_trace(name, explained):
    doc, trace, run = explained(name)
    assert doc["schema"] == "tcx.explain/1"
    assert doc["graph_count"] == trace.graphs
    assert doc["graph_break_count"] == trace.graph_breaks
    assert doc["unique_graph_break_count"] == len(trace.break_sites)
    assert doc["compile_count"] == len(trace.compile_ids)
    assert doc["recompile_count"] == trace.recompiles
    assert doc["failed_frame_count"] == len(trace.failed)
    assert sum(b["occurrences"] for b in doc["graph_breaks"]) == trace.graph_breaks
    for brk in doc["graph_breaks"]:
        assert brk["file"] and brk["line"], brk
        assert brk["user_stack"][-1]["line"] == brk["line"]
    # The same run read back from torch's own log (text only, no typed hook) agrees.
    offline = run_tcx("show", str(run.torch_trace), "--format", "json")
    assert offline.returncode == 0, offline.stderr
    from_log = json.loads(offline.stdout)
    for key in ("graph_count", "graph_break_count", "unique_graph_break_count", "compile_count"):
        assert from_log[key] == doc[key], key
    assert _sites(from_log) == _sites(doc)


def _sites(doc: dict) -> list[tuple]:
    return sorted(
        (b["type"], b["gb_id"], b["file"], b["line"], b["occurrences"]) for b in doc["graph_breaks"]
    )


def _only_break(doc: dict) -> dict:
    assert len(doc["graph_breaks"]) == 1, doc["graph_breaks"]
    return doc["graph_breaks"][0]


def test_data_dependent_branch_is_typed_and_resumes(explained):
    doc, _, _ = explained("data_dependent_if.py")
    brk = _only_break(doc)
    assert brk["type"] == "Data-dependent branching"
    assert brk["gb_id"] == "GB0170"
    assert brk["file"].endswith("data_dependent_if.py") and brk["line"] == 9
    assert brk["user_stack"][-1]["code"] == "if y.sum() > 0:"
    assert "torch.cond" in brk["suggestion"] and "torch.where" in brk["suggestion"]
    region = brk["regions"][0]
    assert region["graphs"] == 1 and region["resume_function"] == "torch_dynamo_resume_in_g_at_9"
    assert region["resumed_in"] is not None
    # the session's recording chose the fast path explicitly, and says its counts may differ
    assert doc["backend"]["name"] == "eager" and doc["backend"]["counts_may_differ"]


def test_loop_break_reports_the_skipped_frame(explained):
    doc, _, _ = explained("loop_break.py")
    brk = _only_break(doc)
    assert brk["frame_skipped"] is True
    assert brk["line"] == 11  # the print, the root cause, not the loop header
    assert any(c["gb_id"] == "GB7000" for c in brk["caused"])
    [failed] = doc["failed_frames"]
    assert failed["function"] == "accumulate" and "loop" in failed["kind"]


def test_nested_break_counts_each_enclosing_frame(explained):
    doc, _, _ = explained("nested_break.py")
    brk = _only_break(doc)
    assert brk["occurrences"] == 3
    assert [f["function"] for f in brk["user_stack"][-3:]] == ["outer", "middle", "inner"]
    resumed = {r["resume_function"] for r in brk["regions"]}
    assert resumed == {
        "torch_dynamo_resume_in_outer_at_17",
        "torch_dynamo_resume_in_middle_at_12",
        "torch_dynamo_resume_in_inner_at_7",
    }


def test_library_break_names_the_users_line(explained):
    doc, _, _ = explained("library_break.py")
    brk = _only_break(doc)
    assert brk["in_library"] is True
    assert brk["file"].endswith("site-packages/minilib.py")
    assert brk["entered_from"]["file"].endswith("library_break.py")
    assert brk["entered_from"]["code"] == "h = minilib.normalize(self.lin(x))"
    assert "torch.compiler.disable" in brk["suggestion"] and "print" in brk["suggestion"]


def test_item_and_print_suggestions(explained):
    doc, _, _ = explained("demo.py")
    by_type = {b["type"]: b for b in doc["graph_breaks"]}
    item = next(b for t, b in by_type.items() if "item()" in t)
    assert "capture_scalar_outputs" in item["suggestion"]
    printed = by_type["Failed to trace builtin operator"]
    assert "reorderable_logging_functions" in printed["suggestion"]


def test_clean_module_has_no_breaks(explained):
    doc, trace, _ = explained("clean_module.py")
    assert doc["graph_break_count"] == 0 and doc["graph_breaks"] == []
    assert doc["graph_count"] == 1 == trace.graphs


def test_seed_function_recompiles(explained):
    doc, trace, _ = explained("seed_f.py")
    assert doc["graph_break_count"] == 0
    assert doc["recompile_count"] == trace.recompiles == 2


def test_transformers_model_breaks_and_is_explained(explained):
    doc, trace, _ = explained("models/tiny_llama.py")
    assert doc["graph_break_count"] == trace.graph_breaks > 0
    assert doc["failed_frame_count"] == len(trace.failed)
    assert all(b["suggestion"] for b in doc["graph_breaks"])
    library = [b for b in doc["graph_breaks"] if b["in_library"]]
    assert library, "the breaks happen inside transformers"
    for brk in library:
        assert brk["entered_from"]["file"].endswith("tiny_llama.py")


def test_try_block_frame_is_reported_as_given_up(explained):
    doc, trace, _ = explained("try_block.py")
    assert doc["failed_frame_count"] == len(trace.failed) == 1
    [failed] = doc["failed_frames"]
    assert failed["function"] == "guarded"
    assert doc["graph_breaks"][0]["frame_skipped"] is True


def test_recompile_limit_frame_is_named_and_torch_warning_shown(explained):
    doc, trace, run = explained("recompiles/recompile_limit.py")
    assert doc["failed_frame_count"] == len(trace.failed) == 1
    [failed] = doc["failed_frames"]
    assert failed["function"] == "poly" and failed["kind"] == "recompile limit reached"
    assert failed["file"].endswith("recompile_limit.py")
    text = run_tcx("explain", str(run.recording)).stdout
    assert "torch warned: torch._dynamo hit config.recompile_limit" in text
