"""`tcx diff A B`: compare two runs (recordings or TORCH_TRACE logs, each optionally `FILE:func`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from tcx.cli.views import view_command
from tcx.core.views.registry import get

if TYPE_CHECKING:
    from tcx.core.views.run_facts import RunFacts

VIEW = get("diff")


@view_command(
    VIEW,
    click.argument("a"),
    click.argument("b"),
    click.option(
        "--fail-on-regression",
        is_flag=True,
        help="Exit 1 when B is worse: more graph breaks, recompiles, graphs or failed frames.",
    ),
    takes_target=False,
)
def command(**params: Any) -> None:
    from tcx.cli import common
    from tcx.core.errors import EXIT_BUDGET
    from tcx.core.run import forked
    from tcx.core.views.diff import diff
    from tcx.renderers.formats import write

    b = forked.start(side_facts, params["b"])  # B in a fork while A is read here (2+ cores)
    facts_a = side_facts(params["a"])
    result = diff(facts_a, forked.result(b, lambda: side_facts(params["b"])))
    write(VIEW, result, params["fmt"], common.console(params), params)
    if params["fail_on_regression"] and result.regressions:
        sys.exit(EXIT_BUDGET)


def side_facts(path: str) -> RunFacts:
    """The facts of one side (`FILE`, `FILE:func`, or a baseline file)."""
    from tcx.cli import common
    from tcx.core.views.run_facts import baseline_file

    baseline = baseline_file(path)
    if baseline is not None:
        return baseline
    loaded = common.load_file(path)
    return VIEW.builder()(loaded.model, common.selection(loaded))
