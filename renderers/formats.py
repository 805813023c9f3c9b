"""Every output format, written in one place.

`text` is a view's terminal renderer, `json` its serializer through the strict JSON writer
(renderers/safe.json_text), and every other format a document writer its registry entry declares
(core/views/registry.py `documents`: check's SARIF and GitHub annotations, diff's Markdown, the report's
HTML and Markdown). The CLI commands and the tests call `write`; no command picks a format itself.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console

from tcx.core.views.registry import View
from tcx.renderers.safe import json_text


def write(
    view: View,
    result: Any,
    fmt: str,
    console: Console,
    params: dict[str, Any] | None = None,
    **extra: Any,
) -> None:
    """`result` of `view` in `fmt`: the text on `console`, any document on stdout. The options
    come from the command's `params` (each to the side the registry says); `extra` goes to the
    writer of `fmt` (e.g. the report's follow-up target)."""
    params = params or {}
    if fmt == "text":
        view.renderer()(result, console, **view.options_for("render", params), **extra)
    elif fmt == "json":
        doc = view.serializer()(result, **view.options_for("json", params), **extra)
        sys.stdout.write(json_text(doc) + "\n")
    elif fmt in view.formats:
        document = view.document_writer(fmt)(result, **view.options_for(fmt, params), **extra)
        for piece in [document] if isinstance(document, str) else document:  # a big one comes in pieces
            sys.stdout.write(piece)
    else:
        raise ValueError(f"view {view.name} has no {fmt!r} format (it has {', '.join(view.formats)})")
