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
    params: dict[str, Any], fresh_compile: bool = False, capture: tuple[str, ...] = (), extend: Any = None
) -> Any:
    """TARGET's model: a recording or log read, or the program run as it runs (see
    `build_run_options`); `fresh_compile` turns the compile caches off for views that must see
    every stage compiled; `extend` may append events to a live run's recording (cli/session.py)."""
    from tcx.cli.session import load as load_target
    from tcx.core.selectors import Selectors

    opts = build_run_options(params, fresh_compile, capture)
    loaded = load_target(params["target"], opts, extend)
    loaded.selectors = Selectors(  # --compile, --kernel, --rank: applied by selection()
        compiles=tuple(params.get("compiles") or ()),
        kernel=params.get("kernel") or None,
        ranks=tuple(params.get("ranks") or ()),
    )
    loaded.model.sources.user_roots = tuple(params.get("source_roots") or ())  # core/ingest/source_roots.py
    return loaded


def selection(loaded: Any) -> Any:
    """The compiles `TARGET:func` chooses (core/selection.py), narrowed by the selectors given to
    the command (core/selectors.py); every view is built on it.

    A function that chose nothing is a usage error, unless the program failed first (then the
    failure is what to report, with exit code 3)."""
    from tcx.core.selectors import choose

    return choose(loaded.model, loaded.function, loaded.selectors)


def target_failed(model: Any) -> bool:
    return bool(model.status.program.failed)


def emit_json(doc: dict[str, Any]) -> None:
    from tcx.renderers.safe import json_text

    sys.stdout.write(json_text(doc) + "\n")


def saved_note(loaded: Any) -> None:
    """Where the live run's recording was kept: every view re-renders it without running again."""
    for path in dict.fromkeys(p for p in (loaded.saved_to, loaded.kept) if p):
        click.echo(f"recording saved to {path} (any view re-renders it: tcx show {path})", err=True)
    if loaded.not_kept:
        click.echo(f"tcx: note: {loaded.not_kept}; --no-save skips it.", err=True)


def rerender_target(loaded: Any, typed: str) -> str:
    """What a follow-up command should name: the saved recording of a live run (with `:func` when
    one was selected), so a drill-down re-renders instead of running the program again."""
    saved = loaded.saved_to or loaded.kept
    if not saved:
        return typed
    return f"{saved}:{loaded.function}" if loaded.function else saved


def finish(model: Any) -> None:
    if target_failed(model):
        sys.exit(EXIT_TARGET)


def load_file(path: str) -> Any:
    """Load a saved recording or TORCH_TRACE log (never runs a program)."""
    from tcx.cli.session import Loaded
    from tcx.core.run.inputs import open_file

    model, function = open_file(path)
    return Loaded(model, function)
