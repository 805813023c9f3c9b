"""`tcx bytecode TARGET`: each compiled frame's original and transformed bytecode, decompiled."""

from __future__ import annotations

from typing import Any

import click

from tcx.cli.options import DYNAMO_ONLY_REASON, render_options, run_options


@click.command(name="bytecode")
@run_options
@click.option("--compile", "compile_id", default=None, metavar="ID", help="Only this compile id (e.g. 0/1).")
@click.option(
    "--function", default=None, metavar="NAME", help="Only frames of NAME (and its resume functions)."
)
@render_options(("text", "json"))
def command(**params: Any) -> None:
    """Original vs Dynamo's transformed bytecode per compiled frame, as Python, and how the pieces chain."""
    from tcx.cli import common
    from tcx.core.bytecode_view import build_bytecode, to_json

    loaded = common.load(params, "eager", DYNAMO_ONLY_REASON, capture=("bytecode",))
    view = build_bytecode(loaded.model, params["function"] or loaded.function, params["compile_id"])
    if params["fmt"] == "json":
        common.emit_json(to_json(view))
    else:
        from tcx.renderers.bytecode_terminal import render_bytecode

        render_bytecode(view, common.console(params))
        common.saved_note(loaded)
    common.finish(loaded.model)
