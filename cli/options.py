"""Options shared by the views (click decorators), and turning them into RunOptions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

DYNAMO_ONLY_REASON = (
    "this view needs only Dynamo, and graph breaks do not depend on the backend; "
    "--backend inductor runs the full pipeline"
)


def run_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Options for views that may run a program."""
    decorators = [
        click.argument("target"),
        click.argument("program_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- PROGRAM ARGS]"),
        click.option(
            "--call",
            "calls",
            multiple=True,
            metavar="SPEC",
            help="Call TARGET's function with these inputs, e.g. 128x32,32x64:grad,=3 "
            "(repeatable: one --call per call).",
        ),
        click.option(
            "--backend",
            default=None,
            metavar="NAME",
            help="torch.compile backend for every compile in the run (default: eager for Dynamo-only views).",
        ),
        click.option(
            "--dynamic/--no-dynamic",
            default=None,
            help="Force torch.compile(dynamic=True/False) (default: what the program asks).",
        ),
        click.option(
            "--device",
            default=None,
            metavar="DEVICE",
            help="Run on this device (e.g. cuda on a GPU machine: the real CUDA path); tensors from --call "
            "and the program's factory calls land there.",
        ),
        click.option("--mode", default=None, help="torch.compile mode for inductor (e.g. max-autotune)."),
        click.option(
            "--timeout",
            type=float,
            default=None,
            metavar="SECONDS",
            help="Stop the program after this long; what was recorded is still reported.",
        ),
        click.option(
            "--save",
            type=click.Path(dir_okay=False),
            default=None,
            metavar="FILE",
            help="Keep the recording (re-render later with `tcx show FILE`; .gz compresses).",
        ),
        click.option(
            "--show-output", is_flag=True, help="Pass the program's stdout/stderr through (to stderr)."
        ),
        click.option(
            "--no-backward",
            is_flag=True,
            help="With --call: do not run backward on outputs that require grad.",
        ),
    ]
    for deco in reversed(decorators):
        fn = deco(fn)
    return fn


def render_options(formats: tuple[str, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        decorators = [
            click.option(
                "--format",
                "fmt",
                type=click.Choice(formats),
                default=formats[0],
                show_default=True,
                help="Output format.",
            ),
            click.option("--no-color", is_flag=True, help="Plain text (also when NO_COLOR is set)."),
            click.option("--width", type=int, default=None, help="Terminal width for the report."),
        ]
        for deco in reversed(decorators):
            fn = deco(fn)
        return fn

    return wrap


def build_run_options(
    params: dict[str, Any], default_backend: str | None, reason: str, capture: tuple[str, ...] = ()
) -> Any:
    from tcx.core.callspec import parse_call_spec, spec_to_json
    from tcx.core.driver import RunOptions

    backend = params.get("backend")
    calls = [spec_to_json(parse_call_spec(c)) for c in params.get("calls") or ()] or None
    return RunOptions(
        backend=backend or default_backend,
        backend_reason="chosen with --backend" if backend else reason,
        dynamic=params.get("dynamic"),
        mode=params.get("mode"),
        calls=calls,
        args=list(params.get("program_args") or ()),
        timeout=params.get("timeout"),
        show_output=bool(params.get("show_output")),
        backward=False if params.get("no_backward") else None,
        save=params.get("save"),
        capture=[*capture, *([f"device={params['device']}"] if params.get("device") else [])],
        what_if=[spec_to_json(parse_call_spec(w)) for w in params.get("what_if") or ()] or None,
    )
