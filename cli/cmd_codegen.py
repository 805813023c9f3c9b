"""`tcx codegen TARGET`: every generated kernel with its provenance, the wrapper call() annotated,
buffer lifetimes; `--target cuda:sm_90` previews the Triton code for a GPU without one."""

from __future__ import annotations

from typing import Any

import click

from tcx.cli.views import run_view, view_command
from tcx.core.torchtext.arch import arch_name, parse_arch
from tcx.core.views.registry import get

VIEW = get("codegen")


def parse_target(text: str | None) -> str:
    """ "cpu" / None -> "run"; "cuda", "cuda:sm_80", "cuda:80", "sm_90" -> "cuda:sm_XX"."""
    if not text or text.lower() in ("cpu", "run"):
        return "run"
    t = text.lower().strip()
    if t == "cuda":
        return "cuda:sm_90"
    arch = parse_arch(t.split(":", 1)[1] if t.startswith("cuda:") else t)
    if arch is None:
        raise click.BadParameter(f"{text!r}: use cpu, cuda or cuda:sm_XX (e.g. cuda:sm_80, cuda:sm_90)")
    return f"cuda:{arch_name(arch)}"


def captures_for(params: dict[str, Any]) -> tuple[str, ...]:
    """The CUDA preview's capture when `--target cuda:sm_XX` asks for one."""
    caps = []
    target = params["target_device"]
    if target.startswith("cuda:"):
        caps.append(f"cuda_preview={target.split(':', 1)[1]}" + ("+ptx" if params.get("ptx") else ""))
    return tuple(caps)


@view_command(VIEW)
def command(**params: Any) -> None:
    params["target_device"] = parse_target(params["target_device"])
    run_view(
        VIEW,
        params,
        capture=captures_for(params),
        build={"device": params["target_device"]},
        render={"lifetimes": not params["no_lifetimes"]},
    )
