"""The CUDA preview names what it cannot know on the graph it affects, keeps its own hooks out of
Dynamo's traces, and says so when nothing runs on CUDA. Three programs are previewed once each per
session (the preview generates Triton code on the CPU: tens of seconds each), with torch's own
TORCH_TRACE log of each run as the truth:

- fixtures/programs/gpu/llama_attentions.py: HF Llama asked for its attention weights under SDPA
  (the preview of tcx 0.1 stopped inside Dynamo tracing tcx's own value hook);
- fixtures/programs/gpu/random_branch.py: a branch, a constant and a size that depend on numbers
  drawn on the CUDA device;
- fixtures/programs/preview_limits/cpu_tensors.py: a program whose tensors stay on the CPU."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import PROGRAMS, compile_id, cuda_preview, module, run_tcx, shared_value, torch_trace_records

pytestmark = [pytest.mark.torch, pytest.mark.inductor]


@dataclass
class Preview:
    doc: dict  # `tcx codegen --target cuda:sm_90 --format json`
    trace: Path  # torch's own TORCH_TRACE log of the preview run
    saved: Path
    proc: subprocess.CompletedProcess


@pytest.fixture(scope="session")
def preview() -> Callable[[str], Preview]:
    """Each program previewed once per session, whichever xdist worker asks first (`shared_value`)."""
    module("triton")

    def get(path: str) -> Preview:
        where, doc, rc, out, err = shared_value(
            f"cuda_preview_named:{path}", lambda folder: cuda_preview(PROGRAMS / path, folder, "--no-save")
        )
        folder = Path(where)
        proc = subprocess.CompletedProcess(["tcx", "codegen", path], rc, out, err)
        return Preview(doc, folder / "torch_trace", folder / "preview.tcx", proc)

    return get


def _text(saved: Path) -> str:
    """The saved preview as `tcx codegen` prints it (no new run)."""
    proc = run_tcx("codegen", str(saved), "--no-color", "--width", "200")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_llama_asked_for_attention_weights_is_previewed_whole(preview: Callable[[str], Preview]) -> None:
    """tcx's hooks are off Dynamo's traces: the eager code between the graphs runs the preview's
    value hooks under Dynamo's frame hook, and Dynamo no longer traces them as the program's code.
    Every module torch lowered (its post-grad graphs, from its own log) is previewed."""
    p = preview("gpu/llama_attentions.py")
    assert p.proc.returncode == 0, p.proc.stderr[-3000:]
    assert re.search(r"logits \(1, 16, 128\) attention maps \d+", p.proc.stderr), p.proc.stderr[-2000:]
    assert p.doc["preview_notes"]["stopped"] is None and p.doc["unavailable"] is None
    assert "Traceback" not in p.proc.stderr and "compat_fakecuda" not in p.proc.stderr
    lowered = sum(
        1
        for name, md, _ in torch_trace_records(p.trace)
        if name == "artifact" and md["artifact"]["name"] == "inductor_post_grad_graph"
    )
    assert lowered == len(p.doc["wrappers"]) > 0
    assert p.doc["kernel_count"] > 0 and all("@triton.jit" in k["source"] for k in p.doc["kernels"])


def test_each_graph_that_depends_on_random_values_is_named(preview: Callable[[str], Preview]) -> None:
    """Which function compiles after the `if` on device noise, the constant `scaled` takes and the
    rows `pool` gets depend on numbers drawn on the CUDA device: each of those compiles (its id and
    function from torch's own log) is named, with the line that read the values and the line
    that drew them; `normalize`, fed values drawn on the CPU, is not."""
    program = PROGRAMS / "gpu" / "random_branch.py"
    p = preview("gpu/random_branch.py")
    assert p.proc.returncode == 0, p.proc.stderr[-3000:]
    functions = {
        compile_id(md): md["dynamo_start"]["stack"][-1]["name"]
        for name, md, _ in torch_trace_records(p.trace)
        if name == "dynamo_start"
    }
    by_function = {fn: cid for cid, fn in functions.items()}
    branch_fn = "sharpen" if "sharpen" in by_function else "soften"
    assert set(functions.values()) == {"normalize", branch_fn, "scaled", "pool"}
    named = {
        d["compile_id"]: d for d in p.doc["preview_notes"]["decisions"] if d["decision"] == "random_values"
    }
    assert set(named) == {by_function[branch_fn], by_function["scaled"], by_function["pool"]}
    expected = {
        branch_fn: ("branch", _line_of(program, "if noise.mean() > 0 else")),
        "scaled": ("number", _line_of(program, "scale = float(")),
        "pool": ("size", _line_of(program, "rows = z[")),
    }
    drawn_lines = {_line_of(program, "noise = torch.randn"), _line_of(program, "scale = float(")}
    drawn_lines.add(_line_of(program, "rows = z["))
    for fn, (how, line) in expected.items():
        reads = named[by_function[fn]]["details"]["reads"]
        assert [(r["how"], r["line"]) for r in reads] == [(how, line)], (fn, reads)
        assert {d["line"] for d in reads[0]["drawn_at"]} <= drawn_lines
    pool_inputs = named[by_function["pool"]]["details"]["inputs"]
    assert [i["input"] for i in pool_inputs] == ["rows"]

    text = _text(p.saved)
    section = text.split(f"compile {by_function[branch_fn]} ·", 1)[1].split("\ncompile ", 1)[0]
    branch_line = expected[branch_fn][1]
    named_here = (
        f"may differ on a GPU, random_values: a branch on random values at random_branch.py:{branch_line}"
    )
    assert named_here in " ".join(section.split())
    untouched = text.split(f"compile {by_function['normalize']} ·", 1)[1].split("\ncompile ", 1)[0]
    assert "may differ on a GPU" not in untouched


def test_a_program_of_cpu_tensors_is_told_nothing_runs_on_cuda(preview: Callable[[str], Preview]) -> None:
    """Every tensor torch's log describes is on the CPU: the preview says nothing runs on CUDA (and
    how to put the tensors there), shows no C++ code under a preview banner, and generates none."""
    p = preview("preview_limits/cpu_tensors.py")
    assert p.proc.returncode == 0, p.proc.stderr[-3000:]
    devices = {
        md["describe_tensor"].get("device")
        for name, md, _ in torch_trace_records(p.trace)
        if name == "describe_tensor"
    }
    assert devices == {"device(type='cpu')"}
    notes = p.doc["preview_notes"]
    assert notes["nothing_on_cuda"] and notes["cuda_modules"] == 0 and notes["cpu_modules"] >= 1
    assert p.doc["wrappers"] == [] and "CPU tensors" in p.doc["unavailable"]
    text = " ".join(_text(p.saved).split())
    assert "nothing runs on CUDA here" in text and 'device="cuda"' in text
    assert "PREVIEW for sm_90" not in text and "cpp_fused" not in text
