"""`tcx report` output: the terminal, one self-contained HTML file, or Markdown for a PR comment.

Every view renders through its own terminal renderer; HTML and Markdown capture that
output (rich escapes it for HTML; Markdown puts it in fences), so the three formats show
the same facts and need nothing but a browser or a Markdown viewer to read.
"""

from __future__ import annotations

import html
import io
import re
import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from tcx.core.report import Report, to_json
from tcx.renderers.console import THEME
from tcx.renderers.explain_terminal import render_explain
from tcx.renderers.header import location
from tcx.renderers.safe import clean, json_text

TRACE_LIMIT = 300


def _sections(report: Report) -> list[tuple[str, str, Callable[[Console], None]]]:
    """(anchor, title, render) for the overview and every view, in reading order."""
    from tcx.renderers.bytecode_terminal import render_bytecode
    from tcx.renderers.codegen_terminal import render_codegen
    from tcx.renderers.fusion_terminal import render_fusion
    from tcx.renderers.graphs_terminal import render_graphs
    from tcx.renderers.guards_terminal import render_guards
    from tcx.renderers.recompiles_terminal import render_recompiles
    from tcx.renderers.trace_terminal import render_trace

    v = report.views
    renderers: list[tuple[str, str, Any, Callable[[Any, Console], None]]] = [
        ("recompiles", "Recompiles", v.get("recompiles"), render_recompiles),
        ("guards", "Guards", v.get("guards"), render_guards),
        ("trace", "Dynamo's trace", v.get("trace"), lambda x, c: render_trace(x, c, limit=TRACE_LIMIT)),
        ("bytecode", "Bytecode", v.get("bytecode"), render_bytecode),
        ("graphs", "Graphs", v.get("graphs"), render_graphs),
        ("fusion", "Fusion", v.get("fusion"), render_fusion),
        ("codegen", "Generated code", v.get("codegen"), render_codegen),
    ]
    out: list[tuple[str, str, Callable[[Console], None]]] = [
        ("overview", "Overview", lambda c: render_overview(report, c)),
        ("explain", "Graph breaks", lambda c: render_explain(report.explanation, c)),
    ]
    for anchor, title, view, render in renderers:
        if view is None:
            why = report.docs[anchor].get("unavailable", "not available")
            out.append((anchor, title, lambda c, why=why: c.print(Text(clean(why), style="warn"))))
        else:
            out.append((anchor, title, lambda c, view=view, render=render: render(view, c)))
    return out


def render_report(report: Report, fmt: str, console: Console) -> None:
    if fmt == "json":
        sys.stdout.write(json_text(to_json(report)) + "\n")
    elif fmt == "html":
        sys.stdout.write(report_html(report))
    elif fmt == "markdown":
        sys.stdout.write(report_markdown(report))
    else:
        for _anchor, title, render in _sections(report):
            console.print(Rule(Text(title, style="title")))
            render(console)
            console.print()


def render_overview(report: Report, console: Console) -> None:
    m = report.model
    head = Text("tcx report ", style="title")
    head.append(clean(m.target), style="loc")
    head.append(f"  torch {clean(m.torch_version or '?')}", style="muted")
    console.print(head)
    table = Table(box=None, padding=(0, 1), header_style="muted")
    for col in (
        "compile",
        "frame",
        "Dynamo instr/nodes/breaks",
        "AOT fw/bw ops, saved",
        "Inductor kernels/extern",
        "guards",
        "recompile",
        "time s",
    ):
        table.add_column(col)
    for row in report.pipeline:
        d, a, i, r = row["dynamo"], row["aot"], row["inductor"], row["runtime"]
        aot = (
            "-"
            if a["forward_ops"] is None and a["inference_ops"] is None
            else (
                f"{a['inference_ops']} inference"
                if a["inference_ops"] is not None
                else f"{a['forward_ops']}/{a['backward_ops']}, {_kib(a['saved_bytes'])}"
            )
        )
        table.add_row(
            Text(clean(row["compile_id"])),
            Text(
                clean(row["frame"]) + (" (failed)" if row["failed"] else ""),
                style="bad" if row["failed"] else "",
            ),
            f"{_dash(d['instructions'])}/{_dash(d['graph_nodes'])}/{d['graph_breaks']}",
            aot,
            f"{i['kernels']}/{i['extern_calls']}",
            _dash(r["guards"]),
            "yes" if r["recompiled"] else "",
            _dash(None if row["compile_time_s"] is None else round(row["compile_time_s"], 2)),
        )
    console.print(table)
    if report.compile_time_s:
        phases = ", ".join(f"{k} {v:.2f} s" for k, v in report.compile_time_s.items())
        console.print(Text(f"compile time (cumulative per phase): {phases}", style="muted"))
    if not report.problems:
        console.print(Text("No problems found: no graph breaks, recompiles or failed frames.", style="good"))
        return
    console.print(Text("Top problems, worst first:", style="title"))
    for n, p in enumerate(report.problems[:10], start=1):
        line = Text(f"{n:>3}. ", style="count")
        line.append(clean(p.title), style="bad" if p.rank <= 1 else "warn")
        if p.where:
            file, _, lineno = p.where.rpartition(":")
            line.append(f"  {location(file, int(lineno) if lineno.isdigit() else None)}", style="loc")
        console.print(line)
        if p.detail:
            console.print(Text(f"       {clean(p.detail)}", style="muted"))


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


