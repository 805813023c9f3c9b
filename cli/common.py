"""Helpers every view command shares: load the target, make the console, print JSON, exit codes.

Imported lazily by commands (never at `tcx --help` time).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from tcx.cli.options import build_run_options
from tcx.core.errors import EXIT_TARGET


def console(params: dict[str, Any]) -> Any:
    from tcx.renderers.console import make_console

    color = not (params.get("no_color") or os.environ.get("NO_COLOR"))
    return make_console(color=color, width=params.get("width"))


def load(
    params: dict[str, Any], default_backend: str | None, reason: str, capture: tuple[str, ...] = ()
) -> Any:
    from tcx.cli.session import load as load_target
    from tcx.core.selectors import from_params

    opts = build_run_options(params, default_backend, reason, capture)
    loaded = load_target(params["target"], opts)
    loaded.selectors = from_params(params)  # --compile, --kernel, --rank: applied by selection()
    loaded.model.sources.user_roots = tuple(params.get("source_roots") or ())  # core/source_roots.py
    return loaded


def selection(loaded: Any) -> Any:
    """The compiles `TARGET:func` chooses (core/selection.py), narrowed by the selectors given to
    the command (core/selectors.py); every view is built on it.

    A function that chose nothing is a usage error, unless the program failed first (then the
    failure is what to report, with exit code 3)."""
    from tcx.core.selection import select
    from tcx.core.selectors import narrow

    chosen = select(loaded.model, loaded.function, strict=not target_failed(loaded.model))
    return narrow(loaded.model, chosen, loaded.selectors)


def target_failed(model: Any) -> bool:
    from tcx.core.explain import program_status

    return program_status(model)["status"] not in ("ok", "not recorded")


def emit_json(doc: dict[str, Any]) -> None:
    from tcx.renderers.safe import json_text

    sys.stdout.write(json_text(doc) + "\n")


def saved_note(loaded: Any) -> None:
    if loaded.saved_to:
        click.echo(f"recording saved to {loaded.saved_to} (tcx show {loaded.saved_to})", err=True)


def finish(model: Any) -> None:
    if target_failed(model):
        sys.exit(EXIT_TARGET)


def load_file(path: str) -> Any:
    """Load a saved recording or TORCH_TRACE log (never runs a program)."""
    from tcx.cli.session import load as load_target
    from tcx.core.errors import UsageError
    from tcx.core.targets import FileTarget, resolve_target

    target = resolve_target(path)
    if not isinstance(target, FileTarget):
        raise UsageError(
            f"{path!r} is not a recording or a log. Record it first: tcx explain {path} --save run.tcx"
        )
    return load_target(path)
