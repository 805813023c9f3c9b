"""The first lines every view prints: `tcx VIEW target`, then torch, backend and where the data came from."""

from __future__ import annotations

import functools
import os

from rich.console import Console
from rich.text import Text

from tcx.core.model import RunModel
from tcx.core.model.conditions import CACHES_TEXT, run_conditions
from tcx.renderers.safe import clean


def short_path(path: str | None) -> str:
    """A path relative to the current directory when that is shorter to read."""
    if not path:
        return "?"
    return _short_path(path, os.getcwd())


@functools.lru_cache(maxsize=4096)  # a view names the same few files thousands of times
def _short_path(path: str, cwd: str) -> str:
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return rel if not rel.startswith("../..") else path


def location(file: str | None, line: int | None) -> str:
    return clean(f"{short_path(file)}:{line}" if line is not None else short_path(file))


def target_text(target: str) -> str:
    """The target as typed: a command line stays as it is, paths (and path:function) shorten."""
    if " " in target:
        return clean(target)
    path, sep, func = target.rpartition(":") if target.count(":") == 1 else (target, "", "")
    return clean(short_path(path) + sep + func if sep else short_path(target))


def view_header(
    view_name: str, m: RunModel, console: Console, *, function: str | None = None, extra: str = ""
) -> None:
    title = Text(f"tcx {view_name} ", style="title")
    title.append(target_text(m.target), style="loc")
    if function:
        title.append(f"  (frames of {clean(function)} and what it calls)", style="muted")
    console.print(title)
    info = Text(f"torch {clean(m.torch_version or '?')}", style="muted")
    run = run_conditions(m)
    if m.source_kind == "trace":
        info.append(" · from a TORCH_TRACE log (the program's own run)", style="muted")
    elif run.backend:
        info.append(" · backend ", style="muted")
        info.append(clean(run.backend))
        if run.reason:
            info.append(f" ({clean(run.reason)})", style="muted")
    elif run.reason:
        info.append(f" · backend {clean(run.reason)}", style="muted")
    if run.caches in CACHES_TEXT:
        info.append(f" · {CACHES_TEXT[run.caches]}", style="muted")
    if m.source_kind == "recording":
        info.append(" · from a saved recording", style="muted")
    if extra:
        info.append(" · " + clean(extra), style="muted")
    console.print(info)
    if function and m.compiles and not any(c.full_stack for c in m.compiles.values()):
        console.print(
            Text(
                "note: this input has torch's own compile stacks, which leave out the direct caller of a "
                f"torch.compile'd function: the selection may miss compiles called directly from "
                f"{clean(function)} (a live run by tcx keeps every caller)",
                style="warn",
            )
        )
    if not run.as_program:
        console.print(
            Text(
                "counts may differ from the program's own run: "
                + clean("; ".join(o.text for o in run.overrides))
                + ". Leave the override out to see the program's counts.",
                style="warn",
            )
        )
