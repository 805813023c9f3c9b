"""Runs keep to themselves: two runs in one folder keep two recordings (core/run/last_run.py);
`python -m tcx` runs from the checkout's root however tcx is installed (tcx/__init__.py); and a
failure in tcx's own code is reported as tcx's (exit 5, naming tcx's line), never as the
program's exception (core/recorder/program.tcx_fault). Runs use `--backend eager`: nothing here
needs Inductor."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import REPO, run_tcx

SLOW_PROGRAM = """
import sys, time
import torch

@torch.compile(backend="eager")
def f_{name}(x):
    return x * 2 + 1

time.sleep(4)  # the other run starts and ends while this one runs
print(f_{name}(torch.ones(3)).sum().item())
"""


def _start(folder: Path, name: str) -> subprocess.Popen:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "tcx", "explain", f"{name}.py", "--backend", "eager", "--format", "json"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.torch
def test_two_runs_at_once_in_one_folder_keep_two_recordings(tmp_path: Path) -> None:
    """Each run names its own recording (its drill-downs open it) and each recording is its own
    program's, whole: a view of it gives that program's compiled function. `last.tcx` is one of
    the two, whole."""
    for name in ("a", "b"):
        (tmp_path / f"{name}.py").write_text(SLOW_PROGRAM.format(name=name))
    runs = {name: _start(tmp_path, name) for name in ("a", "b")}
    saved = {}
    for name, proc in runs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        assert json.loads(out)["graph_count"] == 1
        saved[name] = re.search(r"recording saved to (\S+)", err).group(1)  # type: ignore[union-attr]
    assert saved["a"] != saved["b"] and all(Path(tmp_path, s).is_file() for s in saved.values())
    for name, path in saved.items():
        doc = json.loads(run_tcx("graphs", str(tmp_path / path), "--format", "json").stdout)
        assert doc["target"].endswith(f"{name}.py") and doc["program"]["status"] == "ok"
        assert [f"in f_{name}" in c["graphs"]["dynamo"] for c in doc["compiles"]] == [True]
    last = (tmp_path / ".tcx" / "last.tcx").read_bytes()
    assert last in {(tmp_path / path).read_bytes() for path in saved.values()}  # one of them, whole
    assert not list((tmp_path / ".tcx").glob("running-*")) and not list((tmp_path / ".tcx").glob("*.partial"))


def test_python_m_tcx_runs_from_the_checkout_root() -> None:
    """From the root, Python imports the checkout's tcx/ folder as `tcx`; its cli/, core/ ...
    are found beside it even without the editable install's mapping (`-S`: no site hooks, the
    dependencies on PYTHONPATH), as with a non-editable install, where `tcx.cli` was missing."""
    plain = subprocess.run(
        [sys.executable, "-m", "tcx", "--version"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert plain.returncode == 0 and "tcx, version" in plain.stdout, plain.stderr
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    shadowed = subprocess.run(
        [sys.executable, "-S", "-m", "tcx", "--version"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shadowed.returncode == 0 and "tcx, version" in shadowed.stdout, shadowed.stderr


SABOTAGE = """
import torch
import tcx.core.recorder.compat as compat

compat._short = None  # tcx's torch.compile wrapper now fails in its own line
f = torch.compile(lambda x: x + 1)
print(f(torch.ones(2)))
"""


@pytest.mark.torch
def test_a_failure_in_tcxs_own_code_exits_5_and_names_tcxs_line(tmp_path: Path) -> None:
    program = tmp_path / "sabotage.py"
    program.write_text(SABOTAGE)
    proc = run_tcx("explain", str(program), "--backend", "eager", "--no-save")
    assert proc.returncode == 5, (proc.returncode, proc.stderr[-2000:])
    text = " ".join(proc.stderr.split())
    assert "tcx's own code failed while the program ran (raised at" in text
    assert re.search(r"core/recorder/compat\.py:\d+ in \S+: ", text), text
    assert "TypeError: 'NoneType' object is not callable" in text
    assert "the program stopped" not in proc.stdout


@pytest.mark.torch
def test_tcx_fault_tells_tcxs_failures_from_the_programs() -> None:
    """Real exceptions: one raised in a line of tcx (an AttributeError in a hook), the same
    re-raised by torch as the cause of its own, Dynamo's message naming tcx's file as the code it
    traced; and the program's own error, which is not tcx's."""
    from tcx.core.recorder import compat_fakecuda_values
    from tcx.core.recorder.program import tcx_fault

    try:
        compat_fakecuda_values.attach(None, 1)  # type: ignore[arg-type]
    except AttributeError as exc:
        own = exc
    assert re.match(
        r"raised at .*core/recorder/compat_fakecuda_values\.py:\d+ in attach", tcx_fault(own) or ""
    )
    try:
        raise RuntimeError("backend compiler failed") from own
    except RuntimeError as exc:
        assert tcx_fault(exc) == tcx_fault(own)

    traced = Path(compat_fakecuda_values.__file__)
    dynamo = RuntimeError(
        "AttributeError: 'dict' object has no attribute 'node'\n\nfrom user code:\n"
        f'   File "{traced}", line 73, in attach\n    fake.__dict__[VALUE] = value\n'
    )
    assert tcx_fault(dynamo) == f"Dynamo traced tcx's own code at {traced}:73 in attach"

    def programs_own() -> None:
        {}["missing"]

    try:
        programs_own()
    except KeyError as exc:
        assert tcx_fault(exc) is None
