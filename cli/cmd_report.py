"""`tcx report TARGET|RECORDING|LOG`: the overview, then every view, in one document."""

from __future__ import annotations

from typing import Any

import click

from tcx.cli.views import view_command
from tcx.core.views.registry import all_captures, get

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
    from tcx.core.files import replacing
    from tcx.core.views.report import build_report
    from tcx.renderers.formats import write

    loaded = common.load(params, VIEW.fresh_compile, capture=all_captures())
    report = build_report(loaded.model, common.selection(loaded))
    fmt = params["fmt"]
    follow_up = {"target": common.rerender_target(loaded, params["target"])} if fmt != "json" else {}
    if params["output"]:
        output = replacing(params["output"], "w", option="-o", encoding="utf-8")
        with output as out, contextlib.redirect_stdout(out):
            console = common.console({**params, "no_color": True}) if fmt == "text" else None
            write(VIEW, report, fmt, console or common.console(params), params, **follow_up)
        click.echo(f"report written to {params['output']}", err=True)
    else:
        write(VIEW, report, fmt, common.console(params), params, **follow_up)
    common.saved_note(loaded)
    sys.stdout.flush()
    common.finish(loaded.model)
