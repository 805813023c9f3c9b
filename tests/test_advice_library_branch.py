"""A graph break inside a library `if` that a setting of the user's model decides (issue 35, HF GPT-2's
`loss_type`): tcx advises setting that attribute before torch.compile, derived from the break's frames
and the library's source, and `tcx fix` verifies it.

Three live runs, all with the eager backend (about 25 CPU-seconds each, 75 in all on this machine): the
program's explain recording (shared, with torch's own log of it), one `tcx fix --max-runs 1` (its
baseline and the remedy's run, each with torch's log), and a plain `python` run of the program with
the line added by hand (torch's log). The rest is pure: the analysis on small library files.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import tcx_fork
from conftest import PROGRAMS, read_torch_trace, shared_run

GPT2 = PROGRAMS / "models" / "gpt2_loss_type.py"
LINE = 'model.loss_type = "ForCausalLM"'
CHANGE = f"{LINE}  # before torch.compile(model)"


def _recording() -> tuple[dict, Path]:
    run = shared_run("explain", str(GPT2), "--backend", "eager", "--format", "json", save=True, trace=True)
    return run.ok().json(), run.torch_trace


def _compile_line() -> int:
    lines = GPT2.read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if ln.startswith("compiled = torch.compile(model)"))


@pytest.mark.torch
def test_the_library_branch_remedy_heads_the_break_torch_logged() -> None:
    doc, trace = _recording()
    truth = read_torch_trace(trace)
    assert doc["graph_break_count"] == truth.graph_breaks == 7 and doc["unique_graph_break_count"] == 1
    [site] = doc["graph_breaks"]
    assert (site["file"], str(site["line"]), site["type"]) in truth.break_sites  # torch's own site
    assert site["file"].endswith("transformers/modeling_utils.py") and site["function"] == "loss_function"
    text = site["suggestion"]
    assert text.startswith("The break sits in the library's `if loss_type is None or loss_type not in")
    where = f"fixtures/programs/models/gpt2_loss_type.py:{_compile_line()}"
    assert f"at your call site ({where}): `{CHANGE}`" in text
    # the generic logging text names the method the line calls, untested, and no unrelated option
    assert "`warning_once`" in text and "is untested" in text
    assert "logging.Logger.info" not in text and "output_attentions" not in text
    assert text.index(CHANGE) < text.index("A logging call inside the compiled code")


@pytest.mark.torch
def test_fix_verifies_setting_the_attribute_before_compiling(tmp_path: Path) -> None:
    from fix_runs import counts, figures, fix_json, remedy

    logs = tmp_path / "logs"
    doc = fix_json(GPT2, logs, "--backend", "eager", "--max-runs", "1")
    baseline = read_torch_trace(logs / "baseline")
    assert figures(doc["before"]) == counts(baseline) and baseline.graph_breaks == 7
    done = remedy(doc, CHANGE)
    after = read_torch_trace(Path(done["trace_log"]))
    assert done["ran"] and done["verified"], done["why_not"]
    assert figures(done["after"]) == counts(after) and after.graph_breaks == 0
    assert after.recompiles < baseline.recompiles and len(after.compile_ids) < len(baseline.compile_ids)


# the program as it runs, with the eager backend (as the other runs): no tcx anywhere
EAGER = """
import runpy, sys, torch
_compile = torch.compile
def compile(model=None, **kwargs):
    kwargs["backend"] = "eager"
    return _compile(model, **kwargs)
torch.compile = compile
runpy.run_path(sys.argv[1], run_name="__main__")
"""


@pytest.mark.torch
def test_the_line_added_by_hand_leaves_no_break_in_a_plain_run(tmp_path: Path) -> None:
    lines = GPT2.read_text().splitlines(keepends=True)
    at = _compile_line() - 1
    program = tmp_path / "gpt2_fixed.py"
    program.write_text("".join([*lines[:at], LINE + "\n", *lines[at:]]))
    env = {**os.environ, "TORCH_TRACE": str(tmp_path / "trace")}
    proc = tcx_fork.run_python(["-c", EAGER, str(program)], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    fixed = read_torch_trace(tmp_path / "trace")
    _, trace = _recording()
    before = read_torch_trace(trace)
    assert fixed.graph_breaks == 0 and before.graph_breaks == 7
    assert fixed.graphs >= 1 and len(fixed.compile_ids) < len(before.compile_ids)


# ------------------------------------------------------------------ pure: what the analysis reads

LIBRARY = """
import torch
MAPPING = {"A": 1}


