"""`tcx diff A B`: compare two runs (recordings or TORCH_TRACE logs, each optionally `FILE:func`)."""

from __future__ import annotations

import sys
from typing import Any

import click

from tcx.cli.views import view_command
from tcx.core.views import get

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
    from tcx.core.diff import diff
    from tcx.core.errors import EXIT_BUDGET
    from tcx.renderers.diff_output import render_diff

    facts = []
    for side in ("a", "b"):
        loaded = common.load_file(params[side])
        facts.append(VIEW.builder()(loaded.model, common.selection(loaded)))
    result = diff(*facts)
    render_diff(result, params["fmt"], common.console(params))
    if params["fail_on_regression"] and result.regressions:
        sys.exit(EXIT_BUDGET)
