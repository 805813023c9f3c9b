"""The program's child processes that compiled (core/run/observed.py), for the terminal reports."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from tcx.core.model import RunModel
from tcx.renderers.header import location
from tcx.renderers.safe import clean

MAX_SITES = 5


def render_child_processes(model: RunModel, console: Console, note: str = "") -> None:
    """Each child process that compiled, with its counts and first break sites; `note` follows
    the title (explain says that its header counts the program's own process only)."""
    children = model.status.children
    if not children:
        return
    if children.observed:
        n = len(children.observed)
        console.print(
            Text(
                f"Compiles in {n} child process{'es' if n != 1 else ''} the program started, "
                f"each recorded on its own{note}:",
                style="title",
            )
        )
        for child in children.observed:
            console.print(_child_line(child))
            for site in (child.get("graph_breaks") or [])[:MAX_SITES]:
                t = Text("      ")
                t.append(location(site.get("file"), site.get("line")), style="loc")
                t.append(f"  {clean(site.get('type'))}", style="gbtype")
                t.append(f"  ×{clean(site.get('occurrences'))}", style="muted")
                console.print(t)
    if children.not_observed:
        n = len(children.not_observed)
        console.print(
            Text(
                f"{n} child process{'es' if n != 1 else ''} tcx could not record: whatever "
                f"{'they' if n != 1 else 'it'} compiled is not observed and not counted.",
                style="bad",
            )
        )
        for child in children.not_observed:
            line = _child_line(child)
            line.append(f"  {clean(child.get('reason'))}", style="muted")
            console.print(line)
    console.print()


def _child_line(child: dict[str, Any]) -> Text:
    pid = child.get("pid")  # not known for a child written down when it was started
    t = Text(f"  pid {clean(pid) if pid is not None else '?'} ({clean(child.get('how'))})")
    if child.get("observed"):
        t.append(
            f"  compiles {child['compile_count']}  graphs {child['graph_count']}  "
            f"graph breaks {child['graph_break_count']}  recompiles {child['recompile_count']}  "
            f"failed frames {child['failed_frame_count']}",
            style="muted",
        )
    argv = child.get("argv") or []
    if argv and child.get("how") == "subprocess":  # a multiprocessing worker's argv says nothing
        t.append(f"  {clean(' '.join(' '.join(str(a).split()) for a in argv))[:120]}", style="muted")
    return t
