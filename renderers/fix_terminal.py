"""`tcx fix` for people: the baseline's figures, then each remedy with its before → after figures,
whether the re-run verified it and why not, verified ones ranked first."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from tcx.core.cost.stats import seconds_text
from tcx.core.fix.verify import MIN_STEADY_CALLS, ORDER_BASIS, Figures, FixReport, Outcome
from tcx.renderers.header import location, view_header
from tcx.renderers.safe import clean

FIGURES = (
    ("graph_breaks", "graph breaks"),
    ("graphs", "graphs"),
    ("recompiles", "recompiles"),
    ("compile_s", "compile"),
    ("call_ms", "ms/call"),
)


def render_fix(report: FixReport, console: Console) -> None:
    base = report.baseline
    view_header("fix", base.model, console, function=base.selection.function)
    if base.failed:
        console.print(Text(f"the baseline run failed: {clean(base.failed)}", style="bad"))
    console.print(Text("baseline  ", style="title") + _figures(base.figures))
    outcomes = [*report.verified, *(o for o in report.outcomes if not o.verified)]
    if not outcomes:
        nothing = (
            "No remedy was tried: the baseline run failed."
            if base.failed
            else ("No finding of this run has a remedy tcx fix can try.")
        )
        console.print(Text(nothing, style="muted"))
    if report.outcomes:
        console.print(
            Text(
                f"Tried in the order of {ORDER_BASIS}; --max-runs {report.max_runs} takes the first.",
                style="muted",
            )
        )
    for number, outcome in enumerate(outcomes, 1):
        console.print()
        _outcome(number, outcome, base.figures, console)
    if report.combined:
        console.print()
        console.print(Text("The verified remedies together", style="title"))
        _outcome(0, report.combined, base.figures, console)
    console.print()
    if report.runs_in:
        console.print(Text(f"The program ran in {clean(report.runs_in)}.", style="muted"))
    if not any(o.ran for o in outcomes):
        return
    console.print(
        Text(
            f"Each remedy ran in a fresh process (seeded with {report.seed}, compile caches off so compile "
            "seconds compare and no run inherits another's state); the baseline's outputs were compared with "
            "each re-run's; counts come from torch's trace of each run. Your files were not edited.",
            style="muted",
        )
    )


def _outcome(number: int, o: Outcome, before: Figures, console: Console) -> None:
    r = o.remedy
    if o.verified:
        mark = Text("✓ verified  ", style="good")
    elif o.ran:
        mark = Text("✗ not verified  ", style="bad")
    else:
        mark = Text("– not run  ", style="muted")
    head = Text(f"{number}. " if number else "") + mark + Text(f"[{r.kind}] ", style="muted")
    if r.findings and number and r.runnable:
        head.append(f"(findings' compile {seconds_text(r.cost_s)}) ", style="muted")
    changes = r.change.splitlines() or [""]
    console.print(head + Text(clean(changes[0])))
    for change in changes[1:]:
        console.print(Text("   + ", style="muted") + Text(clean(change)))
    for f in r.findings:
        what = f"{f.what} of {f.arg} dim {f.dim}" if f.arg else f.what
        line = Text("   for  ", style="muted") + Text(clean(what))
        line.append(f"  {location(f.file, f.line)}", style="loc")
        line.append(f"  ×{f.occurrences}", style="muted")
        console.print(line)
    if r.rewrite:
        console.print(Text("   on a copy of the file:", style="muted"))
        for patched in r.rewrite.patch.splitlines()[2:]:
            style = "good" if patched.startswith("+") else "bad" if patched.startswith("-") else "muted"
            console.print(Text(f"     {clean(patched)}", style=style))
    if o.after:
        console.print(Text("   ", style="muted") + _figures(before, o.after))
    if o.outputs_note:
        style = "good" if o.outputs_match else ("bad" if o.outputs_match is False else "muted")
        console.print(Text("   outputs  ", style="muted") + Text(clean(o.outputs_note), style=style))
    for why in o.why_not:
        console.print(Text("   why not  ", style="muted") + Text(clean(why), style="warn"))


def _figures(before: Figures, after: Figures | None = None) -> Text:
    out = Text()
    for key, label in FIGURES:
        out.append(f"{label} ", style="muted")
        if after is None:
            out.append(_value(before, key))
        else:
            old, new = getattr(before, key), getattr(after, key)
            changed = old != new and key in ("graph_breaks", "graphs", "recompiles")
            style = ("good" if new < old else "bad") if changed else ""
            out.append(f"{_value(before, key)} → {_value(after, key)}", style=style)
        out.append("   ")
    calls = [before.steady_calls, *([after.steady_calls] if after else [])]
    out.append(
        f"(ms/call: median and range of {' → '.join(map(str, calls))} steady calls; not printed under "
        f"{MIN_STEADY_CALLS})",
        style="muted",
    )
    return out


def _value(figures: Figures, key: str) -> str:
    """A figure as printed: compile seconds with the two digits a noisy time supports; a call time with
    the range of its steady calls, and only from MIN_STEADY_CALLS of them (a single call has no spread)."""
    value = getattr(figures, key)
    if value is None:
        return "—"
    if key == "call_ms":
        if figures.steady_calls < MIN_STEADY_CALLS or figures.range_ms is None:
            return "—"
        low, high = figures.range_ms
        return f"{value} ({low}–{high})"
    return seconds_text(float(value)) if key == "compile_s" else str(value)
