"""One Selection for every view: `TARGET:func` shows only func's compiles, graphs, kernels, guards
and calls — live (`prog.py:f`) and from a saved recording of the whole run (`run.tcx:f`).

The program compiles two functions: `f` (recompiles once) and `g` (its own graph break, guards
and kernels: `sin`, `cos`). Which compile ids are `f`'s comes from torch's own TORCH_TRACE log of
the recorded run, not from tcx. Views that need Inductor are checked on the recording made by
the one live Inductor run (`tcx report prog.py:f --save`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import PROGRAMS, run_tcx, shared_run, torch_trace_records

from tcx.core.views.registry import VIEWS

PROGRAM = str(PROGRAMS / "two_functions.py")
INDUCTOR_VIEWS = {v.name for v in VIEWS if v.fresh_compile}  # caches off: a cold compile each
G_KERNEL_OPS = ("sin", "cos")
# `tcx cost` runs the program again (compiled and eager) until its figures have 8 steady steps:
# what `:f` selects is the same in its first run, so the selection test asks for that one run
# (pooling runs is tests/test_cost_steps.py's subject).
ONE_RUN = {"cost": ["--budget", "0", "--no-eager"]}


def view_args(name: str, target: str) -> list[str]:
    if name == "check":
        return ["check", target, "--max-graph-breaks", "100", "--format", "json"]
    if name == "diff":
        return ["diff", target, target, "--format", "json"]
    return [name, target, "--format", "json"]


def run_json(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """A click warning is an error in every command the suite runs (PYTHONWARNINGS, tests/conftest.py);
    and no other warning is printed."""
    proc = run_tcx(*args, env=env)
    assert proc.returncode == 0, f"tcx {' '.join(args)} -> {proc.returncode}\n{proc.stderr}"
    assert "Warning" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def recorded() -> tuple[Path, list[str], dict[str, Any]]:
    """The one live Inductor run: `tcx report prog.py:f --save`, with torch's own log of it (made once
    per session, whichever worker asks first)."""
    run = shared_run("report", PROGRAM + ":f", "--format", "json", save=True, output=True, trace=True).ok()
    assert "Warning" not in run.stderr, run.stderr
    f_ids = sorted(
        f"{md['frame_id']}/{md['frame_compile_id']}"
        for name, md, _ in torch_trace_records(run.torch_trace)
        if name == "compilation_metrics" and md[name].get("co_name") == "f"
    )
    assert f_ids and run.recording.exists()
    return run.recording, f_ids, json.loads(run.output.read_text())


def _walk(doc: Any, key: str) -> list[Any]:
    """Every value under `key` anywhere in the document, except inside `selection`."""
    out: list[Any] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == "selection":
                continue
            if k == key and isinstance(v, list):
                out += [x for x in v if not isinstance(x, (dict, list))]
            elif k == key and not isinstance(v, dict):
                out.append(v)
            else:
                out += _walk(v, key)
    elif isinstance(doc, list):
        for v in doc:
            out += _walk(v, key)
    return out


def assert_only_f(name: str, doc: dict[str, Any], f_ids: list[str]) -> None:
    assert doc["selection"] == {"function": "f", "compile_ids": f_ids}, name
    ids = {str(c) for key in ("compile_id", "compile_ids") for c in _walk(doc, key) if c is not None}
    assert ids <= set(f_ids), f"{name} mentions compiles of other functions: {sorted(ids - set(f_ids))}"
    names = {str(n) for key in ("function", "frame", "co_name") for n in _walk(doc, key) if n}
    assert names <= {"f"}, f"{name} mentions frames other than f: {sorted(names - {'f'})}"
    kernels = {str(k) for k in _walk(doc, "name") if str(k).startswith(("cpp_", "triton_"))}
    assert not {k for k in kernels if any(op in k for op in G_KERNEL_OPS)}, f"{name}: g's kernels {kernels}"
    # Something of f's must be there (the selection is not just empty).
    present = {
        "explain": lambda d: d["compile_count"] == len(f_ids) and d["graph_break_count"] == 0,
        "check": lambda d: d["compile_count"] == len(f_ids) and d["graph_break_count"] == 0,
        "trace": lambda d: sorted({c["compile_id"] for c in d["compiles"]}) == f_ids,
        "bytecode": lambda d: sorted(f["compile_id"] for f in d["frames"]) == f_ids,
        "guards": lambda d: sorted(e["compile_id"] for e in d["entries"]) == f_ids,
        "recompiles": lambda d: d["recompile_count"] == 1 and {c["function"] for c in d["calls"]} == {"f"},
        "graphs": lambda d: sorted(c["compile_id"] for c in d["compiles"]) == f_ids,
        "fusion": lambda d: bool(d["graphs"]) and d["kernel_count"] >= 1,
        "codegen": lambda d: sorted({k["compile_id"] for k in d["kernels"]}) == f_ids,
        "cache": lambda d: sorted(c["compile_id"] for c in d["compiles"]) == f_ids,
        "report": lambda d: sorted(r["compile_id"] for r in d["pipeline"]) == f_ids,
        "diff": lambda d: d["counts"]["compile_count"]["b"] == len(f_ids) and not d["kernels_added"],
    }
    # A view added later without an entry here gets the checks above only.
    assert present.get(name, bool)(doc), f"{name}: f's facts are missing: {json.dumps(doc)[:2000]}"
    for sub_name, sub in (doc.get("views") or {}).items():  # the report's views
        assert_only_f(sub_name, sub, f_ids)


@pytest.mark.torch
@pytest.mark.inductor
@pytest.mark.parametrize("name", [v.name for v in VIEWS])
def test_every_view_from_the_saved_recording_shows_only_f(name: str, recorded) -> None:
    save, f_ids, _ = recorded
    assert_only_f(name, run_json(view_args(name, f"{save}:f")), f_ids)


@pytest.mark.torch
@pytest.mark.parametrize("name", [v.name for v in VIEWS if v.name not in INDUCTOR_VIEWS | {"diff"}])
def test_every_view_live_shows_only_f(name: str, recorded) -> None:
    """Each command's live run honours `:f`. Which frames are f's is Dynamo's decision, the same under
    `--backend eager` (f's compile ids are the Inductor run's, from torch's log of it), so only `cache`,
    whose findings are Inductor's caches, pays for Inductor; the Inductor views are checked live by
    `tcx report` (below) and every view from its recording (above)."""
    _, f_ids, _ = recorded
    backend = [] if name == "cache" else ["--backend", "eager"]
    assert_only_f(name, run_json([*view_args(name, PROGRAM + ":f"), *backend, *ONE_RUN.get(name, [])]), f_ids)


@pytest.mark.torch
@pytest.mark.inductor
def test_report_live_shows_only_f(recorded) -> None:
    _, f_ids, report = recorded
    assert_only_f("report", report, f_ids)


def test_an_unknown_function_of_a_recording_is_a_usage_error_naming_the_compiled_ones() -> None:
    recording = Path(__file__).parent / "data" / "golden" / "two_functions_inductor.tcx.gz"
    proc = run_tcx("guards", f"{recording}:nope", "--format", "json")
    assert proc.returncode == 2, proc.stderr
    assert "'nope' was not compiled" in proc.stderr and "f, g" in proc.stderr
    assert not proc.stdout
