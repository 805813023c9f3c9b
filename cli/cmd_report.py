"""`tcx report TARGET|RECORDING|LOG`: the overview, then every view, in one document."""

from __future__ import annotations

from typing import Any

import click

from tcx.cli.views import view_command
from tcx.core.views import all_captures, get

VIEW = get("report")


@view_command(
    VIEW,
    click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False),
        default=None,
        metavar="FILE",
        help="Write the report to FILE instead of stdout (e.g. report.html).",
    ),
)
def command(**params: Any) -> None:
    import contextlib
    import sys

    from tcx.cli import common
    from tcx.core.report import build_report
    from tcx.renderers.report_output import render_report

    loaded = common.load(params, VIEW.fresh_compile, capture=all_captures())
    report = build_report(loaded.model, common.selection(loaded))
    if params["output"]:
        with open(params["output"], "w", encoding="utf-8") as out, contextlib.redirect_stdout(out):
            console = common.console({**params, "no_color": True}) if params["fmt"] == "text" else None
            render_report(report, params["fmt"], console or common.console(params))
        click.echo(f"report written to {params['output']}", err=True)
    else:
        render_report(report, params["fmt"], common.console(params))
    common.saved_note(loaded)
    sys.stdout.flush()
    common.finish(loaded.model)
