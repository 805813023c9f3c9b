"""`tcx fusion TARGET`: which ops Inductor fused into which kernel, and why the others did not."""

from __future__ import annotations

from typing import Any

import click

from tcx.cli.options import render_options, run_options

INDUCTOR_REASON = "this view shows Inductor's scheduler decisions"


@click.command("fusion")
@run_options
@click.option(
    "--target",
    "target_device",
    default=None,
    metavar="cpu|cuda[:sm_XX]",
    help="cuda[:sm_XX]: the fusion decisions of the CUDA preview (no GPU needed; needs triton).",
)
@click.option("--device", "device", default=None, metavar="DEVICE", help="Run on this device (e.g. cuda).")
@click.option(
    "--graph",
    "graph",
    type=click.Choice(["forward", "backward", "inference"]),
    default=None,
    help="Only this graph.",
)
@render_options(("text", "json"))
def command(**params: Any) -> None:
    """Inductor's fusion per graph: scheduler nodes, fused groups, kernels, rejected pairs and why."""
    from tcx.cli import common
    from tcx.cli.cmd_codegen import captures_for, parse_target
    from tcx.core.fusion_view import build_fusion, to_json
    from tcx.renderers.fusion_terminal import render_fusion

    params["target_device"] = parse_target(params["target_device"])
    loaded = common.load(
        params, "inductor", INDUCTOR_REASON, capture=captures_for(params, ("fusion", "codegen"))
    )
    view = build_fusion(loaded.model, params["target_device"], graph=params["graph"])
    if params["fmt"] == "json":
        common.emit_json(to_json(view))
    else:
        render_fusion(view, common.console(params))
        common.saved_note(loaded)
    common.finish(loaded.model)
