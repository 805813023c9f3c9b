"""`tcx fix`'s code rewrites (`torch._check`, nonstrict_trace / allow_in_graph on a helper, a print moved
after the compiled call), each re-run from a copy of the program and judged from that run.

The truth is torch's: every count equals torch's own TORCH_TRACE log of the patched run
(`--keep-logs`, read by conftest's tiny parser), the patch from the JSON is applied with `patch(1)` to
a copy and run by plain `python` where the claim is about what the program does, and the program's
own file is never changed. Each program runs once per module (module-scoped fixtures).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import tcx_fork
from conftest import PROGRAMS, TorchTrace, read_torch_trace, tool
from fix_runs import counts, figures, fix_json, remedy

pytestmark = [pytest.mark.torch]

FIX = PROGRAMS / "fix"


def fix_run(factory: pytest.TempPathFactory, program: str, *extra: str) -> tuple[dict, Path, bytes]:
    """`tcx fix --format json --keep-logs` of fixtures/programs/fix/PROGRAM: (doc, logs, file bytes
    before the run)."""
    path = FIX / program
    before = path.read_bytes()
    logs = factory.mktemp(program.removesuffix(".py")) / "logs"
    return fix_json(path, logs, *extra), logs, before


def break_lines(trace: TorchTrace) -> set[str]:
    return {line for _file, line, _reason in trace.break_sites}


def changed_lines(patch: str) -> list[str]:
    return [ln for ln in patch.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def patched_copy(program: str, patch: str, folder: Path) -> Path:
    """The program with the remedy's patch applied by patch(1) (not by tcx), in `folder`."""
    copy = folder / program
    copy.write_bytes((FIX / program).read_bytes())
    patch_file = folder / f"{program}.tcx.patch"
    patch_file.write_text(patch, encoding="utf-8")
    tool_path = tool("patch", "applies the remedy's diff independently of tcx")
    with patch_file.open() as fh:
        done = subprocess.run([tool_path, str(copy)], stdin=fh, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return copy


def plain_python(*args: str) -> subprocess.CompletedProcess:
    """`python ARGS` as a user runs it, with no tcx: the worker's environment and compile caches (a
    fork of the worker's process that imported torch; tests/test_tcx_fork.py holds it to a fresh
    Python's output and torch log)."""
    return tcx_fork.run_python(list(args))


def assert_torchs_counts(doc: dict, logs: Path, r: dict) -> TorchTrace:
    """The baseline's and the remedy's figures are torch's counts of those two runs; torch's log of
    the remedy's run is returned."""
    assert figures(doc["before"]) == counts(read_torch_trace(logs / "baseline"))
    assert r["ran"] and Path(r["trace_log"]).parent == logs
    after = read_torch_trace(Path(r["trace_log"]))
    assert figures(r["after"]) == counts(after)
    return after


# --- torch._check: a guard clause on a number read with .item() ---------------------------------


@pytest.fixture(scope="module")
def check_guard(tmp_path_factory):
    return fix_run(tmp_path_factory, "check_guard.py")


def test_a_guard_clause_on_an_unbacked_number_is_verified_as_torch_check(check_guard):
    doc, logs, before = check_guard
    baseline = read_torch_trace(logs / "baseline")
    assert baseline.graph_breaks == 1 and break_lines(baseline) == {"12"}  # torch: the `if n < 0:`
    r = remedy(doc, "torch._check")
    assert r["kind"] == "code" and r["change"] == "torch._check(n >= 0)"
    assert r["finding"]["what"] == "Data-dependent branching" and r["finding"]["site"]["line"] == 12
    after = assert_torchs_counts(doc, logs, r)
    assert after.graph_breaks == 0 and after.graphs == 1  # torch's log of the copy's run: one graph
    assert r["verified"] is True and r["why_not"] is None
    assert r["outputs_match"] is True, r["outputs_note"]
    assert changed_lines(r["patch"]) == [
        "-    if n < 0:",
        '-        raise ValueError(f"negative count {n}")',
        "+    torch._check(n >= 0)  # tcx fix: the guard clause as torch._check",
        '+    #     raise ValueError(f"negative count {n}")',
    ]
    # the raise is the only branch: no torch.cond rewrite and no advice beside the check
    assert [x["change"] for x in doc["remedies"] if x["kind"] == "code"] == ["torch._check(n >= 0)"]
    assert (FIX / "check_guard.py").read_bytes() == before


def test_the_check_stays_an_assert_torch_runs_with_the_graph(check_guard, tmp_path):
    doc, _, _ = check_guard
    copy = patched_copy("check_guard.py", remedy(doc, "torch._check")["patch"], tmp_path)
    negative = (
        "import runpy, torch; g = runpy.run_path({!r}); g['head'](torch.arange(4.0), torch.tensor([-3]))"
    )
    proc = plain_python("-c", negative.format(str(copy)))
    assert proc.returncode == 1 and "RuntimeError" in proc.stderr, proc.stderr[-2000:]
    assert "u0 >= 0" in proc.stderr  # torch's own runtime assert, not the program's ValueError


# --- nonstrict_trace / allow_in_graph on a helper that breaks the graph ------------------------


@pytest.fixture(scope="module")
def helper_break(tmp_path_factory):
    return fix_run(tmp_path_factory, "helper_break.py")


@pytest.mark.parametrize("decorator", ["torch._dynamo.nonstrict_trace", "torch.compiler.allow_in_graph"])
def test_a_helper_dynamo_cannot_trace_is_verified_with_its_decorator(helper_break, decorator):
    doc, logs, before = helper_break
    baseline = read_torch_trace(logs / "baseline")
    assert baseline.graph_breaks == 2  # torch: json's scanner, in step's trace and in rescale's
    assert {file for file, _line, _reason in baseline.break_sites} == {
        str(Path(json.__file__).parent / "decoder.py")
    }
    r = remedy(doc, decorator)
    assert r["change"] == f"@{decorator}  # on def rescale"
    assert r["finding"]["what"] == "Unsupported method call"
    after = assert_torchs_counts(doc, logs, r)
    assert after.graph_breaks == 0 and after.graphs == 1
    assert r["verified"] is True and r["outputs_match"] is True, r["why_not"]
    assert changed_lines(r["patch"]) == [
        "-",
        f"+@{decorator}  # tcx fix: Dynamo does not trace into this helper",
    ]
    assert "@@ -7,7 +7,7 @@" in r["patch"]  # the decorator took the blank line above `def rescale`
    assert (FIX / "helper_break.py").read_bytes() == before


def test_nonstrict_trace_is_tried_before_allow_in_graph(helper_break):
    doc, _, _ = helper_break
    tried = [r["change"].split()[0] for r in doc["remedies"]]
    assert tried == ["@torch._dynamo.nonstrict_trace", "@torch.compiler.allow_in_graph"]


# --- a remedy whose outputs change: the helper reads a global the program changes ------------------


@pytest.fixture(scope="module")
def helper_global(tmp_path_factory):
    return fix_run(tmp_path_factory, "helper_global.py", "--max-runs", "1")


def test_a_helper_traced_once_freezes_a_global_and_is_not_verified(helper_global):
    doc, logs, before = helper_global
    r = remedy(doc, "nonstrict_trace")
    after = assert_torchs_counts(doc, logs, r)
    assert after.graph_breaks == 0  # the break is gone, as with a helper that reads no global
    # the outputs differ from the second call on, and the program repeats its own outputs
    assert r["outputs_match"] is False and r["outputs_note"].startswith("call #1 (step): output 0 differs")
    assert (logs / "baseline-again").is_dir() and doc["outputs_repeatable"] is True
    assert r["verified"] is False and "outputs changed: call #1 (step)" in r["why_not"]
    assert remedy(doc, "allow_in_graph")["why_not"] == "not run: --max-runs 1 reached"
    assert (FIX / "helper_global.py").read_bytes() == before


def test_plain_python_shows_the_decorated_helper_keeps_the_first_setting(helper_global, tmp_path):
    doc, _, _ = helper_global
    copy = patched_copy("helper_global.py", remedy(doc, "nonstrict_trace")["patch"], tmp_path)
    calls = (
        "import importlib.util, json, sys, torch\n"
        "spec = importlib.util.spec_from_file_location('prog', sys.argv[1])\n"
        "prog = importlib.util.module_from_spec(spec); spec.loader.exec_module(prog)\n"
        "for scale in (1.0, 2.0, 3.0):\n"
        "    prog.SETTINGS = json.dumps({'scale': scale})\n"
        "    print(round(prog.step(torch.ones(8))[0].item(), 5))\n"
    )
    original = plain_python("-c", calls, str(FIX / "helper_global.py"))
    decorated = plain_python("-c", calls, str(copy))
    assert original.returncode == 0 and decorated.returncode == 0, original.stderr + decorated.stderr
    assert len(set(original.stdout.split())) == 3  # the program's own outputs follow the setting
    assert decorated.stdout.split() == [original.stdout.split()[0]] * 3  # traced once: the first one


# --- a print of the result moved after the compiled call -------------------------------------------


@pytest.fixture(scope="module")
def print_result(tmp_path_factory):
    return fix_run(tmp_path_factory, "print_result.py")


def test_a_print_before_the_return_is_moved_after_each_call_and_verified(print_result):
    doc, logs, before = print_result
    baseline = read_torch_trace(logs / "baseline")
    assert baseline.graph_breaks == 1 and break_lines(baseline) == {"10"}
    r = remedy(doc, "after each call of step")
    assert r["change"] == 'print("step y:", y.shape) after each call of step (2 in the file)'
    after = assert_torchs_counts(doc, logs, r)
    assert after.graph_breaks == 0
    assert r["verified"] is True and r["outputs_match"] is True, r["why_not"]
    mark = "  # tcx fix: the print moved after the compiled call"
    assert changed_lines(r["patch"]) == [
        '-    print("step y:", y.shape)',
        f'+    # print("step y:", y.shape){mark}',
        "-        out = step(torch.randn(n))",
        "-    step(torch.randn(4))",
        f'+        out = step(torch.randn(n)); print("step y:", out.shape){mark}',
        f'+    print("step y:", step(torch.randn(4)).shape){mark}',
    ]
    assert (FIX / "print_result.py").read_bytes() == before


def test_the_config_remedy_torch_refuses_for_this_print_is_not_verified(print_result):
    doc, logs, _ = print_result
    r = remedy(doc, "reorderable_logging_functions")
    after = assert_torchs_counts(doc, logs, r)
    assert "10" in break_lines(after)  # torch's log: the print still breaks the graph
    assert r["verified"] is False and "a new graph break appeared" in r["why_not"]


def test_the_moved_print_prints_what_the_program_printed(print_result, tmp_path):
    doc, _, _ = print_result
    copy = patched_copy("print_result.py", remedy(doc, "after each call of step")["patch"], tmp_path)
    original, moved = plain_python(str(FIX / "print_result.py")), plain_python(str(copy))
    assert original.returncode == 0 and moved.returncode == 0, original.stderr + moved.stderr
    assert original.stdout == moved.stdout == "step y: torch.Size([4])\n" * 4


# --- the shapes each rewrite refuses (pure: no run) ----------------------------------------------


def site(
    file: Path, line: int, stack: tuple[tuple[int, str], ...] = (), frame: str = "f", debug: str = ""
) -> SimpleNamespace:
    """A break site as core/views/explain.py makes it, with only what the rewriters read."""
    frames = [SimpleNamespace(file=str(file), line=ln, name=name, origin="user") for ln, name in stack]
    occurrence = SimpleNamespace(frame=frame, debug_context=debug)
    return SimpleNamespace(file=str(file), line=line, user_stack=frames, occurrences=[occurrence])


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prog.py"
    path.write_text("import torch\n\n\n" + text, encoding="utf-8")
    return path


def test_the_check_rewrite_refuses_a_branch_the_program_takes(tmp_path):
    from tcx.core.fix.check_rewrite import check_rewrite

    path = write(
        tmp_path,
        "@torch.compile\ndef f(x, c):\n    n = c.item()\n    if n < 0:\n        x = -x\n    return x\n",
    )
    made = check_rewrite(site(path, 7, debug="attempted to jump with SymNodeVariable()"))
    assert made == "the `if` does more than raise (torch._check would drop a branch the program takes)"
    tensor = check_rewrite(site(path, 7, debug="attempted to jump with TensorVariable()"))
    assert tensor.startswith("the branch is on a tensor")


def test_the_helper_rewrite_refuses_a_break_in_the_compiled_function_itself(tmp_path):
    from tcx.core.fix.helper_rewrite import helper_rewrites

    path = write(tmp_path, "@torch.compile\ndef f(x):\n    return x * len(str(x))\n")
    made = helper_rewrites(site(path, 6, stack=((6, "f"),), frame="f"))
    assert made == "the break is in the compiled function itself, not in a helper it calls"


def test_the_print_rewrite_refuses_a_print_in_the_middle_or_a_call_inside_an_expression(tmp_path):
    from tcx.core.fix.print_rewrite import print_rewrite

    middle = write(tmp_path, '@torch.compile\ndef f(x):\n    print("x", x)\n    y = x + 1\n    return y\n')
    assert print_rewrite(site(middle, 6)) == "the print is not just before the function's final return"
    expression = write(
        tmp_path,
        "@torch.compile\ndef f(x):\n    y = x + 1\n    print(y)\n    return y\n\n\nf(torch.ones(2)).sum()\n",
    )
    assert print_rewrite(site(expression, 7)) == "f is used at line 11 other than in a call statement"
    local = write(tmp_path, "@torch.compile\ndef f(x):\n    y = x + 1\n    print(x)\n    return y\n")
    assert print_rewrite(site(local, 7)) == "the print reads x, which the function does not return"


def test_a_helper_rewrite_the_installed_torch_cannot_run_says_so_and_the_other_runs(tmp_path):
    from tcx.core.fix.candidates import _add_break_remedy

    path = write(
        tmp_path,
        "def helper(x):\n    return x * len(str(x))\n\n\n@torch.compile\ndef f(x):\n    return helper(x)\n",
    )
    broken = site(path, 5, stack=((10, "f"), (5, "helper")), frame="f")
    broken.gb_type, broken.explanation, broken.function = "Unsupported method call", "", "helper"
    broken.occurrences[0].compile_id = "0/0"
    by_change: dict = {}
    lacking = {"nonstrict_trace": "torch._dynamo.nonstrict_trace is not available on torch 2.5"}
    _add_break_remedy(by_change, broken, lacking)
    nonstrict, allow = by_change.values()
    assert nonstrict.change == "@torch._dynamo.nonstrict_trace  # on def helper"
    assert not nonstrict.runnable and nonstrict.why_not_run == lacking["nonstrict_trace"]
    assert allow.change == "@torch.compiler.allow_in_graph  # on def helper" and allow.runnable
    assert (nonstrict.alternative, allow.alternative) == (0, 1)