def _kib(n: int | None) -> str:
    return "-" if n is None else f"{n / 1024:.1f} KiB"


def _capture(render: Callable[[Console], None], *, color: bool) -> Console:
    console = Console(
        file=io.StringIO(),
        record=True,
        width=120,
        theme=THEME,
        force_terminal=color,
        color_system="truecolor" if color else None,
        no_color=not color,
        highlight=False,
        emoji=False,
    )
    render(console)
    return console


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 0; display: flex; background: #111; color: #ddd; }}
nav {{ position: sticky; top: 0; align-self: flex-start; padding: 1rem; min-width: 11rem; }}
nav a {{ display: block; color: #8ab4f8; text-decoration: none; padding: .15rem 0; }}
main {{ padding: 1rem 2rem; overflow-x: auto; }}
h1 {{ font-size: 1.3rem; }} h2 {{ font-size: 1.1rem; border-bottom: 1px solid #444; }}
pre {{ font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; line-height: 1.35; }}
</style></head>
<body><nav>{toc}</nav><main><h1>{title}</h1>
{sections}
<p><small>written by tcx {version}; every number comes from torch itself during the recorded run</small></p>
</main></body></html>
"""


def report_html(report: Report) -> str:
    """One self-contained page: no scripts, no network; rich escapes every piece of text."""
    from tcx import __version__

    parts, toc = [], []
    for anchor, title, render in _sections(report):
        body = _capture(render, color=True).export_html(inline_styles=True, code_format="{code}")
        toc.append(f'<a href="#{anchor}">{html.escape(title)}</a>')
        parts.append(f'<section id="{anchor}"><h2>{html.escape(title)}</h2><pre>{body}</pre></section>')
    title = html.escape(f"tcx report: {clean(report.model.target)}")
    return PAGE.format(title=title, toc="\n".join(toc), sections="\n".join(parts), version=__version__)


def report_markdown(report: Report) -> str:
    """Summary tables first (what a PR reviewer reads), then every view as plain text, folded."""
    m = report.model
    lines = [f"## tcx report: `{_md(m.target)}`", "", f"torch {_md(m.torch_version or '?')}", ""]
    lines += [
        "| compile | frame | Dynamo instr/nodes/breaks | AOT fw/bw ops | saved | kernels/extern | guards |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report.pipeline:
        d, a, i, r = row["dynamo"], row["aot"], row["inductor"], row["runtime"]
        lines.append(
            f"| {_md(row['compile_id'])} | {_md(row['frame'])} | {_dash(d['instructions'])}/"
            f"{_dash(d['graph_nodes'])}/{d['graph_breaks']} | {_dash(a['forward_ops'])}/"
            f"{_dash(a['backward_ops'])} | {_kib(a['saved_bytes'])} | {i['kernels']}/{i['extern_calls']} "
            f"| {_dash(r['guards'])} |"
        )
    lines.append("")
    if report.compile_time_s:
        lines.append("Compile time: " + ", ".join(f"{k} {v:.2f} s" for k, v in report.compile_time_s.items()))
        lines.append("")
    lines.append("### Top problems")
    lines += [
        f"{n}. **{_md(p.title)}**"
        + (f" at `{_md(p.where)}`" if p.where else "")
        + (f": {_md(p.detail)}" if p.detail else "")
        for n, p in enumerate(report.problems[:10], start=1)
    ] or ["None: no graph breaks, recompiles or failed frames."]
    lines.append("")
    for _anchor, title, render in _sections(report)[1:]:
        text = _capture(render, color=False).export_text()
        fence = "`" * max(3, _longest_backticks(text) + 1)
        lines += [
            f"<details><summary>{html.escape(title)}</summary>",
            "",
            f"{fence}text",
            text.rstrip(),
            fence,
            "",
            "</details>",
            "",
        ]
    return "\n".join(lines) + "\n"


def _md(text: object) -> str:
    return clean(text).replace("|", "\\|").replace("`", "'").replace("\n", " ")


def _longest_backticks(text: str) -> int:
    return max((len(m.group()) for m in re.finditer(r"`+", text)), default=0)
