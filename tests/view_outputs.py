"""Every view of the registry (core/views.py) in every format it has, built in-process from one model.

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

from tcx.core import views
from tcx.core.analysis import RunModel
from tcx.core.selection import whole_run
from tcx.renderers.console import make_console
from tcx.renderers.safe import json_text

WIDTH = 100
# Views whose build takes a `device`: also built for the CUDA preview (recordings only: it reads
# the recorder's cuda_preview events).
PREVIEW_VIEWS = ("fusion", "codegen", "cudagraphs")
PREVIEW_DEVICE = "cuda:sm_90"


def _text(render: Callable[[Any], None]) -> str:
    """What `render(console)` prints to a console and to stdout (JSON, Markdown, HTML, SARIF)."""
    sink, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out):
        render(make_console(sink, color=False, width=WIDTH))
    return sink.getvalue() + out.getvalue()


def every_output(
    model: RunModel, *, formats: tuple[str, ...] | None = None, only: tuple[str, ...] | None = None
) -> dict[str, str]:
    """{"VIEW FORMAT": output} for every registered view and format (only `formats`, and only the
    views named in `only`, when given). A view with a section in the report prints its text there,
    with the renderer and result its own command uses: it is not printed a second time alone."""
    from tcx.core.check import evaluate
    from tcx.core.diff import diff
    from tcx.core.explain import explain
    from tcx.renderers.check_output import render_check
    from tcx.renderers.diff_output import render_diff
    from tcx.renderers.report_output import render_report

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
                render = functools.partial(render_check, evaluate(explain(model, selection), budgets))
            elif view.name == "diff":
                facts = view.builder()(model, selection)
                render = functools.partial(render_diff, diff(facts, facts))
            else:
                report = view.builder()(model, selection)
                render = functools.partial(render_report, report)
            for fmt in wanted:
                out[f"{view.name} {fmt}"] = _text(functools.partial(render, fmt))
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
                out[f"{name} text"] = _text(functools.partial(view.renderer(), result))
    if only is None and (formats is None or "text" in formats):
        out.update(_show_outputs(model, selection))
    return out


def _show_outputs(model: RunModel, selection: Any) -> dict[str, str]:
    """`tcx show FILE --events`, `--event NAME` (the first few names), and a big run's index."""
    from tcx.core import run_index
    from tcx.renderers.index_terminal import render_index_head, render_index_rows
    from tcx.renderers.raw_events import render_raw

    out = {"show --events text": _text(lambda c: render_raw(model, None, 20, "text", c))}
    for name in dict.fromkeys(ev.name for ev in model.trace_events):
        out[f"show --event {name} text"] = _text(functools.partial(render_raw, model, name, 2, "text"))
    rows = run_index.index_rows(model, selection, "graphs", model.target)

    def index(c: Any) -> None:
        render_index_head("graphs", model, len(rows), 1000, c, function=None)
        render_index_rows(rows, c)

    out["index text"] = _text(index)
    return out
