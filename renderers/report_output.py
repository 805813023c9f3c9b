"""`tcx report` output: the terminal, one self-contained HTML file, or Markdown for a PR comment.

The terminal prints the overview (renderers/report_overview.py) and, with --full, every view
through its own terminal renderer. The HTML page (renderers/report_page.py) builds the overview,
the breaks, graphs and kernels from the typed results and folds the other views' text, captured
here whole-lined (rich escapes it); Markdown puts the views' text in fences. The formats show the
same facts and need nothing but a browser or a Markdown viewer to read.
"""

from __future__ import annotations

import functools
import html
import io
import queue
import re
import secrets
import shlex
import threading
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.rule import Rule
from rich.text import Text

from tcx.core.views.report import Report
from tcx.renderers.code_block import FoldingConsole, Wrapped, print_lines
from tcx.renderers.console import THEME
from tcx.renderers.explain_terminal import render_explain
from tcx.renderers.header import location, view_header
from tcx.renderers.report_overview import (
    OVERVIEW_COLUMNS,
    TOP_PROBLEMS,
    compile_time_text,
    overview_counts,
    overview_rows,
    view_command,
)
from tcx.renderers.safe import SafeConsole, clean
from tcx.renderers.safe import markdown_text as _md

TRACE_LIMIT = 300


def _sections(report: Report) -> list[tuple[str, str, Callable[[Console], None]]]:
    """(anchor, title, render) for the overview and every view with a report section, in reading
    order (the registry's, core/views/registry.py)."""
    from tcx.core.views.registry import report_views

    options = {"trace": {"limit": TRACE_LIMIT}}
    out: list[tuple[str, str, Callable[[Console], None]]] = [
        ("overview", "Overview", lambda c: render_overview(report, c)),
    ]
    empty = {g.name for g in report.guide if g.empty}
    for spec in report_views():
        anchor, title = spec.name, str(spec.report_title)
        if anchor in empty:  # a section that would only say there is nothing to show
            continue
        if anchor == "explain":
            out.append((anchor, title, lambda c: render_explain(report.explanation, c)))
            continue
        render = functools.partial(spec.renderer(), **options.get(anchor, {}))
        out.append((anchor, title, functools.partial(_render_view, report, anchor, render)))
    return out


def _render_view(report: Report, name: str, render: Callable[..., None], console: Console) -> None:
    """One view's section; a view that could not be built or breaks while it prints (its payloads
    are parsed as they are printed) says why, and the report goes on."""
    view = report.views.get(name)
    if view is not None:
        try:
            render(view, console)
            return
        except Exception as exc:  # one view failing must not sink the report
            why = report.failed(name, "rendered", exc)
    else:
        why = report.failures.get(name, "not available")
    console.print(Text(clean(why), style="warn"))


def render_text(report: Report, console: Console, *, full: bool = False, target: str | None = None) -> None:
    """The terminal: the overview, which maps every section with the command that prints it; with
    `full`, every view's section after it (a `render(result, console)` as the registry's others)."""
    sections = _sections(report)
    for n, (_anchor, title, render) in enumerate(sections if full else sections[:1]):
        console.print(Rule(Text(title, style="title")))
        if n == 0:
            render_overview(report, console, target=target, full=full)
        else:
            render(console)
        console.print()


def render_overview(
    report: Report, console: Console, *, target: str | None = None, full: bool = True
) -> None:
    """The counts, the top problems ranked, one row per compile, and a map of the sections: what
    each shows for this run and the command that prints it (`full`: the sections follow)."""
    m = report.model
    view_header("report", m, console, function=report.selection.function)  # with how it ran
    counts = Text()
    for label, value in overview_counts(report):
        counts.append(f"{label} ", style="muted")
        counts.append(str(value), style="count")
        counts.append("  ")
    console.print(Wrapped(counts, prose=True))
    _render_problems(report, console)
    console.print()
    rows = overview_rows(report)
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(OVERVIEW_COLUMNS)]
    lines = [
        Text("  ".join(h.ljust(w) for h, w in zip(OVERVIEW_COLUMNS, widths, strict=True)), style="muted")
    ]
    for row, cells in zip(report.pipeline, rows, strict=True):
        line = Text()
        for n, (cell, width) in enumerate(zip(cells, widths, strict=True)):
            line.append(("  " if n else "") + cell.ljust(width), style="bad" if row.failed and n == 1 else "")
        lines.append(line)
    console.print(Text("Per compile:", style="title"))
    print_lines(console, lines)  # one row per compile, never cut: whole in a pipe, ↪ on a terminal
    if report.compile_time_s or report.pipeline:
        console.print(Wrapped(Text(compile_time_text(report), style="muted"), prose=True))
    console.print()
    _render_guide(report, console, target or m.target, full)


