"""The CUDA preview previews the whole program: it computes values on the CPU while it compiles
for the GPU, so lines that need a value (`.item()`, `float()`, an `if` on a tensor) run on, and
ordinary loading code (`.to("cuda")`, `load_state_dict(assign=True)`, CUDA RNG, checkpointing,
deepcopy) works. Each corpus program (fixtures/programs/gpu) is previewed once per session,
with torch's own TORCH_TRACE log of that run; the truths are torch's logs of the preview and of a
plain CPU run of the same program (checked against a real H200 in bench/gpu_compare_h200.txt)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import tcx_fork
from conftest import (
    PROGRAMS,
    REPO,
    TorchTrace,
    cuda_preview,
    module,
    read_torch_trace,
    run_tcx,
    shared_value,
    torch_trace_records,
)

pytestmark = [pytest.mark.torch, pytest.mark.inductor]

CORPUS = PROGRAMS / "gpu"
# Programs whose graphs do not depend on the device: a CPU run compiles the same graphs.
DEVICE_FREE = ["item_loop", "eager_branch", "load_and_decode", "checkpoint_dropout", "deepcopy_ema"]
WHOLE = [*DEVICE_FREE, "nanogpt_step"]
# The last line each program prints: the preview ran it to its end.
LAST_LINE = {
    "item_loop": r"step 2: loss \d",
    "eager_branch": r"halved \d+ times; rows \(\d+, 32\) -> \(\d+, 8\)",
    "load_and_decode": r"generated \[23, 39, 41\] positions 3",
    "checkpoint_dropout": r"loss [\d.]+ grads 14",
    "deepcopy_ema": r"loss [\d.]+ ema drift",
    "nanogpt_step": r"iter 2: loss \d",
}


@dataclass
class Preview:
    doc: dict  # `tcx codegen --target cuda:sm_90 --format json`
    trace: Path  # torch's own TORCH_TRACE log of the preview run
    saved: Path  # the preview's recording
    proc: subprocess.CompletedProcess


def post_grad_graphs(trace: Path) -> int:
    """Modules Inductor lowered, from torch's log: one post-grad graph per module it generates."""
    return sum(
        1
        for name, md, _ in torch_trace_records(trace)
        if name == "artifact" and md["artifact"]["name"] == "inductor_post_grad_graph"
    )


def _program(name: str) -> Path:
    return CORPUS / f"{name}.py" if (CORPUS / f"{name}.py").exists() else PROGRAMS / name


@pytest.fixture(scope="session")
def preview() -> Callable[[str], Preview]:
    """Each program previewed once per session, whichever xdist worker asks first (`shared_value`:
    the preview generates Triton code on the CPU, ~10 s a program, and its tests land on both workers)."""
    module("triton")

    def get(name: str) -> Preview:
        where, doc, rc, out, err = shared_value(
            f"cuda_preview_whole:{name}", lambda folder: cuda_preview(_program(name), folder)
        )
        folder = Path(where)
        proc = subprocess.CompletedProcess(["tcx", "codegen", name], rc, out, err)
        return Preview(doc, folder / "torch_trace", folder / "preview.tcx", proc)

    return get


