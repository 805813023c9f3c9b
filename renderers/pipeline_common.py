"""Header and small helpers shared by the graphs, fusion and codegen terminal views."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from tcx.core.model import RunModel
from tcx.renderers.header import short_path, view_header
from tcx.renderers.safe import clean


def header(
    view_name: str, m: RunModel, console: Console, extra: str = "", *, function: str | None = None
) -> None:
    view_header(view_name, m, console, function=function, extra=extra)
    st = m.status.program
    if st.failed:
        msg = st.message or st.signal or st.status
        console.print(
            Text(
                f"the program did not finish normally ({clean(st.status)}: {clean(msg)}); "
                "everything recorded until then is shown",
                style="bad",
            )
        )
    console.print()


def user_line_text(entry: dict[str, Any] | None) -> str:
    if not entry:
        return ""
    return f"{short_path(entry.get('file'))}:{entry.get('line')}  {entry.get('code', '')}".rstrip()
