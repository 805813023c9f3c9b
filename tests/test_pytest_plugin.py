"""The pytest plugin, in its own pytest runs (pytester): budgets fail or pass real compiled tests."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.torch

TESTS = """
import pytest
import torch


def breaks(x):
    x = x.sin()
    print("side effect")
    return x.cos()


def clean(x):
    return x.sin().cos()


@pytest.mark.tcx(max_graph_breaks=0)
def test_over_budget():
    torch.compile(breaks, backend="eager")(torch.randn(4))


@pytest.mark.tcx(max_graph_breaks=0, max_recompiles=0)
def test_within_budget():
    torch.compile(clean, backend="eager")(torch.randn(4))


@pytest.mark.tcx(max_graph_breaks=1)
def test_budget_allows_one():
    torch.compile(breaks, backend="eager")(torch.randn(4))


def test_fixture(tcx_record):
    f = torch.compile(clean, backend="eager", dynamic=False)
    with tcx_record(max_recompiles=1) as run:
        f(torch.randn(4))
        f(torch.randn(5))
    assert run.explanation.graph_break_count == 0
    assert run.model.recompile_count == 1


def test_fixture_over_budget(tcx_record):
    f = torch.compile(clean, backend="eager", dynamic=False)
    with tcx_record(max_recompiles=0):
        f(torch.randn(4))
        f(torch.randn(5))
"""


def test_budgets_fail_and_pass(pytester):
    pytester.makepyfile(test_compiled=TESTS)
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=3, failed=2)
    out = result.stdout.str()
    assert "test_over_budget" in out and "graph breaks 1 > 0 (--max-graph-breaks)" in out
    assert "Failed to trace builtin operator" in out  # the explain report of the failing test
    assert "test_fixture_over_budget" in out and "recompiles 1 > 0" in out


def test_unknown_budget_is_a_usage_error(pytester):
    pytester.makepyfile(test_bad="import pytest\n\n@pytest.mark.tcx(max_breaks=0)\ndef test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-q")
    assert result.ret != 0
    assert "unknown budget" in result.stdout.str() + result.stderr.str()


def test_plugin_load_does_not_import_torch(pytester):
    pytester.makepyfile(
        test_plain="import sys\n\ndef test_no_torch():\n    assert 'torch' not in sys.modules\n"
    )
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=1)
