"""`tcx explain` for people: a header with the counts, then every distinct graph break, ranked."""

from __future__ import annotations

import os
import shlex

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from tcx.core.analysis.empty_run import empty_run_text
from tcx.core.model import Frame
from tcx.core.model.failure import failure
from tcx.core.views.explain import BreakSite, Explanation, FailedFrame
from tcx.renderers.children import render_child_processes
from tcx.renderers.code_block import Wrapped, print_lines
from tcx.renderers.failure import render_failure, render_failure_notice
from tcx.renderers.header import location, view_header
from tcx.renderers.safe import clean
from tcx.renderers.source import excerpt


def render_explain(ex: Explanation, console: Console, *, max_stack: int = 6, view: str = "explain") -> None:
    render_header(ex, console, view)
    failed = failure(ex.model)
    if failed and ex.compiles:
        render_failure_notice(failed, console)
    render_child_processes(ex.model, console, " (not in the counts above; `tcx check` counts them)")
    render_ranks(ex, console)
    render_findings(ex, console, view)
    if ex.failed_frames:
        render_failed_frames(ex.failed_frames, console, ex)
    if ex.sites:
        render_sites(ex, console, max_stack)
    if failed:
        if ex.sites:
            console.print()
        render_failure(failed, console)
    render_restarts(ex, console)


def followup_target(ex: Explanation) -> str:
    """What a follow-up command names: the recording or log this was read from (instant), else the
    program as given (a live run: the recording it saves is named at the end of the output)."""
    m = ex.model
    source = m.source
    return _as_typed(source) if m.source_kind != "live" and source else m.target


