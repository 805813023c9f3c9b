"""Options shared by the views (click decorators), and turning them into RunOptions."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import click

from tcx.core.run.last_run import LAST_RUN  # cheap: os and pathlib only

MIN_WIDTH, MAX_WIDTH = 20, 10_000


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
            help="torch.compile backend for every compile in the run (default: what the program asks; "
            "e.g. eager is faster, but its counts may differ from the program's own run).",
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
            callback=check_timeout,
            help="Stop the program after this long; what was recorded is still reported.",
        ),
        click.option(
            "--save",
            type=click.Path(dir_okay=False),
            default=None,
            metavar="FILE",
            help="Keep the recording in FILE too (re-render later with `tcx show FILE`; .gz compresses).",
        ),
        click.option(
            "--no-save",
            is_flag=True,
            help=f"Do not keep this run's recording in {LAST_RUN} (kept by default, for drill-downs).",
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
            click.option(
                "--width",
                type=click.IntRange(MIN_WIDTH, MAX_WIDTH),
                default=None,
                help=f"Terminal width for the report ({MIN_WIDTH}-{MAX_WIDTH}).",
            ),
            click.option(
                "--source-root",
                "source_roots",
                multiple=True,
                type=click.Path(exists=True, file_okay=False, resolve_path=True),
                metavar="DIR",
                help="With a recording or log: quote source files under DIR too (else only the text "
                "recorded with the run, or files in its recorded folders with their recorded hash).",
            ),
        ]
        for deco in reversed(decorators):
            fn = deco(fn)
        return fn

    return wrap


def check_timeout(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    """--timeout is a finite number of seconds > 0 (nan would silently mean "no limit")."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise click.BadParameter(
            f"{value} is not a number of seconds greater than 0 (leave --timeout out for no limit)."
        )
    return value


# Options that only mean something when tcx runs the program: with a recording or a log as
# TARGET nothing runs, and a one-line note says they were ignored.
RUN_ONLY_OPTIONS = {
    "calls": "--call",
    "backend": "--backend",
    "dynamic": "--dynamic/--no-dynamic",
    "device": "--device",
    "mode": "--mode",
    "timeout": "--timeout",
    "save": "--save",
    "no_save": "--no-save",
    "show_output": "--show-output",
    "no_backward": "--no-backward",
    "program_args": "program arguments",
}


def note_ignored_run_options(params: dict[str, Any]) -> None:
    """Say which run options a recording or log TARGET makes meaningless (they are ignored)."""
    given = [
        flag
        for key, flag in RUN_ONLY_OPTIONS.items()
        if (params.get(key) is not None if key == "dynamic" else params.get(key) not in (None, False, ()))
    ]
    if not given:
        return
    from tcx.core.errors import UsageError
    from tcx.core.run.targets import FileTarget, resolve_target

    try:
        target = resolve_target(params.get("target") or "")
    except UsageError:
        return  # reported when the target is loaded
    if isinstance(target, FileTarget):
        what = "a saved recording" if target.kind == "recording" else "a TORCH_TRACE log"
        click.echo(
            f"tcx: note: {', '.join(given)} ignored: TARGET is {what}, nothing is run "
            "(these options apply when tcx runs a program).",
            err=True,
        )


def build_run_options(params: dict[str, Any], fresh_compile: bool, capture: tuple[str, ...] = ()) -> Any:
    """The live run a view asks for: the program's own backend, mode and options unless the user
    overrides them; the compile caches as the program has them unless the view must see every
    stage compiled (`fresh_compile`)."""
    from tcx.core.run.callspec import parse_call_spec, spec_to_json
    from tcx.core.run.driver import RunOptions

    note_ignored_run_options(params)
    calls = [spec_to_json(parse_call_spec(c)) for c in params.get("calls") or ()] or None
    return RunOptions(
        backend=params.get("backend"),
        caches="off" if fresh_compile else "program",
        dynamic=params.get("dynamic"),
        mode=params.get("mode"),
        calls=calls,
        args=list(params.get("program_args") or ()),
        timeout=params.get("timeout"),
        show_output=bool(params.get("show_output")),
        backward=False if params.get("no_backward") else None,
        save=params.get("save"),
        keep_last=not params.get("no_save"),
        capture=[*capture, *([f"device={params['device']}"] if params.get("device") else [])],
        what_if=[spec_to_json(parse_call_spec(w)) for w in params.get("what_if") or ()] or None,
    )