class Base(torch.nn.Module):
    def pick(self):
        kind = getattr(self, "kind", None)
        if kind is None or kind not in MAPPING:
            log("unknown kind")
            kind = {assigned}
        return MAPPING[kind]

    def direct(self):
        if self.config.mode != "fast":
            log("slow")
            self.config.mode = "fast"
        return 1
"""
PROGRAM = "import torch\nnet = Net()\nstep = torch.compile(net)\nstep(1)\n"


def _site(tmp_path: Path, assigned: str, function: str = "pick", caller: str = "self.{name}()") -> object:
    from tcx.core.model import Frame

    lib = tmp_path / "site-packages" / "lib.py"
    lib.parent.mkdir(exist_ok=True)
    lib.write_text(LIBRARY.replace("{assigned}", assigned))
    user = tmp_path / "train.py"
    user.write_text(PROGRAM)
    tree = ast.parse(lib.read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "log"]
    line = calls[0].lineno
    stack = [
        Frame(str(user), 4, "<module>", "step(1)"),
        Frame(str(lib), 3, "forward", caller.format(name=function)),
        Frame(str(lib), line, function, "log(...)"),
    ]
    return SimpleNamespace(user_stack=stack, line=line, explanation="", gb_type="t")


def _model(tmp_path: Path) -> object:
    call = SimpleNamespace(target="Net", file=str(tmp_path / "train.py"), line=3)
    return SimpleNamespace(status=SimpleNamespace(torch_compile_calls=[call]))


def test_the_attribute_and_constant_come_from_the_librarys_source(tmp_path: Path) -> None:
    from tcx.core.analysis.library_branch import library_branch

    found = library_branch(_model(tmp_path), _site(tmp_path, '"A"'))  # type: ignore[arg-type]
    assert found is not None and found.path == ("kind",) and found.value == "A"
    assert found.change == 'net.kind = "A"  # before torch.compile(net)'
    assert found.attribute == {"path": ["kind"], "value": "A"}
    direct = library_branch(_model(tmp_path), _site(tmp_path, '"A"', "direct"))  # type: ignore[arg-type]
    assert direct is not None and direct.change == 'net.config.mode = "fast"  # before torch.compile(net)'


def test_nothing_is_advised_without_a_constant_or_without_the_compiled_modules_self(tmp_path: Path) -> None:
    from tcx.core.analysis.library_branch import library_branch

    model = _model(tmp_path)
    assert library_branch(model, _site(tmp_path, "fallback(kind)")) is None  # type: ignore[arg-type]
    other = _site(tmp_path, '"A"', caller="other.{name}()")  # not reached through `self`
    assert library_branch(model, other) is None  # type: ignore[arg-type]


@pytest.mark.torch
def test_a_size_the_library_receives_by_keyword_is_remedied_with_dynamic_true_first() -> None:
    """The sequence length recompiles on `kwargs['input_ids']` of transformers' wrapper; the program passes
    the same tensor as input_ids= and labels=, and the loss (another frame) specializes its length, so a
    mark on `ids` makes torch raise ConstraintViolationError (bench/advice.txt: refuted) while dynamic=True
    removes the recompile (verified). tcx fix tries dynamic=True first; the mark, tried after it, names the
    program's `ids`; the recompiles text leads with dynamic=True and says why a mark can fail."""
    from tcx.cli.session import load
    from tcx.core.fix.candidates import candidates, order
    from tcx.core.views.explain import explain
    from tcx.core.views.recompiles import analyze

    run = shared_run("explain", str(GPT2), "--backend", "eager", "--format", "json", save=True, trace=True)
    model = load(str(run.ok().recording)).model
    report = analyze(model)
    shape = [
        r for r in order(candidates(explain(model), report, already_dynamic=False)) if r.kind == "dynamism"
    ]
    assert shape[0].dynamic is True and shape[0].runnable
    call_line = next(
        i for i, ln in enumerate(GPT2.read_text().splitlines(), 1) if "compiled(input_ids=" in ln
    )
    assert (
        shape[1].change
        == f"torch._dynamo.mark_dynamic(ids, 1)  # before your call at gpt2_loss_type.py:{call_line}"
    )
    assert shape[1].alternative > shape[0].alternative
    marking = {
        c.remedy for c in report.calls if c.remedy and "torch._dynamo.mark_dynamic(ids, 1)" in c.remedy
    }
    assert marking
    for remedy in marking:
        assert remedy.index("compile with dynamic=True") < remedy.index("torch._dynamo.mark_dynamic(ids, 1)")
        assert "ConstraintViolationError if any frame the tensor reaches specializes the size" in remedy
