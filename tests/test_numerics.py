"""`tcx numerics`: each fixture program (fixtures/programs/numerics/) run once by `tcx numerics` as a user
runs it, then many checks of what it says, each against a plain computation written here.

The plain computations: the program run again in this process with `torch.compile` replaced by an
identity that keeps each call's outputs (and the gradients and parameters a training loop leaves), so
tcx's eager values, call counts and parameter names are checked against the program's own; the float64
reference against torch's own recipe (`torch._dynamo.utils.same`'s fp64_ref: the model and inputs cast
to float64 and called again); the custom pass's wrong rewrite computed by hand. The judge and the float64
shadow also get in-process tests on small tensors.

Each `tcx numerics` run is made once per module (`numerics_of`) and shared by the tests that read it.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import PROGRAMS, run_tcx
from filelock import FileLock

NUMERICS = PROGRAMS / "numerics"
pytestmark = pytest.mark.torch
# How each program is run by tcx: Inductor where Inductor is what is checked; the non-deterministic
# program needs no Inductor (its values differ whatever compiles it), so it compiles with the eager backend.
ARGS = {
    "dropout_step.py": ("--max-runs", "1"),
    "custom_pass.py": ("--max-runs", "0"),  # placed in the compiled run itself; no remedy re-run
    "bf16_mlp.py": ("--no-localize",),
    "batchnorm_train.py": ("--no-localize",),
    "nondeterministic.py": ("--no-localize", "--backend", "eager"),
}


@pytest.fixture(scope="session")
def numerics_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[dict, Path]]:
    """`numerics_of("bf16_mlp.py")`: tcx's JSON of that program's numerics run and its saved recording,
    made once per test session on first use (one folder and a lock shared by the xdist workers, as the
    session recorders of conftest.py do)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base

    def get(name: str) -> tuple[dict, Path]:
        folder = shared / f"numerics-{name.removesuffix('.py')}"
        report, saved = folder / "numerics.json", folder / "run.tcx"
        with FileLock(str(folder) + ".lock"):
            if not report.exists():
                folder.mkdir(exist_ok=True)
                proc = run_tcx(
                    "numerics",
                    str(NUMERICS / name),
                    *ARGS[name],
                    "--save",
                    str(saved),
                    "--no-save",
                    "--format",
                    "json",
                    timeout=900,
                )
                assert proc.returncode == 0, proc.stderr[-3000:]
                report.write_text(proc.stdout)
        return json.loads(report.read_text()), saved

    return get


def constant(name: str, const: str) -> int:
    """A module-level constant of a fixture program, read from its source (the program is not run)."""
    tree = ast.parse((NUMERICS / name).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == const for t in node.targets):
            return int(ast.literal_eval(node.value))
    raise AssertionError(f"{const} not in {name}")


