"""`tcx recompiles TARGET`: replay every call of each compiled frame — hits, recompiles and why."""

from __future__ import annotations

from typing import Any

import click

from tcx.cli.options import DYNAMO_ONLY_REASON, render_options, run_options


@click.command(name="recompiles")
@run_options
@click.option(
    "--what-if",
    "what_if",
    multiple=True,
    metavar="SPEC",
    help="After the run, say which cache entry would serve these inputs (same syntax as --call; "
    "arguments left out keep the last call's values), or which guard would fail. Repeatable.",
)
@render_options(("text", "json"))
def command(**params: Any) -> None:
    """Replay the calls: which hit the cache, which recompiled, which guard failed and why."""
    from tcx.cli import common
    from tcx.core.errors import UsageError
    from tcx.core.recompiles import analyze, to_json
    from tcx.core.targets import FileTarget, resolve_target
    from tcx.renderers.recompiles_terminal import render_recompiles

    if params["what_if"] and isinstance(resolve_target(params["target"]), FileTarget):
        raise UsageError(
            "--what-if evaluates the guards of live cache entries: it needs a program target "
            "(script.py, script.py:func, module:func), not a recording or a log."
        )
    loaded = common.load(params, "eager", DYNAMO_ONLY_REASON, ("recompiles",))
    report = analyze(loaded.model, loaded.function)
    if params["fmt"] == "json":
        common.emit_json(to_json(report))
    else:
        render_recompiles(report, common.console(params))
        common.saved_note(loaded)
    common.finish(loaded.model)
