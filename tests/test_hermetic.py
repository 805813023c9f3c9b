"""The suite is hermetic: the environment of whoever runs it does not change its outcome.

The variables that change how tcx, rich or click print (NO_COLOR, FORCE_COLOR, COLUMNS, TERM,
tcx's own TCX_*) are cleared or fixed by conftest.py; here the tests that are sensitive to them
(colour, width, the terminal app, syntax highlighting only when colour is on) run in a pytest of
their own with those variables set to hostile values, and must pass.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import tcx_fork
from conftest import ENV_CLEARED, ENV_FIXED, REPO

# Tests that failed once with NO_COLOR=1 in the environment, and the renderers' colour tests.
SENSITIVE = (
    "tests/test_browse.py::test_pilot_without_colour_the_detail_has_no_colour",
    "tests/test_big_runs.py::test_pygments_runs_only_when_colour_is_on_and_only_for_what_is_printed",
    "tests/test_renderers.py",
)
HOSTILE = {
    "NO_COLOR": "1",
    "FORCE_COLOR": "1",
    "CLICOLOR_FORCE": "1",
    "COLUMNS": "31",
    "LINES": "5",
    "TERM": "dumb",
    "TCX_DEBUG": "1",
    "TCX_COMPLETE": "bash_source",
}


def test_every_cleared_variable_is_tried():
    assert set(ENV_CLEARED) <= set(HOSTILE) and "TERM" in HOSTILE


@pytest.mark.nested  # three more pytests (about 40 CPU-seconds): in make test, not the inner loop
@pytest.mark.parametrize("name", ["all at once", "NO_COLOR", "FORCE_COLOR"])
def test_sensitive_tests_pass_with_the_variables_set(name):
    env = {**os.environ, **(HOSTILE if name == "all at once" else {name: HOSTILE[name]})}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *SENSITIVE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout


ISA_LIST = """
from torch._inductor import cpu_vec_isa
print([str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()], str(cpu_vec_isa.pick_vec_isa()))
"""


@pytest.mark.torch
def test_the_vector_isas_the_suite_assumes_are_the_ones_inductors_probes_find(tmp_path):
    """The suite sets TORCHINDUCTOR_VEC_ISA_OK=1 (conftest.ENV_FIXED): Inductor then takes every set
    /proc/cpuinfo lists without building and loading its probes. On a machine where a probe fails,
    kernels would differ from a user's: here the probes run (in a new cache folder, the variable
    unset) and must pick what the suite's own environment picks."""
    assert os.environ["TORCHINDUCTOR_VEC_ISA_OK"] == ENV_FIXED["TORCHINDUCTOR_VEC_ISA_OK"] == "1"
    assumed = tcx_fork.run_python(["-c", ISA_LIST])
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_VEC_ISA_OK"}
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "cache")
    probed = subprocess.run(
        [sys.executable, "-c", ISA_LIST], env=env, capture_output=True, text=True, timeout=300
    )
    for proc in (assumed, probed):
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert any((tmp_path / "cache").rglob("*.so")), "the probes built nothing: the check did not run"
    assert assumed.stdout == probed.stdout and "[" in probed.stdout, (assumed.stdout, probed.stdout)
