"""`tcx browse TARGET`: walk a whole run in a terminal app (frames, compiles, breaks, guards, graphs,
kernels), with links between them. Needs textual (`pip install tcx[browse]`), imported only here."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from tcx.cli.options import run_options
from tcx.cli.views import EPILOG


@click.command(name="browse", epilog=EPILOG)
@run_options
@click.option("--no-color", is_flag=True, help="No colours (also when NO_COLOR is set).")
def command(**params: Any) -> None:
    """Walk a run in a terminal app: frames, compiles, breaks, guards, graphs, kernels, and the links
    between them (a break to its resume compile, a kernel to its ATen ops and lines, a recompile
    to its failing guard). Keyboard only: / search, b k g jump, 1-9 follow a link, q quit."""
    from tcx.cli import common
    from tcx.core.errors import EXIT_INTERNAL, UsageError
    from tcx.core.views.registry import all_captures, get

    try:
        from tcx.tui.app import BrowseApp
    except ImportError as exc:
        if not (exc.name or "").startswith("textual"):
            raise
        raise UsageError(
            "tcx browse needs textual (the terminal-app framework), which is not installed.",
            hint="Install it with: pip install tcx[browse]",
        ) from None
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "tcx browse is interactive and needs a terminal (stdin and stdout); "
            "for output to a file or a pipe use `tcx report`."
        )
    loaded = common.load(params, get("report").fresh_compile, capture=all_captures())
    selection = common.selection(loaded)
    color = not (params["no_color"] or os.environ.get("NO_COLOR"))
    if not color:
        os.environ["NO_COLOR"] = "1"  # textual reads it when the app starts
    app = BrowseApp(loaded.model, selection, color=color)
    app.run()
    common.saved_note(loaded)
    if app.failure or (app.return_code or 0) != 0:
        if os.environ.get("TCX_DEBUG") and app.failure_traceback:
            click.echo(app.failure_traceback, err=True)
        click.echo(
            f"tcx: internal error ({app.failure or 'the app stopped'}). This is a bug in tcx; "
            "rerun with TCX_DEBUG=1 for the traceback and report it.",
            err=True,
        )
        sys.exit(EXIT_INTERNAL)
    common.finish(loaded.model)
