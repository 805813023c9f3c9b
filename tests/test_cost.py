"""`tcx cost`: real runs on the CPU (torch 2.13), checked against torch's own TORCH_TRACE log of the same
run (break sites, compile ids, compile times, kernels in the output code) and against the program's own
timing of the same calls (each fixture times its calls with time.perf_counter when COST_TIMES is set).

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
    """`tcx cost PROGRAM --format json`, with torch's TORCH_TRACE log and the program's own timings."""
    proc = run_tcx(
        "cost",
        str(program),
        "--format",
        "json",
        "--save",
        str(folder / "run.tcx"),
        *extra,
        env={"TORCH_TRACE": str(folder / "torch_trace"), "COST_TIMES": str(folder / "times.jsonl")},
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
    assert top["share"] > 0.5  # most of the call ran eagerly in the skipped function
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


def profiled_walls(function: dict) -> list[float]:
    """The wall time of each profiled call, as the call was timed (perf_counter around it)."""
    walls = {c["index"]: c["ms"] for c in function["call_times"]}
    return [walls[i] for i in function["profiled_calls"]]


def test_the_parts_add_up_to_the_measured_calls(skipped: dict) -> None:
    doc = skipped["doc"]
    (function,) = doc["functions"]
    parts = sum(r["ms_per_call"] for r in doc["breakdown"])
    assert parts == pytest.approx(function["profiled_call_ms"], rel=1e-3)  # attribution loses no time
    walls = profiled_walls(function)
    assert len(walls) >= 2
    # the profiler's clock and the call's own timing of the same calls
    assert within(parts, sum(walls) / len(walls), 1.10)


def test_call_and_eager_times_agree_with_the_program_timing_the_same_calls(skipped: dict) -> None:
    doc = skipped["doc"]
    compared = doc["compared_calls"]
    assert len(compared) >= 3 and 0 not in compared  # call 0 compiled: warm-up, left out
    (function,) = doc["functions"]
    assert [w["index"] for w in function["warmup_calls"]] == [0]
    assert not set(compared) & set(function["profiled_calls"])  # timed without the profiler
    compiled = own_seconds(skipped, "default")
    eager = own_seconds(skipped, "force_eager")
    assert within(doc["call_ms"], median([compiled[i] * 1000 for i in compared]), 2.0)
    assert within(doc["eager_call_ms"], median([eager[i] * 1000 for i in compared]), 2.0)
    assert doc["speedup"] == pytest.approx(doc["eager_call_ms"] / doc["call_ms"], rel=0.5)


def test_the_trace_labels_regions_eager_stretches_and_the_break(skipped: dict) -> None:
    trace = json.loads((skipped["folder"] / "trace.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    names = [e["name"] for e in spans]
    call = next(e for e in spans if e["name"] == "call")
    assert any(n.startswith("compiled region ") for n in names)
    assert any(n.startswith("guards: Dynamo cache lookup") for n in names)
    stretch = [e for e in spans if e["name"].startswith("eager: Skip calling")]
    assert stretch and stretch[0]["cat"] == "eager"
    for e in spans:  # every span inside the call it belongs to
        assert call["ts"] <= e["ts"] and e["ts"] + e["dur"] <= call["ts"] + call["dur"] + 1e-3


def test_explain_and_check_use_the_measurement(skipped: dict) -> None:
    recording = str(skipped["recording"])
    explained = run_tcx("explain", recording, "--format", "json")
    assert explained.returncode == 0, explained.stderr
    site = json.loads(explained.stdout)["graph_breaks"][0]
    top = skipped["doc"]["findings"][0]
    assert site["measured_ms_per_call"] == pytest.approx(top["ms_per_call"], rel=1e-6)
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
    assert first["kind"] == "graph break" and first["ms_per_call"] == pytest.approx(top["ms_per_call"])
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


def test_recompiles_cost_their_compile_time_spread_over_the_calls(recompiling: dict) -> None:
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
    assert set(finding["compile_ids"]) == recompiled
    assert doc["calls"] == 15
    expected = sum(seconds[c] for c in recompiled) * 1000 / 15
    assert finding["ms_per_call"] == pytest.approx(expected, rel=1e-6)
    assert "mark_dynamic" in (finding["remedy"] or "")  # the recompiles view's fix
    assert doc["findings"][0]["kind"] == "recompile"  # ms of compile per call outweigh a steady call
    # the calls that compiled are the warm-up: one per compile id torch logged
    (function,) = doc["functions"]
    assert len(function["warmup_calls"]) == len(seconds) == 5
    share = sum(seconds[c] for c in recompiled) / sum(seconds.values())
    assert doc["recompile_share"] == pytest.approx(share)


# --- one Inductor graph of many small kernels -----------------------------------------------------------


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return cost_run(tmp_path_factory.mktemp("kernels"), COST / "small_kernels.py", "--no-eager")


@pytest.mark.inductor
def test_each_generated_kernel_is_a_row_with_its_launches_per_call(kernels: dict) -> None:
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
        assert row["launches_per_call"] == len(re.findall(rf"\b{name}\(", call_body)), name
        assert row["user_line"] and Path(row["user_line"]["file"]).name == "small_kernels.py"
    externs = {r["name"]: r for r in doc["breakdown"] if r["part"] == "extern"}
    mm_calls = len(re.findall(r"extern_kernels\.mm\(", call_body))
    assert externs["aten::mm"]["launches_per_call"] == mm_calls == 4


@pytest.mark.inductor
def test_many_small_kernels_add_up_to_the_calls_the_program_timed(kernels: dict) -> None:
    doc = kernels["doc"]
    (function,) = doc["functions"]
    parts = sum(r["ms_per_call"] for r in doc["breakdown"])
    walls = profiled_walls(function)
    assert within(parts, sum(walls) / len(walls), 1.10)
    own = own_seconds(kernels, "default")
    assert within(doc["call_ms"], median([own[i] * 1000 for i in function_timed(function)]), 2.0)
    assert doc["gpu"] is None and any("need a GPU" in n for n in doc["notes"])


def function_timed(function: dict) -> list[int]:
    profiled = set(function["profiled_calls"])
    warm = {w["index"] for w in function["warmup_calls"]}
    return [i for i in range(function["calls"]) if i not in profiled | warm]


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