def _render_problems(report: Report, console: Console) -> None:
    for e in report.expected:  # never ranked among the problems (core/analysis/expected.py)
        console.print(
            Wrapped(Text(f"Expected, not a problem: {clean(e.title)}: {clean(e.detail)}"), prose=True)
        )
    if not report.problems:
        console.print(Text(f"No problems found: no {_NONE[bool(report.expected)]}.", style="good"))
        return
    console.print(Text("Top problems, worst first:", style="title"))
    for n, p in enumerate(report.problems[:TOP_PROBLEMS], start=1):
        line = Text(f"{n:>3}. ", style="count")
        line.append(clean(p.title), style="bad" if p.rank <= 1 else "warn")
        if p.where:
            line.append(f"  {_where(p.where)}", style="loc")
        console.print(Wrapped(line, prose=True, hang=5))
        if p.detail:
            console.print(Wrapped(Text(f"       {clean(p.detail)}", style="muted"), prose=True, hang=7))
    if len(report.problems) > TOP_PROBLEMS:
        more = len(report.problems) - TOP_PROBLEMS
        tail = f"  and {more} more (tcx explain lists every break, or --format json)"
        console.print(Text(tail, style="muted"))


def _render_guide(report: Report, console: Console, target: str, full: bool) -> None:
    """One line per section: what it shows for this run, about how long, and its command."""
    guide = [g for g in report.guide if not g.empty]
    if not guide:
        return
    intro = "The sections below, one line each:" if full else "What each view shows, and its command:"
    console.print(Text(intro, style="title"))
    title_w = max(len(g.title) for g in guide)
    for g in guide:
        line = Text(f"  {g.title.ljust(title_w)}  ", style="title")
        line.append(clean(g.shows), style="warn" if g.name in report.failures else "")
        if g.lines:
            line.append(f"  (~{g.lines:,} lines)", style="muted")
        console.print(Wrapped(line, prose=True, hang=title_w + 4))
        command = Text(f"  {' ' * title_w}  {clean(view_command(g.name, target))}", style="loc")
        console.print(Wrapped(command, hang=title_w + 4))
    if not full:
        console.print(
            Text(f"Every view, whole: {clean(view_command('report', target))} --full", style="muted")
        )


# What "no problems" covers, without and with expected recompiles listed (core/analysis/expected.py)
_NONE = (
    "graph breaks, recompiles or failed frames",
    "graph breaks, failed frames or recompiles but the expected",
)


_CAPTURE_OPTIONS: dict[str, Any] = dict(
    record=True,
    width=120,
    theme=THEME,
    force_terminal=True,
    color_system="truecolor",
    no_color=False,
    highlight=False,
    emoji=False,
)


def _capture(render: Callable[[Console], None], *, color: bool, nonce: str | None = None) -> Console:
    """The section rendered into a recording console; with a `nonce` its code blocks are kept
    aside behind placeholder lines (renderers/code_block.FoldingConsole) for HTML."""
    options: dict[str, Any] = {
        **_CAPTURE_OPTIONS,
        "file": io.StringIO(),
        "force_terminal": color,
        "color_system": "truecolor" if color else None,
        "no_color": not color,
    }
    console = FoldingConsole(nonce=nonce, whole_lines=True, **options) if nonce else SafeConsole(**options)
    render(console)
    return console


def _unfold(body: str, console: FoldingConsole, stored: dict[str, str]) -> str:
    """Each placeholder line of the exported section replaced by its code, folded; a text already
    stored in the page (by digest) becomes a link to it instead of a second copy."""
    pattern = re.compile(rf"^ *{re.escape(console.placeholder_prefix)}(\d+)\n?", re.M)

    def fold(m: re.Match[str]) -> str:
        f = console.folds[int(m.group(1))]
        title = html.escape(clean(f.title))
        anchor = stored.get(f.digest)
        if anchor is not None:
            return f'</pre><p class="same">{title}: <a href="#{anchor}">the same text as above</a></p><pre>'
        anchor = stored[f.digest] = f"code-{len(stored)}"
        return (
            f'</pre><details id="{anchor}"><summary>{title}</summary>'
            f'<pre class="code">{html.escape(f.text)}</pre></details><pre>'
        )

    return pattern.sub(fold, body)


