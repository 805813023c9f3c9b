"""`tcx cost`'s GPU rules on profiles written by hand (this machine has no GPU; bench/gpu_cost.py checks
real ones on an H200 against torch.profiler's own output): a kernel row's device time and its launch
cost apart, a step whose device idles most of the time called launch-bound (with what fits), and the
kernels a CUDA-graph replay ran (one cudaGraphLaunch on the CPU) given to their graph's kernels and
extern calls, the matmul with its FLOP rate from its graph node's shapes.

Each profile has the shape the recorder writes (core/recorder/compat_cost_profile.spans_of): `cpu`
[name, start, duration] in ns from the step's start, `device` [name, start, duration, stream, the cpu
span that launched it, 1 when a CUDA-graph replay ran it].
"""

from __future__ import annotations

import json

import pytest
from conftest import REPO, run_tcx

from tcx.core.cost.findings import _kernel_findings, _launch_finding
from tcx.core.cost.gpu import peaks_for
from tcx.core.cost.measurements import StepCost
from tcx.core.cost.profile import Context, attribute
from tcx.core.cost.steps import Step, StepGroup
from tcx.core.views.codegen import ExternCall, Kernel
from tcx.core.views.cost import CodeFacts, _breakdown, _launch_bound

H200 = peaks_for({"name": "NVIDIA H200"})
CTX = Context(lambda cid: None, lambda fn: f"{fn} ran eagerly")
CALL = ["tcx.call", "TorchDynamo Cache Lookup", "Torch-Compiled Region: 0/0", "tcx.graph 0/0"]


def launch_bound_step() -> dict:
    """One call of 10 µs in which two kernels ran 0.6 µs on the device; each launch range took 2 µs
    of CPU (cudaLaunchKernel inside it)."""
    names = [*CALL, "triton_poi_fused_add_0", "cudaLaunchKernel", "triton_red_fused_sum_1"]
    return {
        "index": 3,
        "function": "f",
        "names": names,
        "cpu": [
            [0, 0, 10000],
            [1, 100, 900],
            [2, 1000, 9000],
            [3, 1200, 8000],
            [4, 2000, 2000],
            [5, 2500, 1000],
            [6, 6000, 2000],
            [5, 6500, 1000],
        ],
        "device": [[4, 3600, 300, 7, 4], [6, 8100, 300, 7, 6]],
        "extra": [[4, {"bytes": 3000, "dtype": "float32"}], [6, {"bytes": 6000, "dtype": "float32"}]],
    }


def step_cost(profile_event: dict) -> StepCost:
    call = attribute(profile_event, CTX)
    assert call is not None
    group = StepGroup(
        "f", "grad", "period", [Step(0, 3, "grad", call.call_ns, call.call_ns, 0, 0, False, True)]
    )
    step = StepCost(group, [call], _breakdown([call], CodeFacts(), H200, tf32=False))
    step.launch_bound = _launch_bound([call])
    return step


def test_a_kernel_row_shows_its_device_time_and_its_launch_cost_apart() -> None:
    step = step_cost(launch_bound_step())
    rows = {r.name: r for r in step.breakdown if r.part == "kernel"}
    add = rows["triton_poi_fused_add_0"]
    assert add.own_ms_per_step == pytest.approx(300 / 1e6)  # the device's 0.3 µs
    assert add.launch_ms_per_step == pytest.approx(2000 / 1e6)  # the CPU range that launched it
    assert add.device_kernels == {
        "triton_poi_fused_add_0": {"ms_per_step": 300 / 1e6, "launches_per_step": 1.0}
    }
    assert sum(r.ms_per_step for r in step.breakdown) == pytest.approx(10000 / 1e6)  # still adds up
    assert add.gpu is not None and add.gpu["bytes"] == 3000


def test_a_step_whose_device_idles_is_launch_bound_and_its_kernels_shapes_are_not_the_advice() -> None:
    step = step_cost(launch_bound_step())
    assert step.launch_bound == {"device_busy_share": pytest.approx(0.06), "launch_bound": True, "steps": 1}
    finding = _launch_finding(step, ("prog.py", 7))
    assert finding is not None and finding.kind == "launch_bound"
    assert finding.ms_per_step == pytest.approx(0.01 * 0.94)  # the device's idle time in the step
    assert 'mode="reduce-overhead"' in (finding.remedy or "") and "fewer, larger kernels" in (
        finding.remedy or ""
    )
    # both kernels are far below the H200's memory roof; launch-bound, that is not what to fix
    assert all(r.gpu and r.gpu["far_below_roof"] for r in step.breakdown if r.part == "kernel")
    assert _kernel_findings(step, H200, launch_bound=True) == []
    assert _kernel_findings(step, H200, launch_bound=False)  # the same rows are findings otherwise


