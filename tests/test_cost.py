"""`tcx cost`: real runs on the CPU (torch 2.13), checked against torch's own TORCH_TRACE log of the same
run (break sites, compile ids, compile times, kernels in the output code) and against the program's own
timing of the same calls (each fixture times its calls with time.perf_counter when given `--times FILE`).
These programs have no backward: a step is one call to the next (tests/test_cost_steps.py has the
training loop).

Three programs, each run once per module: a step that spends most of its time in a function Dynamo
skips (aot_eager, the eager run too), a function that recompiles every third call (eager backend), one
Inductor graph of many small kernels. Timing is compared only as ratios within generous bounds: the
machine is shared and noisy.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import PROGRAMS, TRACE_FIXTURES, read_torch_trace, run_tcx, torch_trace_records

pytestmark = pytest.mark.torch
COST = PROGRAMS / "cost"


def source_line(program: Path, marker: str) -> int:
    lines = program.read_text().splitlines()
    found = [i for i, text in enumerate(lines, start=1) if marker in text]
    assert len(found) == 1, (marker, found)
    return found[0]


def cost_run(folder: Path, program: Path, *extra: str) -> dict:
    """`tcx cost PROGRAM --format json --budget 0` (each run once: the repeats within a budget are
    tests/test_cost_steps.py's), with torch's TORCH_TRACE log and the program's own timings."""
    proc = run_tcx(
        "cost",
        str(program),
        "--format",
        "json",
        "--budget",
        "0",
        "--save",
        str(folder / "run.tcx"),
        *extra,
        "--",
        "--times",  # the program's own timings (an argument: the run keeps the suite's environment)
        str(folder / "times.jsonl"),
        env={"TORCH_TRACE": str(folder / "torch_trace")},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {
        "doc": json.loads(proc.stdout),
        "folder": folder,
        "recording": folder / "run.tcx",
        "times": [json.loads(line) for line in (folder / "times.jsonl").read_text().splitlines()]
        if (folder / "times.jsonl").exists()
        else [],
    }


def own_seconds(run: dict, stance: str) -> list[float]:
    """The program's own timing of its calls, in the run with this stance ("default" or "force_eager")."""
    lines = [t for t in run["times"] if t.get("stance", "default") == stance]
    assert len(lines) == 1, run["times"]
    return lines[0]["seconds"]


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def within(a: float, b: float, factor: float) -> bool:
    return b / factor <= a <= b * factor


# --- a step that spends most of its time in a function Dynamo skips ---------------------------------


@pytest.fixture(scope="module")
def skipped(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("skipped")
    return cost_run(folder, COST / "skipped_function.py", "--trace", str(folder / "trace.json"))


def test_the_top_finding_is_the_skipped_function_break_with_most_of_the_call(skipped: dict) -> None:
    doc = skipped["doc"]
    torch_log = read_torch_trace(skipped["folder"] / "torch_trace")
    line = source_line(COST / "skipped_function.py", "h = smooth(h)")
    # torch logged exactly this break (one site), at the line of the call to the skipped function
    assert {(Path(f).name, int(n)) for f, n, _ in torch_log.break_sites} == {("skipped_function.py", line)}
    top = doc["findings"][0]
    assert top["kind"] == "graph_break"
    assert (Path(top["site"]["file"]).name, top["site"]["line"]) == ("skipped_function.py", line)
    assert top["share"] > 0.5  # most of the step ran eagerly in the skipped function
    assert top["unit"] == "per_step"
    eager = [r for r in doc["breakdown"] if r["part"] == "eager"]
    assert eager and eager[0]["compile_id"] in top["compile_ids"] and eager[0]["user_line"]["line"] == line
    # the break's region is the compile torch logged the break in
    records = torch_trace_records(skipped["folder"] / "torch_trace")
    breaks = [md for name, md, _ in records if name == "artifact"]
    break_ids = {
        f"{md['frame_id']}/{md['frame_compile_id']}"
        for md in breaks
        if md["artifact"]["name"] == "dynamo_graph_break_reason"
    }
    assert set(top["compile_ids"]) == break_ids
    # what ran eagerly there: the skipped function's 60 matmuls per call
    assert any(d.startswith("aten::matmul ×60") for d in eager[0]["detail"]), eager[0]["detail"]


def timed_steps(group: dict) -> list[dict]:
    """The steps the figures come from: steady, timed without the profiler."""
    return [s for s in group["step_times"] if not s["warmup"] and not s["profiled"] and s["run"] == 0]


def clean_own(doc: dict, own: list[float], steps: list[dict]) -> list[tuple[float, float]]:
    """(tcx's ms, the program's own ms) of the same steps; the program's own timing of a step that
    began where tcx read or started a profile includes tcx's profiler work (tcx leaves it out)."""
    calls = {c["index"]: c for c in doc["functions"][0]["call_times"]}
    pairs = []
    for s in steps:
        call = calls.get(s["index"])
        if call and not call["profiler_ns"] and not call["profiled"]:
            pairs.append((s["ms"], own[s["index"]] * 1000))
    return pairs


def test_the_parts_add_up_to_the_measured_steps(skipped: dict) -> None:
    doc = skipped["doc"]
    (group,) = doc["steps"]
    parts = sum(r["ms_per_step"] for r in doc["breakdown"])
    assert parts == pytest.approx(group["profiled_step_ms"], rel=1e-3)  # attribution loses no time
    profiled = [s["ms"] for s in group["step_times"] if s["profiled"] and not s["warmup"]]
    assert len(profiled) >= 2
    # the profiler's clock and tcx's own timing of the same steps (the profiler's work left out of both)
    assert within(parts, sum(profiled) / len(profiled), 1.25)


def test_step_and_eager_times_agree_with_the_program_timing_the_same_calls(skipped: dict) -> None:
    doc = skipped["doc"]
    (group,) = doc["steps"]
    (function,) = doc["functions"]
    assert [w["index"] for w in function["warmup_calls"]] == [0]  # call 0 compiled: warm-up, left out
    timed = timed_steps(group)
    assert len(timed) >= 8 and 0 not in {s["index"] for s in timed}
    pairs = clean_own(doc, own_seconds(skipped, "default"), timed)
    assert len(pairs) >= 5
    assert within(median([a for a, _ in pairs]), median([b for _, b in pairs]), 1.10)
    assert doc["step_ms_interval"]["low"] <= doc["step_ms"] <= doc["step_ms_interval"]["high"]
    eager = own_seconds(skipped, "force_eager")
    eager_steps = group["eager_step_times"]
    assert {s["index"] for s in eager_steps} <= {s["index"] for s in group["step_times"] if not s["warmup"]}
    ours = median([s["ms"] for s in eager_steps])
    assert within(ours, median([eager[s["index"]] * 1000 for s in eager_steps]), 1.25)
    interval = doc["speedup_interval"]
    assert interval["count"] >= 8 and interval["low"] <= interval["median"] <= interval["high"]
    assert interval["median"] == pytest.approx(ours / median([s["ms"] for s in timed]), rel=1e-6)
    if doc["speedup"] is None:  # shown only when its interval does not cover 1.0
        assert interval["low"] <= 1.0 <= interval["high"] and "covers 1.0" in doc["speedup_note"]


def test_the_trace_labels_regions_eager_stretches_and_the_break(skipped: dict) -> None:
    trace = json.loads((skipped["folder"] / "trace.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    names = [e["name"] for e in spans]
    assert "call" in names
    call = next(e for e in spans if e["name"] == "step")
    assert any(n.startswith("compiled region ") for n in names)
    assert any(n.startswith("guards: Dynamo cache lookup") for n in names)
    stretch = [e for e in spans if e["name"].startswith("eager: Skip calling")]
    assert stretch and stretch[0]["cat"] == "eager"
    for e in spans:  # every span inside the step it belongs to
        assert call["ts"] <= e["ts"] and e["ts"] + e["dur"] <= call["ts"] + call["dur"] + 1e-3


def test_explain_and_check_use_the_measurement(skipped: dict) -> None:
    recording = str(skipped["recording"])
    explained = run_tcx("explain", recording, "--format", "json")
    assert explained.returncode == 0, explained.stderr
    site = json.loads(explained.stdout)["graph_breaks"][0]
    top = skipped["doc"]["findings"][0]
    assert site["measured_ms_per_step"] == pytest.approx(top["ms_per_step"], rel=1e-6)
    failed = run_tcx("check", recording, "--max-call-ms", "0.001")
    assert failed.returncode == 1, failed.stderr
    assert "skipped_function.py:" in failed.stdout and "--max-call-ms" in failed.stdout
    floor = run_tcx("check", recording, "--min-speedup", "1000", "--format", "json")
    verdict = json.loads(floor.stdout)["budgets"][0]
    assert floor.returncode == 1 and verdict["exceeded"] and verdict["actual"] < 1000
    text = run_tcx("cost", recording)
    assert text.returncode == 0, text.stderr
    assert "What to fix first" in text.stdout and "█" in text.stdout  # the chart


def test_the_report_ranks_by_the_measurement_and_draws_the_chart(skipped: dict, tmp_path: Path) -> None:
    recording = str(skipped["recording"])
    top = skipped["doc"]["findings"][0]
    proc = run_tcx("report", recording, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    first = report["problems"][0]
    assert first["kind"] == "graph break" and first["ms_per_step"] == pytest.approx(top["ms_per_step"])
    assert report["cost"]["schema"] == "tcx.cost/1"
    page = tmp_path / "report.html"
    proc = run_tcx("report", recording, "--format", "html", "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    section = page.read_text().split('<section id="cost">', 1)[1].split("</section>", 1)[0]
    assert "<svg" in section and "<script" not in page.read_text()


# --- a function that recompiles every third call ------------------------------------------------------


@pytest.fixture(scope="module")
def recompiling(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return cost_run(tmp_path_factory.mktemp("recompiling"), COST / "recompile_every_few.py", "--no-eager")


def test_recompiles_in_steady_state_cost_what_they_add_to_their_steps(recompiling: dict) -> None:
    doc = recompiling["doc"]
    records = torch_trace_records(recompiling["folder"] / "torch_trace")
    recompiled = {
        f"{md['frame_id']}/{md['frame_compile_id']}"
        for name, md, _ in records
        if name == "artifact" and md["artifact"]["name"] == "recompile_reasons"
    }
    seconds = {
        f"{md['frame_id']}/{md['frame_compile_id']}": md[name]["entire_frame_compile_time_s"]
        for name, md, _ in records
        if name == "compilation_metrics"
    }
    assert len(recompiled) == 4  # batch sizes 8, 16, 24, 32, 40: four recompiles
    finding = next(f for f in doc["findings"] if f["kind"] == "recompile")
    assert set(finding["compile_ids"]) == recompiled and finding["unit"] == "per_step"
    assert "mark_dynamic" in (finding["remedy"] or "")  # the recompiles view's fix
    assert doc["findings"][0]["kind"] == "recompile"  # what they add outweighs a steady step
    # what they add, computed here from the steps: each recompiling step over the steady median,
    # spread over the steps
    (group,) = doc["steps"]
    steps = group["step_times"]
    steady = median([s["ms"] for s in steps if not s["warmup"] and not s["profiled"]])
    hit = [s for s in steps if set(c.rsplit(" ", 1)[-1] for c in s["compiled"]) & recompiled]
    assert len(hit) == 4
    added = sum(max(0.0, s["ms"] - steady) for s in hit)
    assert finding["ms_per_step"] == pytest.approx(added / len(steps), rel=1e-6)
    # the first compile is a one-time cost, listed as expected, never per step
    first = next(f for f in doc["findings"] if f["compile_ids"] == ["0/0"])
    assert first["unit"] == "once" and first["expected"] and first["seconds"] == pytest.approx(seconds["0/0"])
    (function,) = doc["functions"]
    assert function["calls"] == 15
    assert len(function["warmup_calls"]) == len(seconds) == 5  # one call compiled per compile id torch logged
    share = sum(seconds[c] for c in recompiled) / sum(seconds.values())
    assert doc["recompile_share"] == pytest.approx(share)


# --- one Inductor graph of many small kernels -----------------------------------------------------------


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return cost_run(tmp_path_factory.mktemp("kernels"), COST / "small_kernels.py", "--no-eager")


@pytest.mark.inductor
def test_each_generated_kernel_is_a_row_with_its_launches_per_step(kernels: dict) -> None:
    doc = kernels["doc"]
    records = torch_trace_records(kernels["folder"] / "torch_trace")
    codes = [p for name, _, p in records if name == "inductor_output_code"]
    assert len(codes) == 1
    code = codes[0]
    defined = set(re.findall(r"^(\w+) = async_compile\.cpp_pybinding\(", code, re.M))
    call_body = code[code.index("def call(") :]
    rows = {r["name"]: r for r in doc["breakdown"] if r["part"] == "kernel"}
    assert set(rows) == defined and len(defined) >= 3
    for name, row in rows.items():
        assert row["launches_per_step"] == len(re.findall(rf"\b{name}\(", call_body)), name
        assert row["user_line"] and Path(row["user_line"]["file"]).name == "small_kernels.py"
    # each extern mm is its own row, at its own node and line (the matmul, not its input chain)
    mms = [r for r in doc["breakdown"] if r["part"] == "extern" and r["name"] == "aten::mm"]
    mm_calls = len(re.findall(r"extern_kernels\.mm\(", call_body))
    assert len(mms) == mm_calls == 4 and all(r["launches_per_step"] == 1 for r in mms)
    assert len({r["site"] for r in mms}) == 4
    line = source_line(COST / "small_kernels.py", "x @ w")
    assert {r["user_line"]["line"] for r in mms} == {line}


@pytest.mark.inductor
def test_many_small_kernels_add_up_to_the_steps_the_program_timed(kernels: dict) -> None:
    doc = kernels["doc"]
    (group,) = doc["steps"]
    parts = sum(r["ms_per_step"] for r in doc["breakdown"])
    assert parts == pytest.approx(group["profiled_step_ms"], rel=1e-3)
    pairs = clean_own(doc, own_seconds(kernels, "default"), timed_steps(group))
    assert len(pairs) >= 5
    assert within(median([a for a, _ in pairs]), median([b for _, b in pairs]), 1.10)
    assert doc["gpu"] is None and any("need a GPU" in n for n in doc["notes"])


# --- input that holds no measurement ------------------------------------------------------------------


def test_a_log_without_a_measurement_says_so_and_check_refuses_it() -> None:
    log = next(iter(sorted((TRACE_FIXTURES).rglob("*.log"))))
    shown = run_tcx("cost", str(log), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert "no call timings" in json.loads(shown.stdout)["unavailable"]
    checked = run_tcx("check", str(log), "--max-call-ms", "10")
    assert checked.returncode == 4 and "cannot be judged" in checked.stderr


# --- the GPU attribution rule, on a profile written by hand (no GPU here) -----------------------------


def test_on_a_gpu_busy_device_time_goes_to_kernels_and_idle_time_to_what_the_cpu_did() -> None:
    """A hand-written profile of one call (no GPU on this machine; bench/gpu_cost.py checks real
    ones): a 600 ns kernel launched inside graph 0/0; the parts still add up to the call, the kernel
    gets the device's busy time plus its launch range's CPU time outside it, guards their CPU time."""
    from tcx.core.cost.profile import Context, attribute

    names = ["tcx.call", "TorchDynamo Cache Lookup", "Torch-Compiled Region: 0/0", "tcx.graph 0/0"]
    names += ["triton_poi_fused_add_0", "cudaLaunchKernel"]
    event = {
        "index": 3,
        "function": "f",
        "names": names,
        "cpu": [[0, 0, 1000], [1, 10, 90], [2, 100, 900], [3, 150, 100], [4, 160, 50], [5, 170, 20]],
        "device": [[4, 300, 600, 7, 4]],
        "extra": [[4, {"bytes": 3000, "dtype": "float32"}]],
    }
    call = attribute(event, Context(lambda cid: None, lambda fn: f"{fn} ran eagerly"))
    parts = {(k.part, k.name): p for k, p in call.pieces.items()}
    assert sum(p.ns for p in call.pieces.values()) == call.call_ns == 1000
    kernel = parts[("kernel", "triton_poi_fused_add_0")]
    assert (kernel.ns, kernel.own_ns, kernel.launches, kernel.bytes) == (650, 600, 1, 3000)
    assert parts[("guards", "Dynamo cache lookup (guard evaluation)")].ns == 90
    assert call.launch_ns == {"0/0": 20} and call.on_device


def test_each_timed_call_records_the_cpu_time_it_used(skipped: dict) -> None:
    """Every steady call carries the process's CPU time during it (tcx fix tells a call that waited for a
    busy machine from one that got slower by it): positive, and about its wall time on a CPU run (no
    more than the wall time times the threads torch may use, plus slack for the clocks)."""
    import torch

    from tcx.cli.session import load
    from tcx.core.cost.measurements import read_measurements

    calls = [c for c in read_measurements(load(str(skipped["recording"])).model).calls if c.measured]
    assert calls and all(c.cpu_ns is not None and c.cpu_ns > 0 for c in calls)
    assert all(c.cpu_ns <= c.wall_ns * (torch.get_num_threads() + 1) + 2_000_000 for c in calls)


def test_fix_judges_a_rerun_slower_only_when_its_calls_also_used_more_cpu() -> None:
    """The suite saw a re-run's every call 12 times slower than the baseline's while other tests compiled:
    the calls waited for the machine. With each run's CPU time per call, such a run is not called slower;
    a run whose calls used more CPU too is; without CPU times (an older recording) wall time decides."""
    from tcx.core.fix.verify import Figures, _slower

    before = Figures(0, 1, 0, 1.0, 1.277, steady_calls=11, range_ms=(1.0, 2.3), cpu_ms=1.2)
    waited = Figures(0, 1, 0, 1.0, 15.895, steady_calls=12, range_ms=(15.562, 16.4), cpu_ms=1.3)
    worked = Figures(0, 1, 0, 1.0, 15.895, steady_calls=12, range_ms=(15.562, 16.4), cpu_ms=15.0)
    assert _slower(before, waited) is None
    assert (_slower(before, worked) or "").startswith("slower: 1.277 → 15.895 ms per steady call")
    old = Figures(0, 1, 0, 1.0, 1.277, steady_calls=11, range_ms=(1.0, 2.3))
    assert _slower(old, Figures(0, 1, 0, 1.0, 15.895, steady_calls=12, range_ms=(15.562, 16.4))) is not None
