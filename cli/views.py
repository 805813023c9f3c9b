"""Click commands from the view registry (core/views/registry.py): each option declared once, one runner.

A view without a hand-written command gets a generated one: TARGET and the run options, the
view's own options, then the output options. Every view command, generated or not, runs through
`run_view`: load the target, select `TARGET:func`'s compiles, build, then print JSON or render.
Importing this module stays cheap (click and the registry only).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import click

from tcx.cli.options import render_options, run_options
from tcx.core.views.registry import SELECTORS, VIEWS, Option, View

EPILOG = """\b
Exit codes: 0 ok · 1 a `check` budget was exceeded · 2 usage error (bad option, missing
file or function, bad --call) · 3 the target failed (raised, exited non-zero, crashed,
timed out) · 4 unreadable recording or log · 5 internal tcx error · 130/143 stopped by
SIGINT/SIGTERM (the report is partial).
"""


def click_option(opt: Option) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    kwargs: dict[str, Any] = {"help": opt.help, "metavar": opt.metavar}
    if opt.is_flag:
        kwargs = {"help": opt.help, "is_flag": True}
    elif opt.choices:
        kwargs["type"] = click.Choice(opt.choices)
    else:
        kwargs["type"] = opt.type
    return click.option(
        *opt.flags, multiple=opt.multiple, default=None if not opt.is_flag else False, **kwargs
    )


def view_options(view: View, selectors: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The view's own options, in the order the registry lists them, then the common selectors."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        for opt in reversed((*view.options, *(SELECTORS if selectors else ()))):
            fn = click_option(opt)(fn)
        return fn

    return wrap


Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def view_command(
    view: View, *extra: Decorator, takes_target: bool = True
) -> Callable[[Callable[..., Any]], click.Command]:
    """Decorate a command body with the view's name, help and every option it takes: TARGET and
    the run options, the view's options, then `extra` (a hand-written command's own arguments and
    options), then the output options."""

    def wrap(fn: Callable[..., Any]) -> click.Command:
        fn = render_options(view.formats)(fn)
        for deco in reversed(extra):
            fn = deco(fn)
        fn = view_options(view, selectors=takes_target)(fn)
        if takes_target:
            fn = run_options(fn)
        return click.command(name=view.name, help=view.help, epilog=EPILOG)(fn)

    return wrap


def run_view(
    view: View,
    params: dict[str, Any],
    *,
    capture: tuple[str, ...] = (),
    build: dict[str, Any] | None = None,
    render: dict[str, Any] | None = None,
) -> None:
    """Load TARGET, select its function's compiles, build the view, print JSON or render it."""
    from tcx.cli import common

    loaded = common.load(params, view.fresh_compile, capture=(*view.captures, *capture))
    selection = common.selection(loaded)
    if params["fmt"] == "text" and print_index(view, params, loaded, selection):
        return
    result = view.builder()(loaded.model, selection, **{**view.options_for("build", params), **(build or {})})
    from tcx.renderers.formats import write

    text_only = (render or {}) if params["fmt"] == "text" else {}
    write(view, result, params["fmt"], common.console(params), params, **text_only)
    common.saved_note(loaded)  # on stderr: the JSON on stdout stays one document
    common.finish(loaded.model)


def print_index(view: View, params: dict[str, Any], loaded: Any, selection: Any) -> bool:
    """Summary first on big runs: with no selector and no --all, a per-compile view that would
    print pages about many compiles prints an index of them (core/views/index.py) instead."""
    from tcx.cli import common
    from tcx.core.views import index as run_index

    if params.get("show_all") or loaded.function or loaded.selectors.given:
        return False
    if not run_index.wants_index(view.name, loaded.model, selection):
        return False
    from tcx.renderers.index_terminal import render_index_head, render_index_rows

    console = common.console(params)
    estimate = run_index.estimated_lines(view.name, loaded.model, selection)
    count = len(selection.compile_ids)
    render_index_head(view.name, loaded.model, count, estimate, console, function=selection.function)
    target = common.rerender_target(loaded, params["target"])
    render_index_rows(run_index.index_rows(loaded.model, selection, view.name, target), console)
    common.saved_note(loaded)
    common.finish(loaded.model)
    return True


def generated_command(view: View) -> click.Command:
    @view_command(view)
    def command(**params: Any) -> None:
        run_view(view, params)

    return command


def commands() -> list[click.Command]:
    """One command per registered view: its hand-written one, or a generated one."""
    out = []
    for view in VIEWS:
        if view.command:
            module, _, attr = view.command.partition(":")
            out.append(getattr(importlib.import_module(module), attr))
        else:
            out.append(generated_command(view))
    return out
