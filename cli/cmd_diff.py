"""`tcx diff A B`: compare two runs (recordings or TORCH_TRACE logs)."""

from __future__ import annotations

import sys
from typing import Any

import click

from tcx.cli.options import render_options


@click.command(name="diff")
@click.argument("a")
@click.argument("b")
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit 1 when B is worse: more graph breaks, recompiles, graphs or failed frames.",
)
@render_options(("text", "json", "markdown"))
def command(**params: Any) -> None:
    """Compare run A with run B: breaks added/removed, recompiles, graphs, kernels, compile time."""
    from tcx.cli import common
    from tcx.core.diff import diff
    from tcx.core.errors import EXIT_BUDGET
    from tcx.core.run_facts import run_facts
    from tcx.renderers.diff_output import render_diff

    facts = []
    for side in ("a", "b"):
        loaded = common.load_file(params[side])
        facts.append(run_facts(loaded.model))
    result = diff(*facts)
    render_diff(result, params["fmt"], common.console(params))
    if params["fail_on_regression"] and result.regressions:
        sys.exit(EXIT_BUDGET)
