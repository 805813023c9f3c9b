"""`tcx recompiles TARGET`: replay every call of each compiled frame — hits, recompiles and why."""

from __future__ import annotations

from typing import Any

from tcx.cli.views import run_view, view_command
from tcx.core.views.registry import get

VIEW = get("recompiles")


@view_command(VIEW)
def command(**params: Any) -> None:
    from tcx.core.errors import UsageError
    from tcx.core.run.targets import FileTarget, resolve_target

    if params["what_if"] and isinstance(resolve_target(params["target"]), FileTarget):
        raise UsageError(
            "--what-if evaluates the guards of live cache entries: it needs a program target "
            "(script.py, script.py:func, module:func), not a recording or a log."
        )
    run_view(VIEW, params, render={"full": bool(params.get("show_all"))})