def replayed_step() -> dict:
    """A CUDA-graph replay: one cudaGraphLaunch inside graph 0/0's call ran a Triton kernel of the
    graph and a cuBLAS kernel (its extern mm); neither has an op range on the CPU."""
    names = [*CALL, "## Call CompiledFxGraph f1 ##", "cudaGraphLaunch", "triton_poi_fused_add_0"]
    names.append("nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopB_TNT")
    return {
        "index": 5,
        "function": "f",
        "names": names,
        "cpu": [
            [0, 0, 100000],
            [1, 100, 900],
            [2, 1000, 99000],
            [3, 1200, 98000],
            [4, 1300, 97000],
            [5, 2000, 500],
        ],
        "device": [[6, 3000, 1000, 7, 4, 1], [7, 4000, 80000, 7, 4, 1]],
    }


def test_kernels_a_cuda_graph_replay_ran_go_to_their_graph_kernels_and_extern_calls() -> None:
    mm = ExternCall(
        "extern_kernels.mm",
        "0/0",
        "forward",
        "extern_kernels.mm(arg0_1, arg1_1, out=buf0)",
        ["mm"],
        ["aten.mm"],
    )
    mm.node, mm.flops, mm.user_line = "mm", 2 * 8192**3, {"file": "prog.py", "line": 12}
    origins = {"user_lines": [{"file": "prog.py", "line": 11}], "aten_ops": ["aten.add"]}
    add = Kernel("triton_poi_fused_add_0", "triton", "0/0", "forward", "", "pointwise", ["add"], origins)
    code = CodeFacts(
        kernels={("0/0", False, "triton_poi_fused_add_0"): add},
        externs={("0/0", False): [mm]},
    )
    ctx = Context(CTX.eager_label, CTX.frame_label, module=code.module)
    call = attribute(replayed_step(), ctx)
    assert call is not None
    rows = {(r.part, r.name): r for r in _breakdown([call], code, H200, tf32=False)}
    kernel = rows[("kernel", "triton_poi_fused_add_0")]
    assert kernel.replayed and kernel.own_ms_per_step == pytest.approx(1000 / 1e6)
    assert kernel.user_line == {"file": "prog.py", "line": 11}
    extern = rows[("extern", "aten::mm")]
    assert extern.replayed and extern.site == "mm" and extern.user_line == {"file": "prog.py", "line": 12}
    assert extern.own_ms_per_step == pytest.approx(80000 / 1e6)
    assert list(extern.device_kernels) == ["nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopB_TNT"]
    # its FLOP rate: the node's 2·8192³ FLOPs over the kernel's 80 µs on the device
    assert extern.gpu is not None and extern.gpu["flops_from"] == "the shapes of node mm"
    assert extern.gpu["flops_s"] == pytest.approx(2 * 8192**3 / 80e-6)


# A real run on an NVIDIA H200 (torch 2.11, bench/gpu_cost.py's matmul workload): mode="max-autotune"
# keeps cuBLAS for the 8192³ bf16 matmul and runs the graph from a CUDA graph, and Inductor splits the
# graph into partitions (call() hands its arguments to partition_0, whose body holds the mm).
H200_MATMUL = REPO / "fixtures" / "gpu" / "h200_matmul_max_autotune.tcx.gz"


def test_a_partitioned_graphs_extern_call_is_listed_where_the_partition_runs_it():
    out = run_tcx("codegen", str(H200_MATMUL))
    assert out.returncode == 0, out.stderr
    assert "0 kernel(s), 1 extern call(s)" in out.stdout  # was 0 extern calls: the partition was not read
    assert "extern_kernels.mm(arg0_1, arg1_1, out=buf0)" in out.stdout
    assert "partition0_args" not in out.stdout  # call()'s hand-over, not a step of its own


def test_the_cuda_graph_replayed_matmul_has_its_flop_rate_from_its_node():
    out = run_tcx("cost", str(H200_MATMUL), "--format", "json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["steps"][0]["breakdown"]
    mm = next(r for r in rows if r["part"] == "extern" and r["name"] == "aten::mm")
    assert mm["replayed"] and "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT" in mm["device_kernels"]
    gpu = mm["gpu"]
    assert gpu["flops"] == 2 * 8192**3 and gpu["flops_from"] == "the shapes of node mm"
    assert gpu["bound"] == "compute"
    # bfloat16's dense peak, the dtype read from the node (a replay has no op range to give it)
    assert gpu["share_of_peak"] == pytest.approx(gpu["flops_s"] / H200.flops_s["bfloat16"])
    assert not any("nvjet" in k for r in rows if r["part"] == "other" for k in r["device_kernels"])
