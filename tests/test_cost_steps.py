"""`tcx cost` on training loops: the unit is the program's step (forward, the backward its graphs
produced, the optimizer step, the eager code between), training and evaluation apart, figures only
with their interval and count.

Real runs on the CPU (torch 2.13), checked against the program's own time.perf_counter timing of the
same steps (fixtures/programs/cost/*.py write it when given `--times FILE`), against torch.profiler's
own Chrome trace of each profiled step (TCX_COST_PROFILER_EXPORT) and against torch's TORCH_TRACE log
of the run. The nanoGPT-style loop runs with `aot_eager` (an Inductor compile of its forward and
backward takes minutes on 2 cores; tests/test_cost_lines.py reads a recorded Inductor run). Timing is
compared as ratios of medians with a tolerance for a loaded 2-core machine.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from conftest import PROGRAMS, run_tcx, torch_trace_records

pytestmark = pytest.mark.torch
COST = PROGRAMS / "cost"
NANO = COST / "nano_train.py"
TOLERANCE = 1.10  # tcx's step time vs the program's own timing of the same steps (the goal: within 10%)


def tcx_cost(folder: Path, program: Path, *args: str, program_args: tuple[str, ...] = ()) -> dict:
    """`tcx cost PROGRAM ARGS --format json --save run.tcx`, with torch's TORCH_TRACE log, the program's
    own step timings and torch.profiler's own export of each profiled step."""
    env = {"TORCH_TRACE": str(folder / "torch_trace"), "TCX_COST_PROFILER_EXPORT": str(folder / "profiler")}
    extra = ("--", *program_args, "--times", str(folder / "times.jsonl"))
    proc = run_tcx(
        "cost",
        str(program),
        *args,
        "--format",
        "json",
        "--save",
        str(folder / "run.tcx"),
        *extra,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    times = folder / "times.jsonl"
    return {
        "doc": json.loads(proc.stdout),
        "folder": folder,
        "times": [json.loads(line) for line in times.read_text().splitlines()] if times.exists() else [],
    }


def compiled_log(folder: Path) -> Path:
    """The TORCH_TRACE log of the compiled run (the eager run compiles nothing)."""
    logs = [
        p for p in sorted((folder / "torch_trace").glob("*.log")) if "compilation_metrics" in p.read_text()
    ]
    assert len(logs) == 1, logs
    return logs[0]


def median(values: list[float]) -> float:
    return statistics.median(values)


def within(a: float, b: float, factor: float) -> bool:
    return b / factor <= a <= b * factor


def group(doc: dict, mode: str) -> dict:
    (found,) = [g for g in doc["steps"] if g["mode"] == mode]
    return found


def clean_pairs(doc: dict, g: dict, own: dict[int, float]) -> list[tuple[float, float]]:
    """(tcx's ms, the program's own ms) of the steps tcx timed. The program times a step from one
    forward call to the next; where tcx read or started a profile at a call (its own work, which tcx
    leaves out of the steps), the program's step from that call is left out of the comparison."""
    calls = {c["index"]: c for f in doc["functions"] for c in f["call_times"]}
    pairs = []
    for s in g["step_times"]:
        call = calls.get(s["index"])
        if (
            s["warmup"]
            or s["profiled"]
            or s["run"] != 0
            or not call
            or call["profiler_ns"]
            or call["profiled"]
        ):
            continue
        pairs.append((s["ms"], own[s["index"]]))
    return pairs


def own_steps(run: dict, stance: str) -> dict[int, dict]:
    """The program's own steps (index of the forward call -> kind and ms) in the run with this stance."""
    (line,) = [t for t in run["times"] if t["stance"] == stance]
    return {s["index"]: {"kind": s["kind"], "ms": s["seconds"] * 1000} for s in line["steps"]}


# --- a nanoGPT-style loop: compiled model, AdamW, evaluation under no_grad --------------------------


@pytest.fixture(scope="module")
def nano(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One run of the training loop (aot_eager), once with compilation off and once as it runs; the
    budget is 0 so each runs once (the repeats are tested on a smaller program below)."""
    folder = tmp_path_factory.mktemp("nano")
    return tcx_cost(folder, NANO, "--budget", "0", program_args=("--backend", "aot_eager"))


def test_a_training_step_is_the_programs_own_step(nano: dict) -> None:
    doc = nano["doc"]
    own = own_steps(nano, "default")
    for mode in ("grad", "no_grad"):
        g = group(doc, mode)
        pairs = clean_pairs(doc, g, {i: s["ms"] for i, s in own.items()})
        assert len(pairs) >= 5, mode
        ours, theirs = median([a for a, _ in pairs]), median([b for _, b in pairs])
        assert within(ours, theirs, TOLERANCE), (mode, ours, theirs)
    train = group(doc, "grad")
    assert doc["step_group"] == train["key"] and train["label"].startswith("training steps")
    assert doc["step_ms"] == train["step_ms"] and train["timed_steps"] >= 8
    interval = train["step_ms_interval"]
    assert interval["low"] <= doc["step_ms"] <= interval["high"] and interval["count"] == train["timed_steps"]
    phases = train["phases_ms"]
    assert phases["call"] > 0 and phases["backward"] > 0 and phases["optimizer"] > 0  # all in the step
    # every timed step holds one forward call, one backward() and one optimizer step
    for s in train["step_times"]:
        if not s["warmup"]:
            assert s["call_ms"] > 0 and s["backward_ms"] > 0 and s["optimizer_ms"] > 0
            assert s["call_ms"] + s["backward_ms"] + s["optimizer_ms"] <= s["ms"] * 1.001


def profiler_spans(folder: Path, index: int) -> dict[str, float]:
    """torch.profiler's own Chrome trace of one profiled step: ms of the ranges that delimit it."""
    trace = json.loads((folder / "profiler" / f"call{index}.json").read_text())
    wanted = {
        "tcx.step": "step",
        "tcx.call": "call",
        "tcx.backward": "backward",
        "Optimizer.step#AdamW.step": "optimizer",
    }
    out: dict[str, float] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("name") in wanted:
            key = wanted[e["name"]]
            out[key] = out.get(key, 0.0) + e["dur"] / 1000
    return out


def test_the_profiled_step_splits_as_torch_profiler_times_it(nano: dict) -> None:
    doc = nano["doc"]
    train = group(doc, "grad")
    profiled = train["profiled_steps"]
    assert len(profiled) >= 3
    spans = [profiler_spans(nano["folder"], i) for i in profiled]
    by_phase: dict[str, float] = {}
    for row in train["breakdown"]:
        by_phase[row["phase"]] = by_phase.get(row["phase"], 0.0) + row["ms_per_step"]
    theirs = {k: sum(s[k] for s in spans) / len(spans) for k in ("step", "call", "backward", "optimizer")}
    assert train["profiled_step_ms"] == pytest.approx(theirs["step"], rel=0.01)
    for phase in ("call", "backward", "optimizer"):
        assert by_phase[phase] == pytest.approx(theirs[phase], rel=0.02), phase
    assert sum(by_phase.values()) == pytest.approx(theirs["step"], rel=0.01)  # the parts add up to the step
    # the backward graph's rows belong to the compile torch logged a backward graph for
    records = torch_trace_records(compiled_log(nano["folder"]))
    with_backward = {
        f"{md['frame_id']}/{md['frame_compile_id']}"
        for name, md, _ in records
        if name == "aot_backward_graph"
    }
    backward_ids = {
        r["compile_id"] for r in train["breakdown"] if r["phase"] == "backward" and r["part"] == "graph_op"
    }
    assert backward_ids and backward_ids == with_backward


def test_training_and_evaluation_are_measured_apart(nano: dict) -> None:
    doc = nano["doc"]
    own = own_steps(nano, "default")
    train, evaluation = group(doc, "grad"), group(doc, "no_grad")
    assert {s["index"] for s in train["step_times"]} == {i for i, s in own.items() if s["kind"] == "train"}
    assert {s["index"] for s in evaluation["step_times"]} == {
        i for i, s in own.items() if s["kind"] == "eval"
    }
    assert evaluation["label"].startswith("evaluation steps") and evaluation["phases_ms"]["backward"] == 0
    assert all(s["backward_ms"] == 0 and s["optimizer_ms"] == 0 for s in evaluation["step_times"])
    # each compared with the same steps run eagerly
    eager = own_steps(nano, "force_eager")
    for g in (train, evaluation):
        steady = {s["index"] for s in g["step_times"] if not s["warmup"]}
        assert {s["index"] for s in g["eager_step_times"]} == steady
        ours = median([s["ms"] for s in g["eager_step_times"]])
        assert within(ours, median([eager[s["index"]]["ms"] for s in g["eager_step_times"]]), TOLERANCE)


def test_a_speedup_is_printed_only_with_its_interval_and_count(nano: dict) -> None:
    doc = nano["doc"]
    for g in doc["steps"]:
        interval, timed = (
            g["speedup_interval"],
            [s for s in g["step_times"] if not s["warmup"] and not s["profiled"]],
        )
        eager = median([s["ms"] for s in g["eager_step_times"]])
        assert interval["median"] == pytest.approx(eager / median([s["ms"] for s in timed]), rel=1e-6)
        if g["speedup"] is not None:
            assert (
                interval["low"] <= g["speedup"] <= interval["high"]
                and not interval["low"] <= 1.0 <= interval["high"]
            )
            assert min(len(timed), len(g["eager_step_times"])) >= 8 and g["speedup_note"] is None
        else:
            assert g["speedup_note"]
    text = run_tcx("cost", str(nano["folder"] / "run.tcx"))
    assert text.returncode == 0, text.stderr
    lines = [ln for ln in text.stdout.splitlines() if ln.strip().startswith("speedup")]
    assert len(lines) == 2
    for ln in lines:
        assert "interval" in ln or "not shown:" in ln, ln


def test_expected_recompiles_are_not_costed_per_step(nano: dict) -> None:
    doc = nano["doc"]
    records = torch_trace_records(compiled_log(nano["folder"]))
    recompiled = {
        f"{md['frame_id']}/{md['frame_compile_id']}"
        for name, md, _ in records
        if name == "artifact" and md["artifact"]["name"] == "recompile_reasons"
    }
    assert len(recompiled) == 1  # the train entry after the evaluation compiled the no_grad one
    (cid,) = recompiled
    costed = [f for f in doc["findings"] if cid in f["compile_ids"]]
    assert costed and all(f["unit"] == "once" for f in costed)
    assert any("grad mode" in (f["expected"] or "") for f in costed)
    assert not [f for f in doc["findings"] if f["unit"] == "per_step" and f["kind"] == "recompile"]
    text = run_tcx("cost", str(nano["folder"] / "run.tcx"))
    expected = text.stdout.split("Expected (not problems)", 1)[1].split("Notes", 1)[0]
    assert f"({cid})" in expected and "grad mode" in expected
    head = text.stdout.split("\n#1 ", 1)[1].split("\n\n", 1)[0] if "\n#1 " in text.stdout else ""
    assert "recompile" not in head  # whatever heads the list, it is not the expected recompile


# --- one call: nothing to time ------------------------------------------------------------------------


def test_a_one_call_run_says_why_and_trace_is_a_warning(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    run = tcx_cost(tmp_path, COST / "one_call.py", "--no-eager", "--budget", "0", "--trace", str(trace))
    doc = run["doc"]
    assert doc["step_ms"] is None and doc["speedup"] is None and doc["steps"] == []
    assert any("no step to time" in w and "scale 1×" in w for w in doc["warnings"])
    assert any(w.startswith(f"--trace {trace}") for w in doc["warnings"]) and not trace.exists()
    assert doc["compiles"] and doc["findings"][0]["expected"]  # the first compile: expected, once
    text = run_tcx("cost", str(tmp_path / "run.tcx"))
    assert "warning: no step to time" in text.stdout and " ms (95% interval" not in text.stdout


# --- --step FUNC, and the repeats within --budget ------------------------------------------------------


def test_step_names_the_step_and_the_budget_repeats_the_run(tmp_path: Path) -> None:
    """A loop of 6 steps, each two micro-batches: one run gives 4 steady steps timed without the
    profiler, fewer than a figure needs, so tcx runs the program once more (compiled, timed only)."""
    run = tcx_cost(
        tmp_path, COST / "step_function.py", "--step", "train_step", "--no-eager", "--budget", "300"
    )
    doc = run["doc"]
    assert doc["unit"] == "step function" and doc["step_function"] == "train_step"
    assert [r["stance"] for r in doc["runs"]] == ["compiled"]
    (g,) = doc["steps"]
    assert g["runs"] == 2 and g["timed_steps"] >= 8 and doc["step_ms"] is not None
    own = [line["seconds"] for line in run["times"]]
    assert len(own) == 2
    for s in g["step_times"]:  # the first call of train_step runs untimed (tcx finds the function then)
        assert 1 <= s["index"] < 6
        assert s["call_ms"] > 0 and s["backward_ms"] > 0 and s["optimizer_ms"] > 0
    pairs = [
        (s["ms"], own[s["run"]][s["index"]] * 1000)
        for s in g["step_times"]
        if not s["warmup"] and not s["profiled"]
    ]
    assert within(median([a for a, _ in pairs]), median([b for _, b in pairs]), TOLERANCE)
    # each step holds the two micro-batches' compiled calls: two forward calls per step
    calls = [c for f in doc["functions"] for c in f["call_times"]]
    assert len(calls) == 2 * 6


def test_fix_lists_the_expected_recompile_and_never_runs_it(nano: dict) -> None:
    """tcx fix's candidates from the same recording (no run): the grad-mode recompile the views call
    expected is one remedy, "nothing to change", not runnable; no other remedy targets it."""
    from tcx.core.fix.candidates import candidates
    from tcx.core.ingest.recording import load_recording
    from tcx.core.model import build_model
    from tcx.core.views.explain import explain
    from tcx.core.views.recompiles import analyze

    model = build_model(load_recording(nano["folder"] / "run.tcx"), "recording")
    remedies = candidates(explain(model), analyze(model), already_dynamic=False)
    records = torch_trace_records(compiled_log(nano["folder"]))
    recompiled = {
        f"{md['frame_id']}/{md['frame_compile_id']}"
        for name, md, _ in records
        if name == "artifact" and md["artifact"]["name"] == "recompile_reasons"
    }
    (expected,) = [r for r in remedies if r.kind == "expected"]
    assert not expected.runnable and "not tried" in (expected.why_not_run or "")
    assert {cid for f in expected.findings for cid in f.compile_ids} == recompiled
    others = [r for r in remedies if r is not expected]
    assert not any(set(f.compile_ids) & recompiled for r in others for f in r.findings)