def cpu_run(name: str, tmp_path: Path) -> TorchTrace:
    """The program run plainly on the CPU (no tcx), with torch's TORCH_TRACE log."""
    trace = tmp_path / "cpu_trace"
    env = {**os.environ, "TORCH_TRACE": str(trace), "CUDA_VISIBLE_DEVICES": ""}
    proc = tcx_fork.run_python([str(CORPUS / f"{name}.py")], env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return read_torch_trace(trace)


@pytest.mark.parametrize("name", DEVICE_FREE)
def test_preview_counts_equal_a_cpu_run(name: str, preview: Callable[[str], Preview], tmp_path: Path) -> None:
    """Values decide what compiles in these programs (an `if` on a loss, a loop until a tensor is
    small, a mask's row count, `.item()` in a compiled function): the preview, computing them on the
    CPU, compiles the same graphs and modules as a CPU run of the program."""
    p = preview(name)
    assert p.proc.returncode == 0, p.proc.stderr[-3000:]
    cpu, prev = cpu_run(name, tmp_path), read_torch_trace(p.trace)
    assert prev.graphs == cpu.graphs > 0
    assert prev.compile_ids == cpu.compile_ids
    assert (prev.graph_breaks, prev.recompiles) == (cpu.graph_breaks, cpu.recompiles)
    assert post_grad_graphs(p.trace) == cpu.output_code == len(p.doc["wrappers"])
    assert p.doc["kernel_count"] > 0 and all("@triton.jit" in k["source"] for k in p.doc["kernels"])


@pytest.mark.parametrize("name", WHOLE)
def test_each_program_is_previewed_to_its_end(name: str, preview: Callable[[str], Preview]) -> None:
    p = preview(name)
    assert p.proc.returncode == 0, p.proc.stderr[-3000:]
    assert re.search(LAST_LINE[name], p.proc.stderr), p.proc.stderr[-2000:]
    assert p.doc["preview_notes"]["stopped"] is None and p.doc["unavailable"] is None
    assert "Exception ignored" not in p.proc.stderr
    assert "Traceback" not in p.proc.stderr


def test_no_backward_graph_where_nothing_runs_backward(preview: Callable[[str], Preview]) -> None:
    """eager_branch's Linear has parameters that require grad, but nothing calls backward: on a
    GPU AOTAutograd compiles the backward lazily, at the first backward, so never; so does the preview."""
    p = preview("eager_branch")
    assert [w["graph"] for w in p.doc["wrappers"]] == ["inference", "inference", "forward"]
    assert post_grad_graphs(p.trace) == 3


def test_checkpointed_dropout_saves_and_replays_the_cuda_rng_state(preview: Callable[[str], Preview]) -> None:
    """The forward saves the CUDA generator's state for the recomputed dropout; its buffer is the
    16 bytes of a CUDA (Philox) state, as on a GPU."""
    p = preview("checkpoint_dropout")
    assert [w["graph"] for w in p.doc["wrappers"]] == ["forward", "backward"]
    assert any("native_dropout" in " ".join(k["origins"]["aten_ops"]) for k in p.doc["kernels"])


def test_kernels_name_the_users_lines(preview: Callable[[str], Preview]) -> None:
    """Each kernel's "your line" is the user's line torch's own provenance names for it (not the
    default-device mode's frame in torch/utils/_device.py)."""
    p = preview("item_loop")
    from_torch: dict[str, set[int]] = {}
    for name, md, payload in torch_trace_records(p.trace):
        if (
            name == "artifact"
            and md["artifact"]["name"] == "inductor_provenance_tracking_kernel_stack_traces"
        ):
            for kernel, traces in json.loads(payload).items():
                lines = {int(n) for t in traces for n in re.findall(r'item_loop\.py", line (\d+)', t)}
                from_torch.setdefault(kernel.rsplit(":", 1)[0], set()).update(lines)
    assert p.doc["kernels"]
    for k in p.doc["kernels"]:
        lines = {u["line"] for u in k["origins"]["user_lines"]}
        assert {os.path.basename(u["file"]) for u in k["origins"]["user_lines"]} == {"item_loop.py"}
        assert lines and lines <= from_torch[k["name"]], (k["name"], lines, from_torch.get(k["name"]))


def test_a_crash_inside_the_preview_is_named_with_its_line_and_torchs_message(tmp_path: Path) -> None:
    """cuDNN's LSTM has no CPU counterpart: the preview stops at the LSTM's line with torch's own
    message (the recorded exception), never "this recording has no CUDA preview"."""
    module("triton")
    program = PROGRAMS / "preview_limits" / "cudnn_lstm.py"
    saved = tmp_path / "lstm.tcx"
    proc = run_tcx(
        "codegen",
        str(program),
        "--target",
        "cuda:sm_90",
        "--no-color",
        "--width",
        "200",
        "--save",
        str(saved),
        env={"CUDA_VISIBLE_DEVICES": ""},
    )
    assert proc.returncode == 3, proc.stderr[-2000:]
    exit_event = next(
        json.loads(line) for line in saved.read_text().splitlines() if '"kind": "program_exit"' in line
    )
    torch_message = exit_event["message"].splitlines()[0]
    lstm_line = next(i for i, t in enumerate(program.read_text().splitlines(), 1) if "lstm(torch.randn" in t)
    text = " ".join(proc.stdout.split())
    assert f"the program stopped at {program}:{lstm_line}" in text
    assert " ".join(torch_message.split()) in text
    assert "record it with --target" not in text and "no CUDA preview" not in text


VIEWS_WITHOUT_TARGET = (
    "codegen",
    "fusion",
    "cudagraphs",
    "explain",
    "graphs",
    "guards",
    "recompiles",
    "trace",
)


def test_a_saved_preview_opens_in_every_view_without_target(preview: Callable[[str], Preview]) -> None:
    p = preview("item_loop")
    docs = {}  # each view rendered once from the saved preview (codegen and cudagraphs are read twice)
    for view in VIEWS_WITHOUT_TARGET:
        proc = run_tcx(view, str(p.saved), "--format", "json")
        assert proc.returncode == 0, (view, proc.stderr[-1500:])
        docs[view] = doc = json.loads(proc.stdout)
        if "preview" in doc:
            assert doc["preview"] is True, view
    codegen = docs["codegen"]
    assert codegen["preview"] and codegen["device"] == "cuda:sm_90" and codegen["unavailable"] is None
    assert [k["name"] for k in codegen["kernels"]] == [k["name"] for k in p.doc["kernels"]]
    assert codegen["kernels"][0]["origins"]["user_lines"] == p.doc["kernels"][0]["origins"]["user_lines"]
    cudagraphs = docs["cudagraphs"]
    assert cudagraphs["preview_notes"]["arch"] == "sm_90"


H200 = REPO / "fixtures" / "gpu"


def _events(recording: Path) -> list[dict]:
    import gzip

    with gzip.open(recording, "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _triton_kernels(events: list[dict], kind: str) -> list[str]:
    """Kernel names read with a plain JSON reader: from torch's output code in a real run's
    trace events, or from the preview's wrappers."""
    names = []
    for ev in events:
        if kind == "real" and ev.get("kind") == "trace" and "inductor_output_code" in ev.get("md", {}):
            names += re.findall(r"^def (triton_\w+)\(", ev.get("payload") or "", re.M)
        elif kind == "preview" and ev.get("kind") == "cuda_preview":
            names += re.findall(r"^def (triton_\w+)\(", ev.get("source") or "", re.M)
    return names


def test_diff_of_a_real_h200_run_and_its_preview_compares_kernel_by_kernel(tmp_path: Path) -> None:
    """item_loop on the H200 (torch 2.11) and its preview made there with the GPU hidden
    (bench/gpu_compare.py): every kernel of the real run is matched and identical; a kernel edited
    in a copy of the preview is reported as differing."""
    real, prev = H200 / "h200_item_loop_real.tcx.gz", H200 / "h200_item_loop_preview.tcx.gz"
    names = _triton_kernels(_events(real), "real")
    assert names and sorted(names) == sorted(_triton_kernels(_events(prev), "preview"))
    doc = json.loads(run_tcx("diff", str(real), str(prev), "--format", "json").stdout)
    compared = doc["kernels_compared"]
    assert len(compared["identical"]) == len(names)
    assert compared["differ"] == compared["only_in_a"] == compared["only_in_b"] == []
    assert doc["kernels_added"] == doc["kernels_removed"] == []

    events, target = _events(prev), names[0]
    for ev in events:
        if ev.get("kind") == "cuda_preview" and f"def {target}(" in (ev.get("source") or ""):
            head, _, body = ev["source"].partition(f"def {target}(")
            ev["source"] = head + f"def {target}(" + body.replace("xoffset", "xoffset_edited", 1)
    edited = tmp_path / "edited.tcx"
    edited.write_text("".join(json.dumps(ev) + "\n" for ev in events))
    doc = json.loads(run_tcx("diff", str(real), str(edited), "--format", "json").stdout)
    assert [d.split()[-1] for d in doc["kernels_compared"]["differ"]] == [target]
