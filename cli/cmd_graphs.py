"""`tcx graphs TARGET`: Dynamo's graph, AOTAutograd's joint/forward/backward graphs, what is saved."""

from __future__ import annotations

from typing import Any

import click

from tcx.cli.options import render_options, run_options

GRAPHS_BACKEND = "aot_eager_decomp_partition"
GRAPHS_REASON = (
    "AOTAutograd with Inductor's decompositions and min-cut partitioner, without generating kernels; "
    "--backend inductor runs the full pipeline"
)


@click.command("graphs")
@run_options
@click.option(
    "--show",
    "show",
    multiple=True,
    type=click.Choice(["dynamo", "joint", "forward", "backward", "inference", "post_grad", "all", "none"]),
    help="Which graph texts to print (repeatable; default: dynamo, forward, backward, inference).",
)
@render_options(("text", "json"))
def command(**params: Any) -> None:
    """Per compile: the graphs, what the forward saves for backward, and what backward recomputes."""
    from tcx.cli import common
    from tcx.core.graphs_view import build_graphs, to_json
    from tcx.renderers.graphs_terminal import render_graphs

    loaded = common.load(params, GRAPHS_BACKEND, GRAPHS_REASON, capture=("aot_graphs",))
    view = build_graphs(loaded.model)
    if params["fmt"] == "json":
        common.emit_json(to_json(view))
    else:
        render_graphs(view, common.console(params), show=params["show"])
        common.saved_note(loaded)
    common.finish(loaded.model)