def _as_typed(path: str) -> str:
    """A path below the current folder as the user would type it there (relative), else whole."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith(os.pardir) else rel


def render_findings(ex: Explanation, console: Console, view: str = "explain") -> None:
    """The run's findings, one line each, before any detail: the breaks (detailed below), the
    recompiles and the frames Dynamo gave up on, each with what shows it."""
    target = shlex.quote(followup_target(ex))
    if ex.sites:
        line = Text(
            f"{ex.unique_graph_break_count} distinct graph break{'s' if len(ex.sites) != 1 else ''} "
            f"({ex.graph_break_count} event{'s' if ex.graph_break_count != 1 else ''}): below, worst first",
            style="bad",
        )
        console.print(Wrapped(line, prose=True, hang=2))
    elif not failure(ex.model):
        console.print(no_breaks_verdict(ex))
    if ex.recompiles:
        frames = list(
            dict.fromkeys(ex.frame_name(r.compile_id) for r in ex.recompiles if r.compile_id in ex.compiles)
        )
        line = Text(f"{len(ex.recompiles)} recompile{'s' if len(ex.recompiles) != 1 else ''}", style="warn")
        if frames:
            line.append(f" of {clean(', '.join(frames))}")
        line.append(": which guard failed on which call: ", style="muted")
        line.append(clean(f"tcx recompiles {target}"), style="loc")
        console.print(Wrapped(line, prose=True, hang=2))
    if ex.failed_frames:
        n = len(ex.failed_frames)
        line = Text(f"{n} frame{'s' if n != 1 else ''} Dynamo gave up on", style="bad")
        line.append(" (they run in eager Python): ", style="muted")
        names = dict.fromkeys(ex.frame_name(f.compile_id, f.function) for f in ex.failed_frames)
        line.append(clean(", ".join(names)))
        line.append("; why, below", style="muted")
        console.print(Wrapped(line, prose=True, hang=2))
    if ex.restarts:
        n = len(ex.restarts)
        line = Text(f"{n} restart{'s' if n != 1 else ''}", style="muted")
        line.append(" (attempts torch threw away and traced again): one line each at the end", style="muted")
        console.print(Wrapped(line, prose=True, hang=2))
    console.print()


def render_restarts(ex: Explanation, console: Console) -> None:
    """Restarts after the findings, one line each: a reason already given is named by the restart
    that gave it, not repeated."""
    if not ex.restarts:
        return
    console.print()
    first: dict[str, str] = {}  # reason -> the compile id that gave it
    for r in ex.restarts:
        comp = ex.compiles.get(r.compile_id)
        name = ex.frame_name(r.compile_id) if comp else "?"
        counted = f"; its {r.graphs} graph(s) are in the graph count" if r.graphs else ""
        head = Text(f"restarted {clean(r.compile_id)} {clean(name)}", style="warn")
        head.append(f" (attempt {r.attempt} thrown away{counted}): ", style="muted")
        seen = first.setdefault(r.reason, r.compile_id)
        reason = Text(clean(r.reason)) if seen == r.compile_id else Text(f"as {clean(seen)}", style="muted")
        console.print(Wrapped(head + reason, prose=True, hang=2))


def no_breaks_verdict(ex: Explanation) -> Text:
    """The verdict of a run that ended well and broke no graph: what exactly it covers."""
    if not ex.compiles:
        return Text(empty_run_text(ex.model), style="warn")
    if ex.failed_frames:
        return Text(
            f"No graph breaks, but {len(ex.failed_frames)} frame(s) failed to compile (above).", style="warn"
        )
    if ex.model.status.children:  # "no graph breaks" must not read as the whole program's
        return Text("No graph breaks in the program's own process.", style="good")
    return Text("No graph breaks: every compiled frame became whole graphs.", style="good")


def render_sites(ex: Explanation, console: Console, max_stack: int) -> None:
    console.print(Text("Graph breaks, worst first", style="title"))
    for rank, site in enumerate(ex.sites, start=1):
        console.print()
        render_site(rank, site, ex, console, max_stack=max_stack)


def render_header(ex: Explanation, console: Console, view: str = "explain") -> None:
    m = ex.model
    view_header(view, m, console, function=ex.selection.function)
    line = Text()
    for label, key in (
        ("graphs", "graph_count"),
        ("compiles", "compile_count"),
        ("recompiles", "recompile_count"),
        ("graph breaks", "graph_break_count"),
        ("distinct", "unique_graph_break_count"),
        ("failed frames", "failed_frame_count"),
    ):
        value = getattr(ex, key)
        style = "bad" if value and key in ("graph_break_count", "failed_frame_count") else "count"
        line.append(f"{label} ", style="muted")
        line.append(str(value), style=style)
        line.append("  ")
    console.print(line)
    if ex.frames_compiled:
        named = dict.fromkeys(
            ex.frame_name(cid) for cid, c in ex.compiles.items() if not c.is_resume and not c.failed
        )
        frames = Text("frames compiled: ", style="muted") + Text(
            clean(", ".join(named or ex.frames_compiled))
        )
        console.print(Wrapped(frames, prose=True, hang=2))
    warnings = m.status.warnings  # graph breaks left out: explained below
    for message in warnings[:3]:
        console.print(Text(f"torch warned: {clean(message)}", style="warn"))
    if len(warnings) > 3:
        console.print(Text(f"(+{len(warnings) - 3} more torch warnings in the recording)", style="muted"))
    for problem in m.problems[:5]:
        console.print(Text(f"warning: {clean(problem)}", style="warn"))
    if len(m.problems) > 5:
        console.print(Text(f"({len(m.problems) - 5} more warnings: --format json lists all)", style="muted"))
    for name, why in m.status.features.unavailable().items():
        console.print(Text(f"note: {clean(name)}: {clean(why)}", style="warn"))
    console.print()


def render_failed_frames(frames: list[FailedFrame], console: Console, ex: Explanation | None = None) -> None:
    console.print(
        Text(
            f"{len(frames)} frame(s) Dynamo gave up on entirely (they run in eager Python):",
            style="bad",
        )
    )
    for f in frames:
        t = Text("  • ")
        t.append(clean(ex.frame_name(f.compile_id, f.function) if ex else f.function), style="title")
        t.append(f"  {location(f.file, f.line)}", style="loc")
        t.append(f"  compile {clean(f.compile_id)}: ", style="muted")
        t.append(clean(f.kind))
        console.print(Wrapped(t, prose=True, hang=4))
    console.print()


def render_site(rank: int, site: BreakSite, ex: Explanation, console: Console, *, max_stack: int) -> None:
    head = Text(f"#{rank} ", style="count")
    head.append(clean(site.gb_type), style="gbtype")
    if site.gb_id:
        head.append(f"  {clean(site.gb_id)}", style="muted")
    occ = len(site.occurrences)
    head.append(f"  ×{occ}", style="count")
    if site.frame_skipped:
        head.append("  frame skipped", style="bad")
    console.print(head)
    where = Text("   at ", style="muted")
    where.append(location(site.file, site.line), style="loc")
    if site.function:
        where.append(f" in {clean(site.function)}", style="muted")
    console.print(Wrapped(where, prose=True))
    last = site.user_stack[-1] if site.user_stack else None
    console.print(
        Padding(excerpt(site.file, site.line, ex.model.sources, last.code if last else ""), (0, 0, 0, 3))
    )
    if site.entry_frame is not None:
        entry = Text("   reached from your code at ", style="warn")
        entry.append(location(site.entry_frame.file, site.entry_frame.line), style="loc")
        console.print(entry)
        console.print(
            Padding(
                excerpt(
                    site.entry_frame.file, site.entry_frame.line, ex.model.sources, site.entry_frame.code
                ),
                (0, 0, 0, 3),
            )
        )
    body = Table.grid(padding=(0, 2))
    body.add_column(style="muted", justify="right", no_wrap=True)
    body.add_column()

    def row(label: str, value: str, style: str = "", *, prose: bool = True) -> None:
        body.add_row(label, Wrapped(Text(clean(value), style=style), prose=prose))

    if site.explanation:
        row("why", site.explanation)
    for caused_type, caused_id in site.caused:
        row("then", f"{caused_type}" + (f" ({caused_id})" if caused_id else ""))
    for hint in site.hints:
        row("torch hint", hint)
    if site.suggestion:
        row("fix", site.suggestion, "good")
    row("region", _regions_text(site))
    if len(site.user_stack) > 1:
        row("stack", _stack_text(site.user_stack, max_stack), prose=False)
    console.print(Padding(body, (0, 0, 0, 3)))


def _regions_text(site: BreakSite) -> str:
    parts = []
    for r in site.regions:
        cid = r.get("compile_id") or "?"
        if r.get("graphs"):
            ops = f" ({r['graph_ops']} ops)" if r.get("graph_ops") is not None else ""
            graph = f"graph of compile {cid} in {r.get('frame')}{ops} ends here"
        else:
            graph = f"compile {cid} in {r.get('frame')} produced no graph before this break"
        resumed = r.get("resumed_in")
        if resumed == "eager":
            tail = f"the {'rest of the' if r.get('graphs') else 'whole'} frame runs in eager Python"
        elif resumed:
            tail = f"execution resumes in compile {resumed} ({r.get('resume_function')})"
        elif r.get("resume_function"):
            tail = f"execution resumes in {r.get('resume_function')} (not compiled in this run)"
        else:
            tail = "execution continues in eager Python"
        parts.append(f"{graph}; {tail}")
    unique = list(dict.fromkeys(parts))
    shown = unique[:3]
    hidden = len(unique) - len(shown)
    more = f"\n({hidden} more region{'s' if hidden != 1 else ''}: --format json lists all)" if hidden else ""
    return "\n".join(shown) + more


def _stack_text(stack: list[Frame], max_stack: int) -> str:
    """The innermost `max_stack` frames, one a line, outermost first; how many are not shown."""
    hidden = max(0, len(stack) - max_stack)
    lines = [f"→ {f.name} ({location(f.file, f.line)})" for f in stack[-max_stack:]]
    if hidden:
        lines.insert(
            0, f"({hidden} outer frame{'s' if hidden != 1 else ''} not shown: --format json lists all)"
        )
    return "\n".join(lines)


def rank_ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 3, 5, 7, 8] -> "0-3, 5, 7-8": 64 ranks read at a glance."""
    spans: list[list[int]] = []
    for r in sorted(ranks):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in spans)