def line_of(name: str, text: str) -> int:
    lines = (NUMERICS / name).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def plain_eager_run(name: str) -> dict[str, Any]:
    """The program run here as plain Python with compilation off: `torch.compile` returns what it was
    given, wrapped to keep every call's outputs; a training loop's gradients are read after each
    backward and its parameters after each optimizer step."""
    import torch

    calls: list[torch.Tensor] = []
    grads: list[dict[str, torch.Tensor]] = []
    params: list[dict[str, torch.Tensor]] = []
    modules: list[torch.nn.Module] = []

    def compile(model: Any = None, **_: Any) -> Any:
        if isinstance(model, torch.nn.Module):
            modules.append(model)

        def call(*args: Any, **kwargs: Any) -> Any:
            out = model(*args, **kwargs)
            calls.append(out.detach().clone())
            return out

        return call

    def named() -> dict[str, torch.Tensor]:
        return {f"model.{n}": p for n, p in modules[0].named_parameters()} if modules else {}

    original_compile, original_backward = torch.compile, torch.Tensor.backward
    original_step = torch.optim.SGD.step

    def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        original_backward(self, *args, **kwargs)
        grads.append({n: p.grad.detach().clone() for n, p in named().items() if p.grad is not None})

    def step(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original_step(self, *args, **kwargs)
        params.append({n: p.detach().clone() for n, p in named().items()})
        return out

    torch.compile, torch.Tensor.backward, torch.optim.SGD.step = compile, backward, step  # type: ignore[method-assign]
    try:
        namespace = runpy.run_path(str(NUMERICS / name), run_name="__main__")
    finally:
        torch.compile, torch.Tensor.backward, torch.optim.SGD.step = (
            original_compile,
            original_backward,
            original_step,
        )  # type: ignore[method-assign]
    return {"calls": calls, "grads": grads, "params": params, "namespace": namespace}


def at(tensor: Any, index: list[int]) -> float:
    return float(tensor[tuple(index)])


# ---------------------------------------------------------------------------- dropout in a training step


@pytest.mark.inductor
def test_dropout_diverges_at_its_line_and_fallback_random_is_verified(numerics_of) -> None:
    doc, _ = numerics_of("dropout_step.py")
    steps = constant("dropout_step.py", "STEPS")
    assert doc["schema"] == "tcx.numerics/1" and doc["verdict"] == "diverged" and doc["diverged"] is True
    # every call, backward and step of the program compared: as many as its loop makes
    assert [c["call"] for c in doc["calls"]] == list(range(steps))
    assert len(doc["gradients"]) == len(doc["parameters"]) == steps
    assert all(not c["within_tolerance"] for c in doc["calls"])
    first = doc["first_divergence"]
    assert (first["kind"], first["function"], first["index"]) == ("call", "forward", 0)
    assert "dropout" in first["op"] and first["cause"] == "random"
    assert first["file"].endswith("dropout_step.py")
    assert first["line"] == line_of("dropout_step.py", "functional.dropout(")
    # eager's own dropout and AOTAutograd's decomposition of it draw different numbers (the ladder's
    # first stage that differs); torch's bisector names the decomposition
    assert first["stage"] == "aot_eager_decomp_partition"
    assert "native_dropout" in first["pass"]
    probe = next(p for p in doc["probes"] if p["compile_id"] == first["compile_id"])
    assert [s["within"] for s in probe["stages"]] == [True, False]
    (remedy,) = [r for r in doc["remedies"] if "fallback_random" in r["change"]]
    assert remedy["ran"] and remedy["verified"], remedy
    assert remedy["before"]["divergent"] == 3 * steps and remedy["after"]["divergent"] == 0
    assert remedy["after"]["max_abs"] == 0.0  # eager's own random numbers: the same values, bit for bit
    assert remedy["after"]["values_compared"] == sum(
        len(c["values"]) for k in ("calls", "gradients", "parameters") for c in doc[k]
    )


@pytest.mark.inductor
def test_dropout_eager_values_and_parameter_names_are_the_programs_own(numerics_of) -> None:
    doc, _ = numerics_of("dropout_step.py")
    plain = plain_eager_run("dropout_step.py")
    assert len(plain["calls"]) == len(doc["calls"])
    for call, mine in zip(doc["calls"], plain["calls"], strict=True):
        where = call["where"]
        assert where["eager"] == pytest.approx(at(mine, where["index"]), abs=0)  # the same run, bit for bit
        assert abs(where["compiled"] - where["eager"]) == pytest.approx(call["max_abs"], rel=1e-6)
    for grads, mine in zip(doc["gradients"], plain["grads"], strict=True):
        assert [v["label"] for v in grads["values"]] == sorted(mine)
        where = grads["where"]
        assert where["eager"] == at(mine[where["value"]], where["index"])
    for params, mine in zip(doc["parameters"], plain["params"], strict=True):
        assert [v["label"] for v in params["values"]] == sorted(mine)


# ---------------------------------------------------------------------------- a user's custom pass


@pytest.mark.inductor
def test_a_custom_pass_is_named_with_the_line_of_the_op_it_broke(numerics_of) -> None:
    doc, _ = numerics_of("custom_pass.py")
    assert doc["verdict"] == "diverged"
    assert len(doc["calls"]) == constant("custom_pass.py", "CALLS")
    first = doc["first_divergence"]
    assert first["stage"] == "inductor" and first["cause"] == "custom_pass"
    assert (
        first["pass"] == "post_grad_custom_post_pass"
    )  # torch's CompilerBisector, tcx's judgement as its test
    assert first["op"] == "torch.tanh" and first["line"] == line_of("custom_pass.py", "torch.tanh(h)")
    assert first["custom_pass"]["function"] == "fast_tanh"
    assert first["custom_pass"]["line"] == line_of("custom_pass.py", "def fast_tanh")
    probe = next(p for p in doc["probes"] if p["compile_id"] == first["compile_id"])
    assert [s["backend"] for s in probe["stages"]] == ["aot_eager", "aot_eager_decomp_partition", "inductor"]
    assert [s["within"] for s in probe["stages"]] == [True, True, False]
    (remedy,) = doc["remedies"]  # suggested, not re-run under --max-runs 0
    assert "post_grad_custom_post_pass = None" in remedy["change"] and not remedy["ran"]
    assert remedy["why_not"] == "not run: --max-runs reached"
    assert [r["name"] for r in doc["runs"]] == ["eager", "compiled"]


@pytest.mark.inductor
def test_the_compiled_values_are_what_the_wrong_rewrite_computes(numerics_of) -> None:
    """By hand: the encoder with tanh(h) replaced by the pass's 2*sigmoid(h) - 1, on the program's inputs."""
    import torch

    doc, _ = numerics_of("custom_pass.py")
    plain = plain_eager_run("custom_pass.py")
    encoder = plain["namespace"]["encoder"]
    torch.manual_seed(0)
    type(encoder)()  # the program's draws: its model's initialisation first, then its inputs
    inputs = [torch.randn(4, 16) for _ in doc["calls"]]
    with torch.no_grad():
        for call, x, mine in zip(doc["calls"], inputs, plain["calls"], strict=True):
            assert torch.equal(encoder(x), mine)  # the inputs are the program's
            rewritten = encoder.out(2 * torch.sigmoid(encoder.proj(x)) - 1)
            where = call["where"]
            assert where["eager"] == at(mine, where["index"])
            assert where["compiled"] == pytest.approx(at(rewritten, where["index"]), abs=1e-5)


# ---------------------------------------------------------------------------- bfloat16 rounding


@pytest.mark.inductor
def test_bf16_rounding_differences_raise_no_alarm(numerics_of) -> None:
    doc, _ = numerics_of("bf16_mlp.py")
    assert doc["verdict"] == "within_tolerance" and doc["diverged"] is False
    assert doc["first_divergence"] is None and doc["remedies"] == []
    assert len(doc["calls"]) == constant("bf16_mlp.py", "CALLS")
    step = 2**-7  # one bfloat16 step, relative (7 stored mantissa bits)
    for call in doc["calls"]:
        assert call["within_tolerance"] and call["values"][0]["dtype"] == "bfloat16"
        assert call["max_abs"] > 0 and call["max_rel"] <= step  # compiled is not eager: by rounding
        assert call["compiled_error"] <= call["allowed_error"]


@pytest.mark.inductor
def test_bf16_reference_is_torchs_fp64_recipe(numerics_of) -> None:
    """tcx's float64 twin against torch's own recipe: model and inputs cast to float64 and called again."""
    import torch

    doc, _ = numerics_of("bf16_mlp.py")
    plain = plain_eager_run("bf16_mlp.py")
    mlp = plain["namespace"]["mlp"]
    torch.manual_seed(0)
    type(mlp)()
    inputs = [torch.randn(32, 64, dtype=torch.bfloat16) for _ in doc["calls"]]
    reference = copy.deepcopy(mlp).double()
    with torch.no_grad():
        for call, x, mine in zip(doc["calls"], inputs, plain["calls"], strict=True):
            assert torch.equal(mlp(x), mine)
            fp64 = reference(x.double())
            rmse = float(torch.sqrt(torch.mean((mine.double() - fp64) ** 2)))
            assert call["eager_error"] == pytest.approx(rmse, rel=1e-6)


# ---------------------------------------------------------------------------- a clean training loop


@pytest.mark.inductor
def test_batchnorm_training_loop_within_tolerance_with_gradients_compared(numerics_of) -> None:
    doc, _ = numerics_of("batchnorm_train.py")
    steps = constant("batchnorm_train.py", "STEPS")
    assert doc["verdict"] == "within_tolerance" and doc["grads"] is True
    assert (len(doc["calls"]), len(doc["gradients"]), len(doc["parameters"])) == (steps, steps, steps)
    plain = plain_eager_run("batchnorm_train.py")
    for grads, mine in zip(doc["gradients"], plain["grads"], strict=True):
        assert [v["label"] for v in grads["values"]] == sorted(mine)  # every parameter, by its name
        assert all(v["basis"] == "float64" and v["within"] for v in grads["values"])
        where = grads["where"]
        assert where["eager"] == at(mine[where["value"]], where["index"])
    for call, mine in zip(doc["calls"], plain["calls"], strict=True):
        assert call["where"]["eager"] == at(mine, call["where"]["index"])


# ---------------------------------------------------------------------------- a non-deterministic program


def test_a_non_deterministic_program_is_said_to_be_so(numerics_of) -> None:
    import torch

    doc, _ = numerics_of("nondeterministic.py")
    assert doc["verdict"] == "nondeterministic" and doc["diverged"] is False
    assert doc["eager_repeatable"] is False and doc["first_divergence"] is None
    assert len(doc["calls"]) == constant("nondeterministic.py", "CALLS")
    assert all(c["nondeterministic"] and c["eager_spread"] > 0 for c in doc["calls"])
    assert any("not deterministic" in note for note in doc["notes"])
    first, second = plain_eager_run("nondeterministic.py"), plain_eager_run("nondeterministic.py")
    assert not torch.equal(first["calls"][0], second["calls"][0])  # the program does not repeat itself


# ---------------------------------------------------------------------------- saved runs, check, MCP


@pytest.mark.inductor
def test_a_saved_run_re_renders_the_same_report(numerics_of) -> None:
    doc, saved = numerics_of("custom_pass.py")
    proc = run_tcx("numerics", str(saved), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    again = json.loads(proc.stdout)
    assert again["source_kind"] == "recording"
    skip = ("source_kind", "target")
    assert {k: v for k, v in again.items() if k not in skip} == {
        k: v for k, v in doc.items() if k not in skip
    }
    text = run_tcx("numerics", str(saved), "--width", "200").stdout
    assert "stage   inductor" in text and "post_grad_custom_post_pass" in text
    assert f"custom_pass.py:{line_of('custom_pass.py', 'torch.tanh(h)')}" in text


@pytest.mark.inductor
def test_check_gates_on_numerics(numerics_of) -> None:
    _, diverged = numerics_of("dropout_step.py")
    _, clean_run = numerics_of("bf16_mlp.py")
    _, unrepeatable = numerics_of("nondeterministic.py")
    failing = run_tcx("check", str(diverged), "--max-numerics-divergences", "0", "--format", "json")
    assert failing.returncode == 1, failing.stderr
    (verdict,) = json.loads(failing.stdout)["budgets"]
    assert verdict["actual"] == 3 * constant("dropout_step.py", "STEPS")  # calls, backward passes, steps
    first = verdict["causes"][0]
    assert (
        first["line"] == line_of("dropout_step.py", "functional.dropout(")
        and "first divergence" in first["text"]
    )
    assert run_tcx("check", str(clean_run), "--max-numerics-divergences", "0").returncode == 0
    assert run_tcx("check", str(clean_run), "--max-numerics-error", "1e-6").returncode == 1
    refused = run_tcx("check", str(unrepeatable), "--max-numerics-divergences", "0")
    assert refused.returncode == 4 and "not deterministic" in refused.stderr


def test_a_recording_without_a_comparison_says_so() -> None:
    recording = Path(__file__).parent / "data" / "golden" / "two_functions_inductor.tcx.gz"
    doc = json.loads(run_tcx("numerics", str(recording), "--format", "json").stdout)
    assert doc["verdict"] == "not_compared" and "tcx numerics PROGRAM" in doc["unavailable"]
    proc = run_tcx("check", str(recording), "--max-numerics-divergences", "0")
    assert proc.returncode == 4 and "cannot be judged" in proc.stderr


# ---------------------------------------------------------------------------- the judge and the shadow


def test_the_judge_tells_rounding_from_a_fault() -> None:
    import torch

    from tcx.core.numerics.judge import Tolerance, judge

    torch.manual_seed(0)
    ref = torch.randn(1000, dtype=torch.float64)
    eager = ref.to(torch.bfloat16)  # eager: one rounding
    rounded_twice = ref.float().mul(3).to(torch.bfloat16).float().div(3).to(torch.bfloat16)
    assert judge("x", rounded_twice, eager, ref, Tolerance()).within  # rounding, however it falls
    wrong = eager.clone()
    wrong[7] += 1
    verdict = judge("x", wrong, eager, ref, Tolerance())
    assert not verdict.within and verdict.where["index"] == [7] and verdict.max_abs == 1.0
    # an explicit tolerance fails what the float64 judge lets through
    assert not torch.equal(rounded_twice, eager)
    explicit = judge("x", rounded_twice, eager, ref, Tolerance(rtol=0.0, atol=1e-9))
    assert not explicit.within and "--rtol 0 --atol 1e-09" in (explicit.note or "")
    nan = eager.float().clone()
    nan[3] = float("nan")
    assert "non-finite" in (judge("x", nan, eager.float(), ref, Tolerance()).note or "")
    ints = torch.arange(5)
    assert (
        judge("i", ints, ints, None, Tolerance()).within
        and not judge("i", ints + 1, ints, None, Tolerance()).within
    )


def test_the_float64_shadow_is_what_float64_computes() -> None:
    """A BatchNorm net's forward, backward and SGD step under the shadow, against the same net cast to
    float64 and stepped (torch's fp64_ref recipe); the program's own values stay eager's, bit for bit."""
    import torch

    from tcx.core.recorder.compat_shadow import make_mode

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Tanh(), torch.nn.Linear(16, 2)
    )
    twin = copy.deepcopy(net).double()
    plain = copy.deepcopy(net)
    x = torch.randn(6, 8)
    for model, opt in (
        (net, torch.optim.SGD(net.parameters(), lr=0.1)),
        (twin, torch.optim.SGD(twin.parameters(), lr=0.1)),
    ):
        mode = make_mode() if model is net else None
        if mode:
            mode.__enter__()
        loss = model(x.double() if model is twin else x).square().mean()
        loss.backward()
        opt.step()
        if mode:
            mode.__exit__(None, None, None)
            shadow = mode
    plain_opt = torch.optim.SGD(plain.parameters(), lr=0.1)
    plain(x).square().mean().backward()
    plain_opt.step()
    for (name, p), (_, q), (_, r) in zip(
        net.named_parameters(), twin.named_parameters(), plain.named_parameters(), strict=True
    ):
        assert torch.equal(p, r), name  # the program's values are untouched by the shadow
        assert torch.allclose(shadow.shadow(p), q, rtol=0, atol=1e-12), name
        assert torch.allclose(shadow.shadow(p.grad), q.grad, rtol=0, atol=1e-12), name
    running = shadow.shadow(net[1].running_mean)
    assert torch.allclose(running, twin[1].running_mean, rtol=0, atol=1e-12)
    assert not shadow.fallback


def test_the_shadow_keeps_the_programs_casts_and_rounds_nothing_else() -> None:
    """A model cast to bfloat16 under the shadow (the cast is the program's: its weights are bfloat16 in
    the reference too) against torch's recipe: the bfloat16 model and input cast up to float64."""
    import torch

    from tcx.core.recorder.compat_shadow import make_mode

    mode = make_mode()
    with mode, torch.no_grad():
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.LayerNorm(32), torch.nn.GELU()).to(
            torch.bfloat16
        )
        x = torch.randn(8, 32).to(torch.bfloat16)
        out = net(x)
        total = out.sum(dtype=torch.float32)  # computed in float64 in the shadow, not rounded to float32
    with torch.no_grad():
        reference = copy.deepcopy(net).double()(x.double())
    assert torch.equal(mode.shadow(net[0].weight), net[0].weight.double())  # the cast's rounding kept
    assert torch.allclose(mode.shadow(out), reference, rtol=0, atol=1e-12)
    assert mode.shadow(total).item() == pytest.approx(float(reference.sum()), abs=1e-9)
    assert abs(float(total) - float(reference.sum())) > 1e-9  # the program's own float32 sum is rounded


