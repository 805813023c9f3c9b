"""Header and small helpers shared by the graphs, fusion and codegen terminal views."""

from __future__ import annotations

import os

from rich.console import Console
from rich.syntax import Syntax
from rich.text import Text

from tcx.core.analysis import RunModel
from tcx.core.explain import backend_info, program_status
from tcx.renderers.safe import clean


def short(path: str | None) -> str:
    if not path:
        return "?"
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("../..") else path


def header(view_name: str, m: RunModel, console: Console, extra: str = "") -> None:
    title = Text(f"tcx {view_name} ", style="title")
    title.append(
        clean(short(m.target) if m.target.endswith((".tcx", ".gz", ".log")) else m.target), style="loc"
    )
    console.print(title)
    info = Text(f"torch {clean(m.torch_version or '?')}", style="muted")
    be = backend_info(m)
    if be["name"]:
        info.append(" · backend ", style="muted")
        info.append(clean(be["name"]))
        if be["reason"]:
            info.append(f" ({clean(be['reason'])})", style="muted")
    elif m.source_kind == "trace":
        info.append(" · from a TORCH_TRACE log", style="muted")
    if extra:
        info.append(" · " + clean(extra), style="muted")
    console.print(info)
    st = program_status(m)
    if st["status"] not in ("ok", "not recorded"):
        msg = st.get("message") or st.get("signal") or st["status"]
        console.print(
            Text(
                f"the program did not finish normally ({clean(st['status'])}: {clean(msg)}); "
                "everything recorded until then is shown",
                style="bad",
            )
        )
    console.print()


def user_line_text(entry: dict | None) -> str:
    if not entry:
        return ""
    return f"{short(entry.get('file'))}:{entry.get('line')}  {entry.get('code', '')}".rstrip()


def code(text: str, lexer: str, color: bool = True) -> Syntax:
    return Syntax(
        clean(text), lexer, theme="ansi_dark", line_numbers=False, word_wrap=False, background_color="default"
    )
