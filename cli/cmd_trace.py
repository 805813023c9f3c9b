"""`tcx trace TARGET`: Dynamo's symbolic execution, instruction by instruction."""

from __future__ import annotations

from typing import Any

import click

from tcx.cli.options import DYNAMO_ONLY_REASON, render_options, run_options


@click.command(name="trace")
@run_options
@click.option("--compile", "compile_id", default=None, metavar="ID", help="Only this compile id (e.g. 0/1).")
@click.option(
    "--function", default=None, metavar="NAME", help="Only compiles of NAME (and its resume functions)."
)
@click.option(
    "--limit",
    type=int,
    default=None,
    metavar="N",
    help="Instructions shown per compile (text default 400, JSON default all; 0 = all).",
)
@render_options(("text", "json"))
def command(**params: Any) -> None:
    """What Dynamo did while it traced TARGET: each instruction's simulated stack and FX nodes."""
    from tcx.cli import common
    from tcx.core.trace_view import build_trace, to_json

    loaded = common.load(params, "eager", DYNAMO_ONLY_REASON, capture=("instructions", "guards"))
    view = build_trace(loaded.model, params["function"] or loaded.function, params["compile_id"])
    limit = params["limit"]
    if params["fmt"] == "json":
        doc = to_json(view)
        if limit:
            for comp in doc["compiles"]:
                extra = len(comp["instructions"]) - limit
                if extra > 0:
                    comp["instructions"] = comp["instructions"][:limit]
                    comp["elided_instructions"] += extra
        common.emit_json(doc)
    else:
        from tcx.renderers.trace_terminal import render_trace

        render_trace(view, common.console(params), limit=400 if limit is None else limit)
        common.saved_note(loaded)
    common.finish(loaded.model)