@pytest.mark.inductor
@pytest.mark.parametrize("kind", ["huge", "negative", "minus_one", "zero", "null", "empty"])
def test_every_admitted_extreme_of_a_report_renders(numerics_of, tmp_path, kind) -> None:
    """A saved report's fields set to each extreme the event schema admits (400-digit integers, NaN,
    null, empty lists): the view builds and prints, its JSON stays strict, and `check` judges it."""
    from schema_values import with_extremes
    from view_outputs import every_output

    from tcx.core.ingest import event_schema
    from tcx.core.ingest.recording import load_recording
    from tcx.core.model import build_model

    _, saved = numerics_of("dropout_step.py")
    lines = saved.read_text().splitlines()
    events = [json.loads(line) for line in lines]
    edited = [with_extremes(e, kind) if e.get("kind") == "numerics_report" else e for e in events]
    report = next(e for e in edited if e.get("kind") == "numerics_report")
    assert event_schema.event_problem(report) is None  # admitted: it reaches the view
    path = tmp_path / "run.tcx"
    path.write_text("".join(json.dumps(e) + "\n" for e in edited), encoding="utf-8")
    model = build_model(load_recording(path), "recording")
    outputs = every_output(model, only=("numerics",))
    json.loads(
        outputs["numerics json"], parse_constant=lambda token: pytest.fail(f"not strict JSON: {token}")
    )
    assert "tcx numerics" in outputs["numerics text"]
    proc = run_tcx("check", str(path), "--max-numerics-divergences", "0", "--max-numerics-error", "1")
    assert proc.returncode in (0, 1), proc.stderr  # judged, never a traceback


@pytest.mark.inductor
def test_the_mcp_tool_and_the_python_api_return_the_clis_document(numerics_of) -> None:
    import tcx
    from tcx.cli.mcp_tools import Policy, call, tools

    doc, saved = numerics_of("custom_pass.py")
    cli = json.loads(run_tcx("numerics", str(saved), "--format", "json").stdout)
    policy = Policy(roots=(os.path.realpath(saved.parent),), allow_run=False)
    (tool,) = [t for t in tools(policy) if t.name == "numerics"]
    served = call(tool, {"target": str(saved)}, policy)
    api = tcx.load(saved).numerics()
    strip = ("tcx_version",)
    assert {k: v for k, v in served.items() if k not in strip} == {
        k: v for k, v in cli.items() if k not in strip
    }
    assert api.to_json() == served
    assert api.diverged is True and api.divergent_count == len(doc["calls"])
