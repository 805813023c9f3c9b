"""A view shown outside the CLI (the Python API's results): plain text for `repr()`, and a rich
Text for a console that prints it (rich's console protocol). HTML for a notebook is
renderers/report_output.fragment_html."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Literal, cast

from rich.console import Console
from rich.text import Text

from tcx.renderers.console import THEME, make_console

ColorSystemName = Literal["auto", "standard", "256", "truecolor", "windows"]  # rich's color systems

Render = Callable[[Console], None]


def plain_text(render: Render, width: int = 100) -> str:
    buffer = io.StringIO()
    render(make_console(buffer, color=False, width=width))
    return buffer.getvalue()


def for_console(render: Render, console: Console, width: int) -> Text:
    """The view rendered as `console` would show it: its colours (none when it has none), `width`
    columns. The renderers print; this prints into a buffer and reads the styles back."""
    buffer = io.StringIO()
    color = console.color_system is not None and not console.no_color
    inner = Console(
        file=buffer,
        theme=THEME,
        width=width,
        force_terminal=color,
        color_system=cast("ColorSystemName | None", console.color_system) if color else None,
        no_color=not color,
        highlight=False,
        emoji=False,
        soft_wrap=False,
    )
    render(inner)
    return (
        Text.from_ansi(buffer.getvalue().removesuffix("\n"))
        if color
        else Text(buffer.getvalue().removesuffix("\n"))
    )
