"""pytest plugin (entry point `pytest11`): graph-break and recompile budgets for test bodies.

    @pytest.mark.tcx(max_graph_breaks=0, max_recompiles=1)
    def test_model_compiles_cleanly():
        ...

    def test_part(tcx_record):
        with tcx_record(max_graph_breaks=0) as run:
            ...
        assert run.explanation.graph_break_count == 0

A test over budget fails with the explain report. Loading the plugin imports neither
torch nor rich; only tests that use it do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

BUDGET_NAMES = (
    "max_graph_breaks",
    "max_unique_graph_breaks",
    "max_recompiles",
    "max_graphs",
    "max_failed_frames",
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "tcx(max_graph_breaks=None, max_unique_graph_breaks=None, max_recompiles=None, max_graphs=None, "
        "max_failed_frames=None): record the test's torch.compile activity and fail it over budget",
    )


class RecordedRun:
    """What a recorded block compiled: `.model`, `.explanation` and `.check` (after the block)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.model: Any = None
        self.explanation: Any = None
        self.check: Any = None


def _budgets(kwargs: dict[str, Any]) -> dict[str, int]:
    unknown = set(kwargs) - set(BUDGET_NAMES)
    if unknown:
        raise pytest.UsageError(
            f"tcx marker: unknown budget(s) {sorted(unknown)}; use {', '.join(BUDGET_NAMES)}"
        )
    return {k: int(v) for k, v in kwargs.items() if v is not None}


@contextmanager
def _recorded(label: str, budgets: dict[str, int]) -> Iterator[RecordedRun]:
    from tcx.core.model import build_model
    from tcx.core.recorder.inprocess import InProcessRecorder
    from tcx.core.views.check import evaluate
    from tcx.core.views.explain import explain

    run = RecordedRun(label)
    recorder = InProcessRecorder(label)
    try:
        with recorder:
            yield run
        run.model = build_model(recorder.recording(), "live")
    finally:
        recorder.cleanup()
    run.explanation = explain(run.model)
    run.check = evaluate(run.explanation, budgets)
    if run.check.failed:
        pytest.fail(_report(run), pytrace=False)


def _report(run: RecordedRun) -> str:
    import io

    from tcx.renderers.console import make_console
    from tcx.renderers.explain_terminal import render_explain

    over = ", ".join(f"{v.label} {v.actual} > {v.limit} ({v.option})" for v in run.check.failed)
    buffer = io.StringIO()
    render_explain(run.explanation, make_console(buffer, color=False, width=100))
    return f"tcx budget exceeded in {run.label}: {over}\n\n{buffer.getvalue()}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    marker = item.get_closest_marker("tcx")
    if marker is None:
        return (yield)
    with _recorded(item.nodeid, _budgets(dict(marker.kwargs))):
        result = yield
    return result


@pytest.fixture
def tcx_record(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """`with tcx_record(max_graph_breaks=0) as run:` records the block and enforces its budgets."""

    def start(**budgets: Any) -> Any:
        return _recorded(request.node.nodeid, _budgets(budgets))

    return start