def render_ranks(ex: Explanation, console: Console) -> None:
    """Per-rank table and the first divergence, for input from several ranks."""
    if ex.ranks is None:
        return
    summaries, divergence = ex.ranks
    heads = ("rank", "compiles", "graphs", "graph breaks", "recompiles", "kernels", "failed", "compile s")
    keys = (
        "rank",
        "compiles",
        "graphs",
        "graph_breaks",
        "recompiles",
        "kernels",
        "failed_frames",
        "compile_time_s",
    )
    cells = [[str(getattr(r, k)) for k in keys] for r in summaries]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]
    rows = [Text("  " + "  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True)), style="muted")]
    rows += [Text("  " + "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True))) for row in cells]
    print_lines(console, rows, title="per-rank summary")  # one row per rank, never cut
    div = divergence.to_json() if divergence else None
    if div is None:
        console.print(Text("All ranks compiled the same frames with the same facts.", style="good"))
    else:
        head = Text("Ranks diverge first at compile ", style="bad")
        head.append(clean(div["compile_id"]), style="count")
        head.append(f" ({len(div['divergent_compile_ids'])} divergent compile id(s) in all)", style="muted")
        console.print(head)
        console.print(Padding(Text(clean(div["cause"])), (0, 0, 0, 3)))
        for group in div["groups"]:
            facts = group["facts"]
            desc = (
                "not compiled"
                if not facts.get("compiled")
                else (
                    f"{facts.get('frame')}; {facts.get('outcome')}"
                    + (f"; recompile: {facts['recompile_reason']}" if facts.get("recompile_reason") else "")
                )
            )
            line = Text(f"   ranks {rank_ranges(group['ranks'])}: ", style="muted")
            line.append(clean(desc))
            console.print(line)
    console.print()
