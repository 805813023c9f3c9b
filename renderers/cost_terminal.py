"""`tcx cost` for people: per grad mode, the program's step time, the same steps' eager time and the
speedup (each with its interval and count, or why it is not shown), a bar chart of where a step's
time goes, the breakdown, compile time (once), then the findings: per step, once, expected."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from tcx.core.cost.findings import site_label
from tcx.core.cost.measurements import Cost, Finding, Row, StepCost, totals_by_part
from tcx.core.cost.profile import PARTS
from tcx.core.cost.stats import CONFIDENCE, MIN_STEPS, Estimate, seconds_text, shown
from tcx.core.cost.steps import PHASE_TEXT, PHASES
from tcx.renderers.code_block import Wrapped
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
    "autograd": "magenta",
    "optimizer": "blue",
    "between": "dim",
    "other": "dim",
}
PART_TEXT = {
    "kernel": "kernels",
    "extern": "extern calls",
    "graph_op": "graph ops",
    "eager": "eager",
    "guards": "guards",
    "autograd": "autograd",
    "optimizer": "optimizer",
    "between": "between",
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
                "the steps measured until then are shown",
                style="warn",
            )
        )
    for warning in cost.warnings:
        console.print(Text(f"warning: {clean(warning)}", style="warn"))
    if cost.unavailable:
        console.print(Text(f"not available: {clean(cost.unavailable)}", style="bad"))
        return
    for step in cost.steps:
        console.print()
        render_steps(step, console, show_all=show_all)
    console.print()
    render_compile_time(cost, console)
    console.print()
    render_findings(cost, console, show_all=show_all)
    console.print()
    console.print(Text("Notes", style="title"))
    for note in cost.notes:
        console.print(Text(f"  - {clean(note)}", style="muted"))


def figure(e: Estimate, unit: str, places: int | None = None) -> str:
    """A median with its interval, at the precision the interval supports."""
    d = e.decimals if places is None else places
    return f"{shown(e.value, d)}{unit} ({CONFIDENCE:.0%} interval {shown(e.low, d)}–{shown(e.high, d)}{unit})"


def render_steps(step: StepCost, console: Console, *, show_all: bool = False) -> None:
    g = step.group
    title = Text(clean(g.label), style="title")
    title.append(f"  ({clean(g.function)})", style="loc")
    console.print(title)
    runs = f" in {g.runs} runs" if g.runs > 1 else ""
    console.print(
        Text(
            f"  {len(g.steps)} steps{runs}: {len(g.warmup)} warm-up (compiled), {len(g.steady)} steady "
            f"({len(g.timed)} timed, {len(g.steady) - len(g.timed)} profiled)",
            style="muted",
        )
    )
    line = Text("  step     ")
    if g.time is not None and g.time_note is None:
        line.append(figure(g.time, " ms"), style="count")
        line.append(f", {g.time.count} steps; min {g.time.min:.3g}, max {g.time.max:.3g}", style="muted")
        console.print(line)
        phases = [f"{PHASE_TEXT[p]} {g.phases.get(p, 0.0):.3g}" for p in PHASES if g.phases.get(p)]
        if phases:
            console.print(Text("           medians: " + " + ".join(phases) + " ms", style="muted"))
    else:
        line.append("not shown: ", style="warn")
        line.append(clean(g.time_note or "no steady step"), style="muted")
        console.print(line)
    if g.eager is not None and g.eager.count >= MIN_STEPS:
        line = Text("  eager    ")
        line.append(figure(g.eager, " ms"), style="count")
        line.append(f", the same steps with compilation off ({g.eager.count})", style="muted")
        console.print(line)
    line = Text("  speedup  ")
    if g.speedup is not None and g.speedup_note is None:
        line.append(
            figure(g.speedup, "×", max(2, g.speedup.decimals)),
            style="good" if g.speedup.value >= 1 else "bad",
        )
        line.append(f", {len(g.timed)} compiled and {len(g.eager_steps)} eager steps", style="muted")
        if g.speedup_caveat:
            line.append(f"; {g.speedup_caveat}", style="warn")
    else:
        line.append("not shown: ", style="warn")
        line.append(clean(g.speedup_note or "no comparison"), style="muted")
    console.print(line)
    if step.launch_bound:
        busy = step.launch_bound["device_busy_share"]
        text = f"  GPU busy {busy:.0%} of a profiled step"
        text += ": launch-bound (see the findings)" if step.launch_bound["launch_bound"] else ""
        console.print(Text(text, style="warn" if step.launch_bound["launch_bound"] else "muted"))
    if not step.breakdown:
        return
    console.print()
    console.print(
        Text(
            f"  Where a step's time goes (mean of {len(step.profiled)} profiled step(s), "
            f"{step.profiled_ms or 0:.3g} ms each with the profiler on)",
            style="title",
        )
    )
    render_chart(step, console)
    console.print()
    render_rows(step, console, show_all=show_all)


def render_chart(step: StepCost, console: Console) -> None:
    totals = totals_by_part(step)
    whole = sum(totals.values()) or 1.0
    width = max(10, min(50, console.width - 40))
    for part in PARTS:
        ms = totals.get(part, 0.0)
        if ms <= 0:
            continue
        line = Text(f"  {PART_TEXT[part]:<13}")
        line.append(bar(ms / whole, width).ljust(width), style=PART_STYLE[part])
        line.append(f" {ms / whole:6.1%}  {ms:.3g} ms")
        console.print(line)


def bar(fraction: float, width: int) -> str:
    """A horizontal bar of `fraction` of `width` cells, in eighths of a cell."""
    eighths = max(0, round(fraction * width * 8))
    full, rest = divmod(eighths, 8)
    return "█" * full + (_EIGHTHS[rest] if rest else "")


def render_rows(step: StepCost, console: Console, *, show_all: bool = False) -> None:
    rows = step.breakdown if show_all else step.breakdown[:ROWS_SHOWN]
    device = any(r.launch_ms_per_step is not None for r in rows)
    head = f"  {'part':<10}{'phase':<10}{'compile':<8}{'ms/step':>9}{'share':>7}{'launch':>7}"
    head += f"{'device':>9}{'launch ms':>10}  what" if device else "  what"
    console.print(Text(head, style="muted"))
    indent = 63 if device else 44  # the "what" column: a row wider than the console wraps under it
    for row in rows:
        console.print(Wrapped(_row(row, device), hang=indent + 2))
        for extra in _row_extras(row):
            console.print(
                Wrapped(Text(f"  {'':<{indent}}{clean(extra)}", style="muted"), prose=True, hang=indent + 2)
            )
    if len(step.breakdown) > len(rows):
        console.print(
            Text(f"  … {len(step.breakdown) - len(rows)} more rows (--all, or the JSON)", style="muted")
        )


def _row(row: Row, device: bool) -> Text:
    text = Text("  ")
    text.append(f"{row.part:<10}", style=PART_STYLE.get(row.part, ""))
    phase = PHASE_TEXT.get(row.phase, row.phase).split()[-1] if row.phase != "call" else "call"
    text.append(f"{phase:<10}{clean(row.compile_id or '-'):<8}{row.ms_per_step:>9.3g}{row.share:>7.1%}")
    counted = row.part in ("kernel", "extern", "graph_op", "guards")  # launches, calls, lookups
    text.append(f"{row.launches_per_step:>7.3g}" if counted else f"{'':>7}")
    if device:
        own = (
            f"{row.own_ms_per_step:.3g}"
            if row.own_ms_per_step is not None and row.launch_ms_per_step is not None
            else ""
        )
        launch = f"{row.launch_ms_per_step:.3g}" if row.launch_ms_per_step is not None else ""
        text.append(f"{own:>9}{launch:>10}")
    text.append("  " + clean(f"{row.name} ({site_label(row.site)})" if row.site else row.name))
    return text


def _row_extras(row: Row) -> list[str]:
    out = []
    if row.user_line:
        out.append(f"at {location(row.user_line.get('file'), row.user_line.get('line'))}")
    elif row.part in ("kernel", "extern") and row.compile_id:
        out.append(
            f"torch gives no line: graph {row.compile_id}" + (f", node {row.site}" if row.site else "")
        )
    if row.aten_ops:
        out.append("ops " + ", ".join(row.aten_ops[:6]))
    if row.detail:
        out.append(", ".join(row.detail))
    if row.replayed:
        out.append("run from a CUDA-graph replay (cudaGraphLaunch)")
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
    line = Text("Compile time, once ", style="title")
    if cost.total_compile_s is None:
        line.append("not in this input (torch logged no compile time)", style="muted")
        console.print(line)
        return
    line.append(seconds_text(cost.total_compile_s), style="count")
    if cost.recompile_ids:
        share = cost.recompile_s / cost.total_compile_s if cost.total_compile_s else 0.0
        line.append(
            f"  recompiles {seconds_text(cost.recompile_s)} ({share:.0%}, "
            f"{len(cost.recompile_ids)} recompile(s))",
            style="muted",
        )
    console.print(line)
    per = [f"{cid} {seconds_text(s)}" for cid, s in cost.compile_s.items() if s is not None]
    if per:
        shown_ = per if len(per) <= 12 else [*per[:12], f"… {len(per) - 12} more"]
        console.print(Text("  " + "  ".join(clean(p) for p in shown_), style="muted"))


def render_findings(cost: Cost, console: Console, *, show_all: bool = False) -> None:
    per_step, once, expected = cost.per_step, cost.once, cost.expected
    if not (per_step or once or expected):
        console.print(Text("No findings: nothing measurable to fix.", style="muted"))
        return
    limit = None if show_all else FINDINGS_SHOWN
    if per_step:
        console.print(Text("What to fix first: what every step pays (measured ms per step)", style="title"))
        _findings(per_step[:limit], console, cost)
    else:
        console.print(Text("Nothing measurable costs every step.", style="muted"))
    if once:
        console.print()
        console.print(Text("Paid once: compile time (not per step)", style="title"))
        _findings(once[:limit], console, cost)
    if expected:
        console.print()
        console.print(Text("Expected (not problems)", style="title"))
        for f in expected[:limit]:
            line = Text(f"  - {clean(f.title)}  ")
            line.append(seconds_text(f.seconds or 0.0), style="count")
            line.append(f"  {clean(f.expected or '')}", style="muted")
            console.print(line)
    hidden = sum(max(0, len(x) - FINDINGS_SHOWN) for x in (per_step, once, expected)) if not show_all else 0
    if hidden:
        console.print(Text(f"… {hidden} more findings (--all, or the JSON)", style="muted"))


def _findings(found: list[Finding], console: Console, cost: Cost) -> None:
    groups = {s.group.key: s.group.label for s in cost.steps}
    for i, finding in enumerate(found, 1):
        console.print()
        head = Text(f"#{i} ", style="count")
        head.append(clean(finding.title), style="gbtype")
        if finding.ms_per_step is not None:
            head.append(f"  {finding.ms_per_step:.3g} ms/step", style="count")
            if finding.per_step_ms:
                low, high = min(finding.per_step_ms), max(finding.per_step_ms)
                head.append(
                    f" (mean of {len(finding.per_step_ms)} profiled steps, {low:.2g}–{high:.2g})",
                    style="muted",
                )
            if finding.share is not None:
                head.append(
                    f"  {finding.share:.0%} of the step", style="bad" if finding.share >= 0.25 else ""
                )
            if len(groups) > 1 and finding.group in groups:
                head.append(f"  ({clean(groups[finding.group])})", style="muted")
        elif finding.seconds is not None:
            head.append(f"  {seconds_text(finding.seconds)} once", style="count")
        console.print(head)
        where = Text("   at ", style="muted")
        where.append(location(finding.file, finding.line), style="loc")
        if finding.function:
            where.append(f" in {clean(finding.function)}", style="muted")
        console.print(where)
        if finding.detail:
            console.print(Text(f"   {clean(finding.detail)}", style="muted"))
        if finding.remedy:
            fix = Text("   fix  ", style="good")
            fix.append(clean(finding.remedy))
            console.print(fix)
