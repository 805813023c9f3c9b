"""`tcx guards TARGET`: every cache entry's guards, grouped by what they protect."""

from __future__ import annotations

from typing import Any

import click

from tcx.cli.options import DYNAMO_ONLY_REASON, render_options, run_options


@click.command(name="guards")
@run_options
@click.option("--compile", "compile_id", default=None, metavar="ID", help="Only this compile id (e.g. 0/1).")
@click.option(
    "--function", default=None, metavar="NAME", help="Only entries of NAME (and its resume functions)."
)
@click.option("--all-text", is_flag=True, help="Show every guard's full text (default: one line per guard).")
@render_options(("text", "json"))
def command(**params: Any) -> None:
    """Every cache entry of TARGET's frames: its guards, what they protect, which line caused each."""
    from tcx.cli import common
    from tcx.core.guards import build_guards, to_json

    loaded = common.load(params, "eager", DYNAMO_ONLY_REASON, capture=("guards",))
    view = build_guards(loaded.model, params["function"] or loaded.function, params["compile_id"])
    if params["fmt"] == "json":
        common.emit_json(to_json(view))
    else:
        from tcx.renderers.guards_terminal import render_guards

        render_guards(view, common.console(params), full=params["all_text"])
        common.saved_note(loaded)
    common.finish(loaded.model)
