"""The detail pane's content: the registered view of an item, rendered by the view's own renderer.

The view is built through the registry (core/views/registry.py) on the item's Selection (its compile ids,
one break site, one kernel: core/selection.focus), and rendered by its terminal renderer into a
recording rich console; the pane shows what that console recorded.
A user line is shown from the recording's own copy of the file (renderers/source.py), never
from an arbitrary path on disk.

No textual here: the app renders from a worker thread.
"""

from __future__ import annotations

import dataclasses
import io
import re
from collections import OrderedDict
from typing import Any

from rich.console import Console
from rich.syntax import Syntax
from rich.text import Text

from tcx.core.model import RunModel
from tcx.core.selection import Selection, focus
from tcx.core.views.registry import get
from tcx.renderers.console import make_console
from tcx.renderers.header import location
from tcx.renderers.safe import clean
from tcx.renderers.source import source_lines
from tcx.tui.index import Detail


@dataclasses.dataclass
class Rendered:
    text: Text
    anchor_line: int | None  # the line the pane scrolls to (and marks), if the detail names one


class DetailRenderer:
    """Renders the details of one run's items, keeping the last views it built and printed: the
    items of one compile (its guards, its kernels) share one build, its guards one print."""

    def __init__(self, model: RunModel, selection: Selection, *, color: bool, keep: int = 16) -> None:
        self.model = model
        self.selection = selection
        self.color = color
        self.keep = keep
        self._built: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._texts: OrderedDict[tuple[Detail, int], Text] = OrderedDict()

    def render(self, detail: Detail, width: int) -> Rendered:
        text = self._text(dataclasses.replace(detail, anchor="", nth=0), width)
        return Rendered(text, _anchor(text.plain, detail))

    def _text(self, detail: Detail, width: int) -> Text:
        """The view as its renderer prints it (items that differ only by their anchor share it)."""
        key = (detail, width)
        if key in self._texts:
            self._texts.move_to_end(key)
            return self._texts[key]
        console = make_console(io.StringIO(), color=self.color, width=width)
        console.record = True  # what the renderer printed, with its styles, whatever the color system
        if detail.view == "source":
            render_source(self.model, detail.file, detail.line, console)
        else:
            get(detail.view).renderer()(self._build(detail), console, **dict(detail.render))
        plain = console.export_text(styles=self.color)
        text = Text.from_ansi(plain) if self.color else Text(plain)
        self._texts[key] = text
        while len(self._texts) > self.keep:
            self._texts.popitem(last=False)
        return text

    def _build(self, detail: Detail) -> Any:
        key = (detail.view, detail.compile_ids, detail.kernel, detail.site, detail.build)
        if key in self._built:
            self._built.move_to_end(key)
            return self._built[key]
        selection = focus(
            self.model, self.selection, detail.compile_ids, kernel=detail.kernel, site=detail.site
        )
        result = get(detail.view).builder()(self.model, selection, **dict(detail.build))
        self._built[key] = result
        while len(self._built) > self.keep:
            self._built.popitem(last=False)
        return result


def render_source(model: RunModel, file: str | None, line: int | None, console: Console) -> None:
    """The whole file as the recording holds it, the line marked (❱) and highlighted."""
    title = Text("source ", style="title")
    title.append(location(file, line), style="loc")
    console.print(title)
    lines = source_lines(file, model.sources) if file else None
    if lines is None:
        console.print(
            Text(
                "not available: this recording holds no copy of this file (tcx keeps the files of "
                "your program, not of libraries), and a file on disk is shown only when it is the "
                "one that ran",
                style="warn",
            )
        )
        return
    console.print(
        Syntax(
            "\n".join(clean(ln) for ln in lines),
            "python",
            line_numbers=True,
            highlight_lines={line} if line else set(),
            theme="ansi_dark",
            background_color="default",
            word_wrap=True,
        )
    )


def _anchor(text: str, detail: Detail) -> int | None:
    """The line where the anchor's `nth` match starts (a user line: its marked line)."""
    pattern = detail.anchor or ("❱" if detail.view == "source" else "")
    if not pattern:
        return None
    for i, m in enumerate(re.finditer(pattern, text, re.MULTILINE)):
        if i == detail.nth:
            return text.count("\n", 0, m.start())
    return None
