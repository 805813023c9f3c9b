"""`tcx show FILE --events / --event NAME`: the raw trace events, for anything no view covers.

Events this tcx does not know (a newer or older torch) are kept in the recording and
listed here, never dropped.
"""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tcx.core.model import KNOWN_EVENTS, RunModel
from tcx.renderers.safe import clean, json_text


def render_raw(model: RunModel, name: str | None, limit: int, fmt: str, console: Console) -> None:
    if name is None:
        counts = model.raw_trace_events().census()
        rows = [
            {"event": n, "count": c, "known": n.split(":", 1)[0] in KNOWN_EVENTS}
            for n, c in counts.most_common()
        ]
        if fmt == "json":
            sys.stdout.write(json_text({"schema": "tcx.events/1", "events": rows}) + "\n")
            return
        table = Table(box=None, padding=(0, 2), header_style="muted")
        table.add_column("event", overflow="fold")  # long names wrap: clipped ones would look alike
        table.add_column("count", justify="right")
        table.add_column("")
        for row in rows:
            table.add_row(
                Text(clean(row["event"])),
                str(row["count"]),
                Text("" if row["known"] else "unknown to this tcx: shown raw", style="warn"),
            )
        console.print(table)
        return
    matches = model.raw_trace_events().named(name)[:limit]
    if fmt == "json":
        docs = [
            {"compile_id": ev.compile_id, "attempt": ev.attempt, "metadata": ev.md, "payload": ev.payload}
            for ev in matches
        ]
        sys.stdout.write(json_text({"schema": "tcx.events/1", "event": name, "matches": docs}) + "\n")
        return
    if not matches:
        console.print(
            Text(f"no event named {clean(name)!r} (tcx show FILE --events lists them)", style="warn")
        )
    for ev in matches:
        head = Text(f"── {clean(ev.name)}", style="title")
        head.append(f"  compile {clean(ev.compile_id or '-')} attempt {ev.attempt}", style="muted")
        console.print(head)
        console.print(Text(clean(json.dumps(ev.body, indent=2, default=repr)[:20000])))
        if ev.payload:
            console.print(Text(clean(ev.payload[:20000])))
