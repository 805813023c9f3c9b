"""`tcx export TARGET`: each torch.export call — ok or failed, every issue at the user's line with its
fix, the guards export added, the ExportedProgram's signature — and AOTInductor's kernels.

A program is run as it runs (its own exports, strict or not, draft or not); `script.py:Module`
with example inputs (`--call`, or `tcx_calls()` in the script) is exported by tcx itself, as
`--strict` / `--draft` ask; a recording or a TORCH_TRACE log is read.
"""

from __future__ import annotations

from typing import Any

import click

from tcx.cli.views import view_command
from tcx.core.views.registry import get

VIEW = get("export")


@view_command(VIEW)
def command(**params: Any) -> None:
    from tcx.cli import common
    from tcx.core.errors import UsageError
    from tcx.core.run.targets import ProgramTarget, resolve_target
    from tcx.core.selection import select
    from tcx.core.views.export import build_export

    target = resolve_target(params["target"])
    capture: tuple[str, ...] = ()
    if isinstance(target, ProgramTarget) and target.function:
        capture = (f"export={export_mode(params)}",)  # used when tcx calls the target itself
    elif params.get("strict") or params.get("draft"):
        click.echo(
            "tcx: note: --strict/--draft ignored: they say how tcx exports TARGET:Module itself; a program's "
            "own exports run as it makes them.",
            err=True,
        )
    loaded = common.load(params, VIEW.fresh_compile, capture=(*VIEW.captures, *capture))
    selection = select(loaded.model, loaded.function, strict=False)
    view = build_export(loaded.model, selection)
    chose_nothing = not (selection.whole_run or selection.compile_ids or view.exports)
    if loaded.function and chose_nothing and not common.target_failed(loaded.model):
        from tcx.core.selection import compiled_functions

        names = sorted({e.name for e in build_export(loaded.model).exports if e.name})
        raise UsageError(
            f"{loaded.function!r} was neither exported nor compiled in this run.",
            hint=f"Exported modules: {', '.join(names) or 'none'}; "
            f"compiled functions: {', '.join(compiled_functions(loaded.model)) or 'none'}.",
        )
    from tcx.renderers.formats import write

    write(VIEW, view, params["fmt"], common.console(params), params)
    if params["fmt"] != "json":
        common.saved_note(loaded)
    common.finish(loaded.model)


def export_mode(params: dict[str, Any]) -> str:
    """How tcx exports TARGET:Module itself (core/recorder/compat_export.export_examples)."""
    mode = "draft" if params.get("draft") else "export"
    return f"{mode}-strict" if params.get("strict") else mode
