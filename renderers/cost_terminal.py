"""`tcx cost` for people: each compiled function's call time, eager time and speedup, a bar chart of
where a call's time goes, the breakdown, compile time, then the findings ranked by measured cost."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from tcx.core.cost.measurements import Cost, FunctionCost, Row, totals_by_part
from tcx.core.cost.profile import PARTS
from tcx.renderers.header import location, view_header
from tcx.renderers.safe import clean

ROWS_SHOWN = 14
FINDINGS_SHOWN = 10
PART_STYLE = {
    "kernel": "green",
    "extern": "cyan",
    "graph_op": "cyan",
    "eager": "bold red",
    "guards": "yellow",
    "other": "dim",
}
PART_TEXT = {
    "kernel": "kernels",
    "extern": "extern calls",
    "graph_op": "graph ops",
    "eager": "eager",
    "guards": "guards",
    "other": "other",
}
_EIGHTHS = " ▏▎▍▌▋▊▉"


def render_cost(cost: Cost, console: Console, *, show_all: bool = False) -> None:
    view_header("cost", cost.model, console, function=cost.selection.function)
    status = cost.model.status.program
    if status.failed:
        console.print(
            Text(
                f"the program ended: {clean(status.status)} {clean(status.message or '')}; "
                "the calls measured until then are shown",
                style="warn",
            )
        )
    if cost.unavailable:
        console.print(Text(f"not available: {clean(cost.unavailable)}", style="bad"))
        return
    if not cost.functions:
        console.print(Text("No call of a compiled function was recorded.", style="muted"))
    for f in cost.functions:
        console.print()
        render_function(cost, f, console, show_all=show_all)
    console.print()
    render_compile_time(cost, console)
    console.print()
    render_findings(cost, console, show_all=show_all)
    console.print()
    console.print(Text("Notes", style="title"))
    for note in cost.notes:
        console.print(Text(f"  - {clean(note)}", style="muted"))


def render_function(cost: Cost, f: FunctionCost, console: Console, *, show_all: bool = False) -> None:
    title = Text(clean(f.label), style="title")
    title.append(f"  ({location(f.file, f.line)})", style="loc")
    console.print(title)
    measured = len(f.measured) + f.unlisted_calls
    profiled = len(f.profiled)
    console.print(
        Text(
            f"  {f.call_count} calls: {len(f.warmup)} warm-up (compiled), {measured} measured "
            f"({measured - profiled} timed only, {profiled} profiled)",
            style="muted",
        )
    )
    if f.call is None:
        console.print(Text("  no steady call: every call compiled (nothing to measure)", style="warn"))
        return
    line = Text("  call    ")
    line.append(f"{f.call.median_ms:.3f} ms", style="count")
    line.append(
        f" median (min {f.call.min_ms:.3f}, max {f.call.max_ms:.3f}) over {f.call.count} calls"
        + (" timed without the profiler" if f.timed_without_profiler else " (profiled)"),
        style="muted",
    )
    console.print(line)
    if f.eager is not None and f.compiled_compared is not None:
        line = Text("  eager   ")
        line.append(f"{f.eager.median_ms:.3f} ms", style="count")
        line.append(f" median over the same {f.eager.count} calls with compilation off ", style="muted")
        line.append(f"({_indices(f.compared_calls)})", style="muted")
        speedup = f.speedup
        if speedup is not None:
            line.append("  → speedup ", style="muted")
            line.append(f"{speedup:.2f}×", style="good" if speedup >= 1 else "bad")
        console.print(line)
    if not f.breakdown:
        return
    console.print()
    console.print(
        Text(
            f"  Where a call's time goes (mean of {profiled} profiled call(s), {f.profiled_ms:.3f} ms each)",
            style="title",
        )
    )
    render_chart(f, console)
    console.print()
    render_rows(f, console, show_all=show_all)


def render_chart(f: FunctionCost, console: Console) -> None:
    totals = totals_by_part(f)
    whole = sum(totals.values()) or 1.0
    width = max(10, min(50, console.width - 40))
    for part in PARTS:
        ms = totals.get(part, 0.0)
        if ms <= 0:
            continue
        line = Text(f"  {PART_TEXT[part]:<13}")
        line.append(bar(ms / whole, width).ljust(width), style=PART_STYLE[part])
        line.append(f" {ms / whole:6.1%}  {ms:.3f} ms")
        console.print(line)


def bar(fraction: float, width: int) -> str:
    """A horizontal bar of `fraction` of `width` cells, in eighths of a cell."""
    eighths = max(0, round(fraction * width * 8))
    full, rest = divmod(eighths, 8)
    return "█" * full + (_EIGHTHS[rest] if rest else "")


def render_rows(f: FunctionCost, console: Console, *, show_all: bool = False) -> None:
    rows = f.breakdown if show_all else f.breakdown[:ROWS_SHOWN]
    head = Text(f"  {'part':<9}{'compile':<9}{'ms/call':>9}{'share':>8}{'launch':>8}  what", style="muted")
    console.print(head)
    for row in rows:
        console.print(_row(row), no_wrap=True, overflow="ellipsis")
        for extra in _row_extras(row):
            console.print(Text(f"  {'':<43}{clean(extra)}", style="muted"), no_wrap=True, overflow="ellipsis")
    if len(f.breakdown) > len(rows):
        console.print(
            Text(f"  … {len(f.breakdown) - len(rows)} more rows (--all, or the JSON)", style="muted")
        )


def _row(row: Row) -> Text:
    text = Text("  ")
    text.append(f"{row.part:<9}", style=PART_STYLE.get(row.part, ""))
    text.append(f"{clean(row.compile_id or '-'):<9}{row.ms_per_call:>9.3f}{row.share:>8.1%}")
    counted = row.part in ("kernel", "extern", "graph_op", "guards")  # launches, calls, lookups
    text.append(f"{row.launches_per_call:>8g}  " if counted else f"{'':>8}  ")
    text.append(clean(row.name))
    return text


def _row_extras(row: Row) -> list[str]:
    out = []
    if row.user_line:
        out.append(f"at {location(row.user_line.get('file'), row.user_line.get('line'))}")
    if row.aten_ops:
        out.append("ops " + ", ".join(row.aten_ops[:6]))
    if row.detail:
        out.append(", ".join(row.detail))
    gpu = row.gpu
    if gpu:
        figures = []
        if gpu.get("bandwidth_bytes_s"):
            figures.append(f"{gpu['bandwidth_bytes_s'] / 1e12:.2f} TB/s")
        if gpu.get("flops_s"):
            figures.append(f"{gpu['flops_s'] / 1e12:.1f} TFLOP/s")
        if gpu.get("share_of_peak") is not None:
            figures.append(f"{gpu['share_of_peak']:.0%} of peak ({gpu.get('bound')}-bound)")
        if figures:
            out.append(" · ".join(figures))
    return out


def render_compile_time(cost: Cost, console: Console) -> None:
    line = Text("Compile time ", style="title")
    if cost.total_compile_s is None:
        line.append("not in this input (torch logged no compile time)", style="muted")
        console.print(line)
        return
    line.append(f"{cost.total_compile_s:.3f} s", style="count")
    if cost.recompile_ids:
        share = cost.recompile_s / cost.total_compile_s if cost.total_compile_s else 0.0
        line.append(
            f"  recompiles {cost.recompile_s:.3f} s ({share:.0%}, {len(cost.recompile_ids)} recompile(s))",
            style="muted",
        )
    console.print(line)
    per = [f"{cid} {s:.3f} s" for cid, s in cost.compile_s.items() if s is not None]
    if per:
        shown = per if len(per) <= 12 else [*per[:12], f"… {len(per) - 12} more"]
        console.print(Text("  " + "  ".join(clean(p) for p in shown), style="muted"))


def render_findings(cost: Cost, console: Console, *, show_all: bool = False) -> None:
    if not cost.findings:
        console.print(Text("No findings: nothing measurable to fix.", style="muted"))
        return
    shown = cost.findings if show_all else cost.findings[:FINDINGS_SHOWN]
    console.print(Text("What to fix first (ranked by measured ms per call)", style="title"))
    for i, finding in enumerate(shown, 1):
        console.print()
        head = Text(f"#{i} ", style="count")
        head.append(clean(finding.title), style="gbtype")
        head.append(f"  {finding.ms_per_call:.3f} ms/call", style="count")
        if finding.share is not None:
            head.append(f"  {finding.share:.0%} of the call", style="bad" if finding.share >= 0.25 else "")
        console.print(head)
        where = Text("   at ", style="muted")
        where.append(location(finding.file, finding.line), style="loc")
        where.append(f" in {clean(finding.function)}", style="muted")
        console.print(where)
        if finding.detail:
            console.print(Text(f"   {clean(finding.detail)}", style="muted"))
        if finding.remedy:
            fix = Text("   fix  ", style="good")
            fix.append(clean(finding.remedy))
            console.print(fix)
    if len(cost.findings) > len(shown):
        console.print(
            Text(f"… {len(cost.findings) - len(shown)} more findings (--all, or the JSON)", style="muted")
        )


def _indices(indices: list[int]) -> str:
    text = " ".join(f"#{i}" for i in indices[:6])
    return text + (f" … {len(indices) - 6} more" if len(indices) > 6 else "")
