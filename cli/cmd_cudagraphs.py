"""`tcx cudagraphs TARGET`: under mode="reduce-overhead", which graphs CUDA graphs captured and every
skip reason with its user line; `--target cuda:sm_XX` previews the compile-time decisions without a GPU."""

from __future__ import annotations

from typing import Any

from tcx.cli.cmd_codegen import captures_for, parse_target
from tcx.cli.views import run_view, view_command
from tcx.core.views.registry import get

VIEW = get("cudagraphs")


@view_command(VIEW)
def command(**params: Any) -> None:
    params["target_device"] = parse_target(params["target_device"])
    run_view(VIEW, params, capture=captures_for(params), build={"device": params["target_device"]})
