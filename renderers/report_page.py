"""`tcx report --format html`: one self-contained page, built from the report's typed results.

The overview, the graph breaks, each compile's graphs and kernels are HTML made from the typed
results (tables, `<details>` per compile, links between a break, the compile it ends, that
compile's graph and kernels); the other views follow, each folded in its section, as their text
renderer prints them (whole lines: the browser wraps them, no `↪`). Every piece of text is escaped;
nothing is fetched; the page is written as it is made (a 1 GB log's page never sits in memory).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from tcx.core.ingest.lazy_items import stream
from tcx.core.model.conditions import run_conditions
from tcx.core.model.failure import failure
from tcx.core.views.explain import BreakSite, Explanation
from tcx.core.views.report import Report
from tcx.renderers.code_block import digest
from tcx.renderers.graphs_terminal import folded_signature
from tcx.renderers.header import location
from tcx.renderers.report_overview import (
    OVERVIEW_COLUMNS,
    TOP_PROBLEMS,
    compile_time_text,
    overview_counts,
    overview_rows,
    view_command,
)
from tcx.renderers.safe import clean

CSS = """
body { font-family: system-ui, sans-serif; margin: 0; display: flex; background: #111; color: #ddd; }
nav { position: sticky; top: 0; align-self: flex-start; padding: 1rem; min-width: 11rem; }
nav a { display: block; color: #8ab4f8; text-decoration: none; padding: .15rem 0; }
main { padding: 1rem 2rem; min-width: 0; flex: 1; }
a { color: #8ab4f8; }
h1 { font-size: 1.3rem; } h2 { font-size: 1.1rem; border-bottom: 1px solid #444; margin-top: 2rem; }
h3 { font-size: 1rem; }
table { border-collapse: collapse; font-size: 13px; margin: .5rem 0; }
th, td { border: 1px solid #333; padding: .2rem .5rem; text-align: left; vertical-align: top; }
th { background: #1d1d1d; color: #aaa; font-weight: normal; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.failed td { color: #f28b82; }
table.kv th { width: 7rem; text-align: right; }
pre, code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.35; margin: .3rem 0; }
pre.code, pre.src { padding: .4rem; background: #1b1b1b; }
pre.src .hit { background: #3b2a12; display: inline-block; width: 100%; }
details { margin: .3rem 0 .3rem 1rem; } summary { cursor: pointer; color: #8ab4f8; }
details.site > summary { color: #ddd; font-weight: bold; }
.bad { color: #f28b82; } .warn { color: #fdd663; } .good { color: #81c995; } .muted { color: #999; }
p.same { margin: .2rem 0 .2rem 2rem; font-size: 12px; }
"""

PAGE_HEAD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style></head>
<body><nav>{toc}</nav><main><h1>{title}</h1>
"""
PAGE_TAIL = (
    "<p><small>written by tcx {version}; every number comes from torch itself during the recorded run"
    "</small></p>\n</main></body></html>\n"
)


def e(text: object) -> str:
    """Text from the run, escaped for HTML (control characters removed first)."""
    return html.escape(clean(text))


def anchor(kind: str, compile_id: str | None) -> str:
    """The id of a compile's row, graph or kernels: `graph-0-1` for compile 0/1 (rank:frame/n too)."""
    safe = "".join(c if c.isalnum() else "-" for c in str(compile_id or "none"))
    return f"{kind}-{safe}"


def report_page(
    report: Report,
    captured: dict[str, Callable[[], Iterator[str]]],
    stored: dict[str, str],
    *,
    target: str | None = None,
) -> Iterator[str]:
    """The page, piece by piece. `captured`: each view's text as HTML, made when called (explain's
    section is built here); `stored`: digest -> id of each code text already on the page."""
    from tcx import __version__

    target = target or report.model.target
    graphs = report.views.get("graphs")
    codegen = report.views.get("codegen")
    links = _Links(report, graphs, codegen)
    native = {"explain", "graphs"} | ({"codegen"} if codegen is not None else set())
    shown = [g for g in report.guide if not g.empty]
    toc = ['<a href="#overview">Overview</a>']
    if report.cost is not None:
        toc.append('<a href="#cost">Cost per call</a>')
    toc += [f'<a href="#{g.name}">{e(g.title)}</a>' for g in shown]
    title = e(f"tcx report: {report.model.target}")
    yield PAGE_HEAD.format(title=title, css=CSS, toc="\n".join(toc))
    yield from _overview(report, links, target)
    if report.cost is not None:
        from tcx.renderers.cost_svg import cost_section_html

        yield cost_section_html(report.cost) + "\n"
    for g in shown:
        yield f'<section id="{g.name}"><h2>{e(g.title)}</h2>\n'
        if g.name != "explain":  # the breaks say it themselves
            yield f'<p class="muted">{e(g.shows)}</p>\n'
        if g.name == "explain":
            yield from _explain(report.explanation, links)
        elif g.name == "graphs" and graphs is not None:
            yield from _graphs(report, graphs, stored)
        elif g.name == "codegen" and codegen is not None:
            yield from _kernels(codegen, stored)
        if g.name in captured:
            whole = "the whole view as text" if g.name in native else "the view"
            lines = f" (~{g.lines:,} lines)" if g.lines else ""
            opened = " open" if g.name == "recompiles" else ""
            yield f"<details{opened}><summary>{whole}{lines}</summary><pre>"
            yield from captured[g.name]()
            yield "</pre></details>\n"
        yield "</section>\n"
    yield PAGE_TAIL.format(version=__version__)


class _Links:
    """Which anchors exist on the page: a link is only made to one that does."""

    def __init__(self, report: Report, graphs: Any, codegen: Any) -> None:
        self.compiles = {row.compile_id for row in report.pipeline}
        self.graphs = {c.compile_id for c in graphs.compiles} if graphs is not None else set()
        self.kernels = (
            {row.compile_id for row in report.pipeline if row.kernels} if codegen is not None else set()
        )
        self.sites = {(s.file, s.line): i for i, s in enumerate(report.explanation.sites, start=1)}
        self.failed = {f.compile_id for f in report.explanation.failed_frames}

    def compile(self, cid: str | None, text: str | None = None) -> str:
        label = e(text if text is not None else cid)
        return f'<a href="#{anchor("compile", cid)}">{label}</a>' if cid in self.compiles else label

    def stages(self, cid: str) -> str:
        """Links to a compile's graph and kernels, where the page has them."""
        out = []
        if cid in self.graphs:
            out.append(f'<a href="#{anchor("graph", cid)}">graph</a>')
        if cid in self.kernels:
            out.append(f'<a href="#{anchor("kernels", cid)}">kernels</a>')
        return " · ".join(out)


# --- the overview ---------------------------------------------------------------------------------


def _overview(report: Report, links: _Links, target: str) -> Iterator[str]:
    m = report.model
    yield '<section id="overview"><h2>Overview</h2>\n'
    scope = (
        f" · frames of {e(report.selection.function)} and what it calls" if report.selection.function else ""
    )
    run = run_conditions(m)
    backend = (
        f" · backend {e(run.backend)}" + (f" ({e(run.reason)})" if run.reason else "") if run.backend else ""
    )
    yield f'<p class="muted">torch {e(m.torch_version or "?")}{backend}{scope}</p>\n'
    if not run.as_program:
        overrides = "; ".join(o.text for o in run.overrides)
        yield f'<p class="warn">counts may differ from the program\'s own run: {e(overrides)}</p>\n'
    counts = overview_counts(report)
    yield "<table><tr>" + "".join(f"<th>{e(label)}</th>" for label, _ in counts) + "</tr>\n"
    yield "<tr>" + "".join(f'<td class="n">{value:,}</td>' for _, value in counts) + "</tr></table>\n"
    yield "<h3>Top problems, worst first</h3>\n"
    if not report.problems:
        yield '<p class="good">No problems found: no graph breaks, recompiles or failed frames.</p>\n'
    else:
        yield "<ol>\n"
        for p in report.problems[:TOP_PROBLEMS]:
            style = "bad" if p.rank <= 1 else "warn"
            yield f'<li><span class="{style}">{_problem_title(p, links)}</span>'
            if p.where:
                yield f" <code>{e(_where(p.where))}</code>"
            if p.detail:
                yield f'<br><span class="muted">{e(p.detail)}</span>'
            yield "</li>\n"
        yield "</ol>\n"
        if len(report.problems) > TOP_PROBLEMS:
            yield f'<p class="muted">and {len(report.problems) - TOP_PROBLEMS} more: the sections below</p>\n'
    yield "<h3>Per compile</h3>\n<table><tr>"
    yield "".join(f"<th>{e(h)}</th>" for h in OVERVIEW_COLUMNS) + "<th>see</th></tr>\n"
    for row, cells in zip(report.pipeline, overview_rows(report), strict=True):
        cls = ' class="failed"' if row.failed else ""
        cid = row.compile_id
        yield f'<tr id="{anchor("compile", cid)}"{cls}><td>{e(cells[0])}</td><td>{e(cells[1])}</td>'
        yield "".join(f'<td class="n">{e(c)}</td>' for c in cells[2:])
        yield f"<td>{links.stages(cid)}</td></tr>\n"
    yield "</table>\n"
    if report.compile_time_s or report.pipeline:
        yield f'<p class="muted">{e(compile_time_text(report))}</p>\n'
    guide = [g for g in report.guide if not g.empty]
    if guide:
        yield "<h3>The sections below</h3>\n<table><tr><th>section</th><th>shows</th><th>lines</th>"
        yield "<th>the command that prints it</th></tr>\n"
        for g in guide:
            lines = f"~{g.lines:,}" if g.lines else ""
            yield f'<tr><td><a href="#{g.name}">{e(g.title)}</a></td><td>{e(g.shows)}</td>'
            yield f'<td class="n">{lines}</td><td><code>{e(view_command(g.name, target))}</code></td></tr>\n'
        yield "</table>\n"
    yield "</section>\n"


def _problem_title(p: Any, links: _Links) -> str:
    if p.kind == "graph break" and p.where:
        file, _, line = p.where.rpartition(":")
        site = links.sites.get((file, int(line) if line.isdigit() else None))
        if site is not None:
            return f'<a href="#break-{site}">{e(p.title)}</a>'
    if p.kind in ("recompiles", "recompile limit"):
        return f'<a href="#recompiles">{e(p.title)}</a>'
    if p.kind == "failed frame":
        return f'<a href="#failed-frames">{e(p.title)}</a>'
    return e(p.title)


def _where(where: str) -> str:
    file, _, lineno = where.rpartition(":")
    return location(file, int(lineno) if lineno.isdigit() else None)


# --- the graph breaks ------------------------------------------------------------------------------


def _explain(ex: Explanation, links: _Links) -> Iterator[str]:
    if ex.failed_frames:
        yield f'<h3 id="failed-frames" class="bad">{len(ex.failed_frames)} frame(s) Dynamo gave up on '
        yield "(they run in eager Python)</h3>\n<table><tr><th>compile</th><th>frame</th><th>at</th>"
        yield "<th>why</th></tr>\n"
        for f in ex.failed_frames:
            name = ex.frame_name(f.compile_id, f.function)
            yield f"<tr><td>{links.compile(f.compile_id)}</td><td>{e(name)}</td>"
            yield f"<td><code>{e(location(f.file, f.line))}</code></td><td>{e(f.kind)}</td></tr>\n"
        yield "</table>\n"
    if not ex.sites and not failure(ex.model):  # a failed run never reads as a clean one
        verdict = "No graph breaks." if ex.compiles else "Nothing was compiled."
        yield f'<p class="good">{verdict}</p>\n'
    for i, site in enumerate(ex.sites, start=1):
        yield from _site(i, site, ex, links)
    if ex.recompiles:
        n = len(ex.recompiles)
        yield f'<p class="warn">{n} recompile(s): <a href="#recompiles">the recompiles</a></p>\n'
    if ex.restarts:
        yield f"<details><summary>{len(ex.restarts)} restart(s): attempts torch threw away and traced again"
        yield "</summary>\n<table><tr><th>compile</th><th>frame</th><th>attempt</th><th>why</th></tr>\n"
        for r in ex.restarts:
            comp = ex.compiles.get(r.compile_id)
            name = ex.frame_name(r.compile_id) if comp else "?"
            yield f"<tr><td>{links.compile(r.compile_id)}</td><td>{e(name)}</td>"
            yield f'<td class="n">{r.attempt}</td><td>{e(r.reason)}</td></tr>\n'
        yield "</table></details>\n"


def _site(i: int, site: BreakSite, ex: Explanation, links: _Links) -> Iterator[str]:
    skipped = ' <span class="bad">frame skipped</span>' if site.frame_skipped else ""
    where = f" at <code>{e(location(site.file, site.line))}</code>"
    func = f" in {e(site.function)}" if site.function else ""
    gb_id = f' <span class="muted">{e(site.gb_id)}</span>' if site.gb_id else ""
    yield f'<details class="site" id="break-{i}" open><summary>#{i} {e(site.gb_type)}{gb_id} '
    yield f"×{len(site.occurrences)}{skipped}{where}{func}</summary>\n"
    last = site.user_stack[-1] if site.user_stack else None
    yield _source(site.file, site.line, ex, last.code if last else "")
    if site.entry_frame is not None:
        fr = site.entry_frame
        yield f'<p class="warn">reached from your code at <code>{e(location(fr.file, fr.line))}</code></p>\n'
        yield _source(fr.file, fr.line, ex, fr.code)
    rows: list[tuple[str, str]] = []
    if site.explanation:
        rows.append(("why", e(site.explanation)))
    rows += [("then", e(t + (f" ({g})" if g else ""))) for t, g in site.caused]
    rows += [("torch hint", e(h)) for h in site.hints]
    if site.suggestion:
        rows.append(("fix", f'<span class="good">{e(site.suggestion)}</span>'))
    rows.append(("region", _regions(site, links)))
    if len(site.user_stack) > 1:
        stack = "".join(
            f"<li>{e(f.name)} <code>{e(location(f.file, f.line))}</code></li>" for f in site.user_stack
        )
        rows.append(("stack", f"<ol>{stack}</ol>"))
    yield '<table class="kv">' + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>\n"
    yield "</details>\n"


def _regions(site: BreakSite, links: _Links) -> str:
    """Each compiled region the break ended, linked to its compile, graph and kernels."""
    out = []
    for r in list({id(r): r for r in site.regions}.values()):
        cid = r.get("compile_id")
        head = f"compile {links.compile(cid)} in {e(r.get('frame'))}"
        if r.get("graphs"):
            head += f" ({r.get('graph_ops')} ops) ends here"
        else:
            head += " produced no graph before this break"
        stages = links.stages(cid or "")
        if stages:
            head += f" [{stages}]"
        resumed = r.get("resumed_in")
        if resumed == "eager":
            tail = "the rest of the frame runs in eager Python"
        elif resumed:
            tail = f"execution resumes in compile {links.compile(resumed)} ({e(r.get('resume_function'))})"
            more = links.stages(resumed)
            tail += f" [{more}]" if more else ""
        else:
            tail = "execution continues in eager Python"
        out.append(f"<li>{head}; {tail}</li>")
    unique = list(dict.fromkeys(out))
    return f"<ul>{''.join(unique)}</ul>"


def _source(file: str | None, line: int | None, ex: Explanation, fallback: str) -> str:
    """The user's line with two lines around it, from the recorded source (or its recorded text)."""
    from tcx.renderers.source import CONTEXT, source_lines

    lines = source_lines(file, ex.model.sources) if file and line else None
    if not lines or not line or line > len(lines):
        return f'<pre class="src"><span class="hit">{e(fallback)}</span></pre>\n' if fallback else ""
    out = []
    for n in range(max(1, line - CONTEXT), min(len(lines), line + CONTEXT) + 1):
        text = e(f"{n:>5}  {lines[n - 1]}")
        out.append(f'<span class="hit">{text}</span>' if n == line else text)
    return '<pre class="src">' + "\n".join(out) + "</pre>\n"


# --- graphs and kernels, per compile ---------------------------------------------------------------

GRAPH_TITLES = {"dynamo": "Dynamo graph", "forward": "AOT forward", "backward": "AOT backward"}


def _graphs(report: Report, view: Any, stored: dict[str, str]) -> Iterator[str]:
    names = {row.compile_id: row.frame for row in report.pipeline}
    for c in view.compiles:
        cid = c.compile_id
        kinds = list(c.graphs)
        yield f'<details id="{anchor("graph", cid)}"><summary>compile {e(cid)} {e(names.get(cid, ""))}: '
        yield f"{e(', '.join(GRAPH_TITLES.get(k, k.replace('_', ' ')) for k in kinds))}</summary>\n"
        yield f'<p class="muted">{e(c.verdict())} · <a href="#{anchor("compile", cid)}">its row</a></p>\n'
        for kind in kinds:
            title = f"{GRAPH_TITLES.get(kind, kind.replace('_', ' '))} of compile {cid}"
            yield code_fold(title, folded_signature(c.graphs[kind].rstrip()), stored)
        yield "</details>\n"


def _kernels(view: Any, stored: dict[str, str]) -> Iterator[str]:
    """Each compile's kernels: name, kind, the ops fused into it, and its source folded."""
    by_compile: dict[str | None, list[Any]] = {}
    order: list[str | None] = []
    for section in stream(view.sections):
        for k in section.kernels:
            if k.compile_id not in by_compile:
                order.append(k.compile_id)
            by_compile.setdefault(k.compile_id, []).append(k)
        for cid in order:  # a compile's kernels are written once its sections are read
            yield from _kernel_table(cid, by_compile.pop(cid), stored)
        order.clear()


def _kernel_table(cid: str | None, kernels: list[Any], stored: dict[str, str]) -> Iterable[str]:
    yield f'<details id="{anchor("kernels", cid)}"><summary>compile {e(cid)}: '
    yield f"{len(kernels)} kernel(s)</summary>\n"
    yield "<table><tr><th>kernel</th><th>graph</th><th>kind</th><th>fuses</th></tr>\n"
    for k in kernels:
        fused = ", ".join(k.fused_ops[:12]) + (
            f" and {len(k.fused_ops) - 12} more" if len(k.fused_ops) > 12 else ""
        )
        yield f"<tr><td><code>{e(k.name)}</code></td><td>{e(k.graph)}</td><td>{e(k.category)}</td>"
        yield f"<td>{e(fused)}</td></tr>\n"
    yield "</table>\n"
    for k in kernels:
        yield code_fold(f"kernel {k.name}", k.source, stored)
    yield "</details>\n"


def code_fold(title: str, text: str, stored: dict[str, str]) -> str:
    """A text folded under its title; one already on the page (same digest) is a link to it."""
    text = clean(text[:-1] if text.endswith("\n") else text)
    key = digest(text)
    n_lines = text.count("\n") + 1
    label = e(f"{title} ({n_lines} lines)")
    if key in stored:
        return f'<p class="same">{label}: <a href="#{stored[key]}">the same text as above</a></p>\n'
    ident = stored[key] = f"code-{len(stored)}"
    return f'<details id="{ident}"><summary>{label}</summary><pre class="code">{e(text)}</pre></details>\n'