def report_html(report: Report, *, target: str | None = None) -> Iterator[str]:
    """One self-contained page (renderers/report_page.py), written as it is made."""
    from tcx.renderers.report_page import report_page

    stored: dict[str, str] = {}  # digest of a code text -> the id of its one copy on the page
    captured = captured_sections(report, stored, secrets.token_hex(6))
    return report_page(report, captured, stored, target=target)


def captured_sections(
    report: Report, stored: dict[str, str], nonce: str
) -> dict[str, Callable[[], Iterator[str]]]:
    """Section name -> its view's text as HTML, made when called: whole lines (the browser wraps
    them), code folded and a text already on the page (`stored`) linked to. Explain is left out:
    the page builds that section from its results."""
    return {
        anchor: functools.partial(_streamed, render, nonce, stored)
        for anchor, _title, render in _sections(report)[1:]
        if anchor != "explain"
    }


class _HtmlConsole(FoldingConsole):
    """A recording console that hands on the HTML of what it recorded after every print (and
    forgets it), its code blocks unfolded."""

    def __init__(self, emit: Callable[[str], None], stored: dict[str, str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._emit = emit
        self._stored = stored

    def print(self, *args: object, **kwargs: Any) -> None:
        super().print(*args, **kwargs)
        self.hand_on()

    def hand_on(self) -> None:
        body = self.export_html(inline_styles=True, code_format="{code}", clear=True)
        if body:
            self._emit(_unfold(body, self, self._stored))


_DONE = object()


def _streamed(render: Callable[[Console], None], nonce: str, stored: dict[str, str]) -> Iterator[str]:
    """A section's HTML as the section renders: the view prints in a thread, a bounded queue
    carries each print's HTML here, so at most a few prints' worth is in memory."""
    chunks: queue.Queue[object] = queue.Queue(maxsize=4)

    def work() -> None:
        try:
            console = _HtmlConsole(
                chunks.put, stored, nonce=nonce, whole_lines=True, **_CAPTURE_OPTIONS, file=io.StringIO()
            )
            render(console)
            console.hand_on()
            chunks.put(_DONE)
        except BaseException as exc:  # the page's writer raises it
            chunks.put(exc)

    threading.Thread(target=work, name="tcx-report-section", daemon=True).start()
    while (item := chunks.get()) is not _DONE:
        if isinstance(item, BaseException):
            raise item
        yield str(item)


FRAGMENT = (
    '<div class="tcx-view" style="background:#111;color:#ddd;padding:.4rem .8rem;overflow-x:auto">'
    '<pre style="font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;line-height:1.35;'
    'margin:0;background:transparent;color:inherit">{body}</pre></div>'
)


def fragment_html(render: Callable[[Console], None]) -> str:
    """One view as an HTML fragment (a notebook's `_repr_html_`): a report section's body, escaped
    by rich and with its code folded, styled inline; no page, no script, nothing fetched."""
    console = _capture(render, color=True, nonce=secrets.token_hex(6))
    assert isinstance(console, FoldingConsole)  # a nonce folds the code blocks
    body = _unfold(console.export_html(inline_styles=True, code_format="{code}"), console, {})
    return FRAGMENT.format(body=body)


MARKDOWN_BUDGET = 60_000  # bytes of the PR-sized Markdown: a GitHub PR comment holds about 65 KB
OVERVIEW_BUDGET = 20_000  # of which the per-compile table takes at most this many


def report_markdown(report: Report, *, full: bool = False, target: str | None = None) -> str:
    """For a PR comment: the counts, the top problems and one row per compile, then every view's
    text folded in `<details>`. Without `full` it stays under MARKDOWN_BUDGET bytes: a view that
    does not fit (nor a row of the table) is not cut but left out, with its size and the command
    that prints it. `full`: every view whole."""
    target = target or report.model.target
    lines = _markdown_overview(report, full, target)
    used = _size(lines)
    left_out: list[str] = []
    for anchor, title, render in _sections(report)[1:]:
        estimate = _estimated_lines(report, anchor)
        if not full and estimate > NOT_RENDERED_ABOVE_LINES:  # pages that could never fit: not rendered
            left_out.append(
                f"- **{html.escape(title, quote=False)}**: about {estimate:,} lines: "
                f"`{_md_code(f'tcx {anchor} {shlex.quote(target)}')}`"
            )
            continue
        text = _capture(render, color=False).export_text().rstrip()
        fence = "`" * max(3, _longest_backticks(text) + 1)
        n_lines = text.count("\n") + 1
        block = [
            f"<details><summary>{html.escape(title, quote=False)} ({n_lines:,} lines)</summary>",
            "",
            f"{fence}text",
            text,
            fence,
            "",
            "</details>",
            "",
        ]
        if full or used + _size(block) + LEFT_OUT_RESERVE <= MARKDOWN_BUDGET:
            lines += block
            used += _size(block)
        else:
            size = len(text.encode("utf-8"))
            left_out.append(
                f"- **{html.escape(title, quote=False)}**: {n_lines:,} lines ({size / 1024:,.0f} KiB): "
                f"`{_md_code(f'tcx {anchor} {shlex.quote(target)}')}`"
            )
    if left_out:
        command = _md_code(f"tcx report {shlex.quote(target)} --format markdown --full")
        lines += [
            f"Left out to keep this comment PR-sized (every view whole: `{command}`):",
            "",
            *left_out,
            "",
        ]
    return "\n".join(lines) + "\n"


LEFT_OUT_RESERVE = 2_000  # bytes kept for the list of views left out
# A view estimated (core/views/index.py) at more lines than this is over MARKDOWN_BUDGET at any line
# length: the summary names it without rendering it (on a big run that is most of the time saved).
NOT_RENDERED_ABOVE_LINES = 6_000


def _estimated_lines(report: Report, view: str) -> int:
    from tcx.core.views import index as run_index

    if view not in run_index.SHOWN_EVENTS:
        return 0
    return run_index.estimated_lines(view, report.model, report.selection)


def _markdown_overview(report: Report, full: bool, target: str) -> list[str]:
    m = report.model
    lines = [f"## tcx report: {_md(m.target)}", "", f"torch {_md(m.torch_version or '?')}", ""]
    lines += [" · ".join(f"{label} **{value}**" for label, value in overview_counts(report)), ""]
    lines.append("### Top problems")
    problems = report.problems if full else report.problems[:TOP_PROBLEMS]
    lines += [
        f"{n}. **{_md(p.title)}**"
        + (f" at {_md(_where(p.where))}" if p.where else "")
        + (f": {_md(p.detail)}" if p.detail else "")
        for n, p in enumerate(problems, start=1)
    ] or [f"None: no {_NONE[bool(report.expected)]}."]
    lines += [f"- Expected, not a problem: {_md(e.title)}: {_md(e.detail)}" for e in report.expected]
    if len(report.problems) > len(problems):
        more = len(report.problems) - len(problems)
        command = _md_code(f"tcx report {shlex.quote(target)} --format markdown --full")
        lines += ["", f"and {more} more: `{command}` lists every one"]
    lines += ["", "### Per compile", ""]
    lines += [
        "| " + " | ".join(OVERVIEW_COLUMNS) + " |",
        "|" + "---|" * len(OVERVIEW_COLUMNS),
    ]
    rows = overview_rows(report)
    shown = 0
    size = _size(lines)
    for cells in rows:
        line = "| " + " | ".join(_md(c) for c in cells) + " |"
        if not full and size + len(line.encode("utf-8")) + 1 > OVERVIEW_BUDGET:
            break
        lines.append(line)
        size += len(line.encode("utf-8")) + 1
        shown += 1
    if shown < len(rows):
        lines += ["", f"{len(rows) - shown:,} more compiles not listed here (`--full` lists every one)."]
    lines.append("")
    if report.compile_time_s:
        lines += [_md(compile_time_text(report)), ""]
    return lines


def _where(where: str) -> str:
    """A problem's `file:line` as the text overview prints it (paths shortened alike)."""
    file, _, lineno = where.rpartition(":")
    return location(file, int(lineno) if lineno.isdigit() else None)


def _md_code(text: str) -> str:
    """Text for a Markdown code span: a backtick in it cannot end the span early."""
    return clean(text).replace("`", "'")


def _size(lines: list[str]) -> int:
    return sum(len(line.encode("utf-8")) + 1 for line in lines)


def _longest_backticks(text: str) -> int:
    return max((len(m.group()) for m in re.finditer(r"`+", text)), default=0)
