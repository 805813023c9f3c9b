"""Every view of the registry (core/views/registry.py) in every format it has, built from one model.

`every_output(model)` returns {"VIEW FORMAT": text} as the CLI would print it (terminal text with
colour off, JSON, Markdown, HTML, SARIF, GitHub annotations), plus what `tcx show` prints for raw
events and the index a big run gets first. It fails when the registry has a view or a format this
module does not know, so a new one is not left out of the bad-input tests silently.
"""

from __future__ import annotations

import contextlib
import functools
import io
from collections.abc import Callable
from typing import Any

from tcx.core.model import RunModel
from tcx.core.selection import whole_run
from tcx.core.views import registry as views
from tcx.renderers.console import make_console
from tcx.renderers.safe import json_text

WIDTH = 100
# Views whose build takes a `device`: also built for the CUDA preview (recordings only: it reads
# the recorder's cuda_preview events).
PREVIEW_VIEWS = ("fusion", "codegen", "cudagraphs")
PREVIEW_DEVICE = "cuda:sm_90"


def _text(render: Callable[[Any], None], width: int = WIDTH) -> str:
    """What `render(console)` prints to a console and to stdout (JSON, Markdown, HTML, SARIF), as
    in a pipe (not a terminal) `width` columns wide."""
    sink, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out):
        render(make_console(sink, color=False, width=width))
    return sink.getvalue() + out.getvalue()


def every_output(
    model: RunModel,
    *,
    formats: tuple[str, ...] | None = None,
    only: tuple[str, ...] | None = None,
    width: int = WIDTH,
) -> dict[str, str]:
    """{"VIEW FORMAT": output} for every registered view and format (only `formats`, and only the
    views named in `only`, when given), text `width` columns wide. A view with a section in the
    report prints its text there, with the renderer and result its own command uses: it is not
    printed a second time alone."""
    from tcx.core.views.check import evaluate
    from tcx.core.views.diff import diff
    from tcx.core.views.explain import explain
    from tcx.renderers.formats import write

    selection = whole_run(model)
    out: dict[str, str] = {}
    in_report = only is None and (formats is None or "text" in formats)
    for view in views.VIEWS:
        if only is not None and view.name not in only:
            continue
        wanted = [f for f in view.formats if formats is None or f in formats]
        if view.name in ("check", "diff", "report"):  # their renderers take the format
            if view.name == "check":
                budgets = {"max_graph_breaks": 0, "max_recompiles": 0}
                result: Any = evaluate(explain(model, selection), budgets)
            elif view.name == "diff":
                facts = view.builder()(model, selection)
                result = diff(facts, facts)
            else:
                report = result = view.builder()(model, selection)
            for fmt in wanted:
                written = functools.partial(_write, write, view, result, fmt)
                out[f"{view.name} {fmt}"] = _text(written, width)
            if view.name == "report" and "text" in wanted:  # every view after the overview
                whole = functools.partial(_write, write, view, report, "text", params={"full": True})
                out["report --full text"] = _text(whole, width)
            if view.name == "report" and "markdown" in wanted:  # every view whole, not PR-sized
                whole = functools.partial(_write, write, view, report, "markdown", params={"full": True})
                out["report --full markdown"] = _text(whole, width)
            if view.name == "report":
                assert not report.failures, report.failures  # a section broke while printing
            continue
        unknown = set(view.formats) - {"text", "json"}
        assert not unknown, f"view {view.name}: formats {unknown} unknown to tests/view_outputs.py"
        devices = ["run"]
        if view.name in PREVIEW_VIEWS and model.source_kind == "recording":
            devices.append(PREVIEW_DEVICE)
        for device in devices:
            kwargs = {"device": device} if view.name in PREVIEW_VIEWS else {}
            result = view.builder()(model, selection, **kwargs)
            name = view.name if device == "run" else f"{view.name}[{device}]"
            if "json" in wanted:
                out[f"{name} json"] = json_text(view.serializer()(result))
            if "text" in wanted and not (in_report and view.report_title and device == "run"):
                out[f"{name} text"] = _text(functools.partial(view.renderer(), result), width)
    if only is None and (formats is None or "text" in formats):
        out.update(_show_outputs(model, selection, width))
    return out


def _write(write: Any, view: Any, result: Any, fmt: str, console: Any, params: Any = None) -> None:
    write(view, result, fmt, console, params)


def _show_outputs(model: RunModel, selection: Any, width: int = WIDTH) -> dict[str, str]:
    """`tcx show FILE --events`, `--event NAME` (the first few names), and a big run's index."""
    from tcx.core.views import index as run_index
    from tcx.renderers.index_terminal import render_index_head, render_index_rows
    from tcx.renderers.raw_events import render_raw

    out = {"show --events text": _text(lambda c: render_raw(model, None, 20, "text", c), width)}
    for name in dict.fromkeys(ev.name for ev in model.raw_trace_events()):
        render = functools.partial(render_raw, model, name, 2, "text")
        out[f"show --event {name} text"] = _text(render, width)
    rows = run_index.index_rows(model, selection, "graphs", model.target)

    def index(c: Any) -> None:
        render_index_head("graphs", model, len(rows), 1000, c, function=None)
        render_index_rows(rows, c)

    out["index text"] = _text(index, width)
    return out
