"""`tcx codegen TARGET`: every generated kernel with its provenance, the wrapper call() annotated,
buffer lifetimes; `--target cuda:sm_90` previews the Triton code for a GPU without one."""

from __future__ import annotations

from typing import Any

import click

from tcx.cli.options import render_options, run_options

INDUCTOR_REASON = "this view shows Inductor's generated code"


def parse_target(text: str | None) -> str:
    """ "cpu" / None -> "run"; "cuda", "cuda:sm_80", "cuda:80", "sm_90" -> "cuda:sm_XX"."""
    if not text or text.lower() in ("cpu", "run"):
        return "run"
    t = text.lower().strip()
    if t == "cuda":
        return "cuda:sm_90"
    arch = t.split(":", 1)[1] if t.startswith("cuda:") else t
    digits = arch.removeprefix("sm_").removeprefix("sm").rstrip("a")
    if not digits.isdigit() or not 2 <= len(digits) <= 3:
        raise click.BadParameter(f"{text!r}: use cpu, cuda or cuda:sm_XX (e.g. cuda:sm_80, cuda:sm_90)")
    return f"cuda:sm_{int(digits)}"


def target_options(fn: Any) -> Any:
    for deco in reversed(
        [
            click.option(
                "--target",
                "target_device",
                default=None,
                metavar="cpu|cuda[:sm_XX]",
                help="Show the code for this device: cuda[:sm_80|sm_90|...] previews the Triton kernels "
                "and wrapper Inductor would generate for that GPU, without a GPU (needs triton).",
            ),
            click.option(
                "--graph",
                "graph",
                type=click.Choice(["forward", "backward", "inference"]),
                default=None,
                help="Only this graph of each compile.",
            ),
        ]
    ):
        fn = deco(fn)
    return fn


def captures_for(params: dict[str, Any], base: tuple[str, ...]) -> tuple[str, ...]:
    caps = list(base)
    target = params["target_device"]
    if target.startswith("cuda:"):
        caps.append(f"cuda_preview={target.split(':', 1)[1]}" + ("+ptx" if params.get("ptx") else ""))
    return tuple(caps)


@click.command("codegen")
@run_options
@target_options
@click.option(
    "--kernel", "kernel", default=None, metavar="NAME", help="Show only this kernel (name or part)."
)
@click.option("--ptx", is_flag=True, help="With --target cuda:…: add each Triton kernel's PTX (Triton AOT).")
@click.option("--no-lifetimes", is_flag=True, help="Leave out the buffer-lifetime timelines.")
@render_options(("text", "json"))
def command(**params: Any) -> None:
    """The kernels and wrapper Inductor generated for TARGET (Triton or C++), annotated."""
    from tcx.cli import common
    from tcx.core.codegen_view import build_codegen, to_json
    from tcx.renderers.codegen_terminal import render_codegen

    params["target_device"] = parse_target(params["target_device"])
    loaded = common.load(params, "inductor", INDUCTOR_REASON, capture=captures_for(params, ("codegen",)))
    view = build_codegen(
        loaded.model, params["target_device"], graph=params["graph"], kernel=params["kernel"]
    )
    if params["fmt"] == "json":
        common.emit_json(to_json(view))
    else:
        render_codegen(
            view, common.console(params), lifetimes=not params["no_lifetimes"], only_kernel=params["kernel"]
        )
        common.saved_note(loaded)
    common.finish(loaded.model)
