"""`tcx fusion TARGET`: which ops Inductor fused into which kernel, and why the others did not."""

from __future__ import annotations

from typing import Any

from tcx.cli.views import run_view, view_command
from tcx.core.views.registry import get

VIEW = get("fusion")


@view_command(VIEW)
def command(**params: Any) -> None:
    from tcx.cli.cmd_codegen import captures_for, parse_target

    params["target_device"] = parse_target(params["target_device"])
    run_view(VIEW, params, capture=captures_for(params), build={"device": params["target_device"]})
