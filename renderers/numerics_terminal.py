"""`tcx numerics` for people: the verdict, each compiled call against eager and float64, the gradients and
parameters in brief, then where the first divergence is (stage, graph, node, line, pass) and the remedies
re-run."""

from __future__ import annotations

from typing import Literal

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tcx.core.model.failure import failure
from tcx.core.numerics.report import STAGES, Judgement, NumericsReport, Probe, RemedyCheck, ValueCheck
from tcx.core.views.numerics import NumericsView
from tcx.renderers.failure import render_failure, render_failure_notice
from tcx.renderers.header import location, view_header
from tcx.renderers.safe import clean

MAX_ROWS = 12  # call rows shown (the divergent ones and the first calls); JSON has them all
VERDICT_TEXT = {
    "within_tolerance": ("good", "compiled computes what eager computes, within rounding"),
    "diverged": ("bad", "compiled diverges from eager beyond rounding"),
    "nondeterministic": (
        "warn",
        "the values differ, and so do two eager runs: the program is not deterministic",
    ),
    "not_compared": ("muted", "nothing was compared"),
}


def render_numerics(view: NumericsView, console: Console) -> None:
    view_header("numerics", view.model, console, function=view.selection.function)
    failed = failure(view.model)
    if failed:  # the compiled run's: the values compared are those of the calls made before it stopped
        render_failure_notice(failed, console)
    report = view.report
    if report is None:
        console.print(Text(clean(view.unavailable or "no numerics comparison"), style="muted"))
        return
    style, words = VERDICT_TEXT.get(report.verdict, ("muted", report.verdict))
    counts = report.counts()
    head = Text("verdict  ", style="title") + Text(words, style=style)
    console.print(head)
    console.print(Text(_compared(counts, report), style="muted"))
    console.print(Text(_basis(report), style="muted"))
    calls = report.of_kind("call")
    if calls:
        console.print()
        console.print(_table(calls))
        hidden = len(calls) - len(_shown(calls))
        if hidden > 0:
            console.print(
                Text(f"… {hidden} more calls within tolerance (--format json lists every one)", style="muted")
            )
    for kind, title in (
        ("backward", "gradients after each backward"),
        ("step", "parameters after each optimizer step"),
    ):
        checks = report.of_kind(kind)
        if checks:
            console.print(_summary(title, checks))
    if report.first_divergence is not None:
        console.print()
        _divergence(report, console)
    if report.remedies:
        console.print()
        console.print(Text("Remedies, each re-run with the program", style="title"))
        for number, remedy in enumerate(report.remedies, 1):
            _remedy(number, remedy, console)
    if report.verdict == "within_tolerance" and any(c.max_abs for c in report.checks):
        console.print()
        console.print(Text(_expected(report), style="muted"))
    for note in report.notes:
        console.print(Text("note: " + clean(note), style="warn"))
    console.print()
    console.print(Text(_runs(report), style="muted"))
    if failed:
        console.print()
        render_failure(failed, console)


def _compared(counts: dict[str, int], report: NumericsReport) -> str:
    parts = [f"{counts['calls']} compiled calls"]
    if report.grads:
        parts.append(f"{counts['backward']} backward passes (gradients)")
        parts.append(f"{counts['steps']} optimizer steps (parameters)")
    out = f"compared: {', '.join(parts)}; {counts['values']} values; {counts['divergent']} divergent"
    if counts["nondeterministic"]:
        out += f", {counts['nondeterministic']} not repeatable in eager"
    return out + f" (seed {report.seed} in every run)"


def _basis(report: NumericsReport) -> str:
    tol = report.tolerance
    multiple = (
        f"{tol['multiplier']:g}×" if tol.get("multiplier") is not None else "2× (3× for bfloat16/float16)"
    )
    out = (
        f"judged as torch's accuracy checks do: a compiled value diverges when its error against float64 "
        f"exceeds {multiple} eager's own error plus one rounding (half a step of the dtype)"
    )
    if tol.get("rtol") is not None or tol.get("atol") is not None:
        out += f", or any element is outside --rtol {tol.get('rtol') or 0:g} --atol {tol.get('atol') or 0:g}"
    ops = report.reference.get("ops")
    fallback = report.reference.get("fallback_ops") or {}
    if ops:
        out += f"; float64 reference: {ops} ops run again in float64 beside eager"
        if fallback:
            names = ", ".join(f"{clean(k)} ×{v}" for k, v in list(fallback.items())[:4])
            out += f" ({sum(fallback.values())} at the program's precision: {names})"
    return out


def _shown(calls: list[ValueCheck]) -> list[ValueCheck]:
    off = [c for c in calls if not c.within]
    rest = [c for c in calls if c.within][: max(0, MAX_ROWS - len(off))]
    return sorted(off + rest, key=lambda c: c.seq)[: max(MAX_ROWS, len(off))]


def _table(calls: list[ValueCheck]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="muted")
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("call", "left"),
        ("max |c−e|", "right"),
        ("compiled err", "right"),
        ("eager err", "right"),
        ("allowed", "right"),
        ("", "left"),
    )
    for name, justify in columns:
        table.add_column(name, justify=justify)
    for check in _shown(calls):
        worst = check.worst
        table.add_row(
            Text(clean(check.name)),
            _num(check.max_abs),
            _num(worst.compiled_error if worst else None),
            _num(worst.eager_error if worst else None),
            _num(worst.allowed_error if worst else None),
            _mark(check),
        )
    return table


def _mark(check: ValueCheck) -> Text:
    if check.note:
        return Text(clean(check.note), style="warn")
    if check.within:
        return Text("✓", style="good")
    if check.nondeterministic:
        return Text(f"≠ eager itself (eager runs differ by {_num_text(check.eager_spread)})", style="warn")
    worst = check.worst
    if worst is None or worst.basis == "float64":
        return Text("✗ beyond allowed", style="bad")
    return Text(
        "✗ " + ("outside tolerance" if worst.basis == "tolerance" else clean(worst.note or worst.basis)),
        style="bad",
    )


def _summary(title: str, checks: list[ValueCheck]) -> Text:
    off = [c for c in checks if not c.within]
    values = sum(len(c.judgements) for c in checks)
    worst = max((c.max_abs for c in checks if c.max_abs is not None), default=None)
    out = Text(f"{title}: ", style="title") + Text(
        f"{len(checks)} × {values // max(1, len(checks))} values, max |c−e| "
    )
    out.append(_num_text(worst))
    if off:
        first = off[0]
        label = first.worst.label if first.worst else "?"
        out.append(f"  ✗ {len(off)} off, first: {clean(first.name)} {clean(label)}", style="bad")
    else:
        out.append("  ✓ within tolerance", style="good")
    return out


def _divergence(report: NumericsReport, console: Console) -> None:
    d = report.first_divergence
    assert d is not None
    console.print(Text("First divergence", style="title"))
    what = f"{d.function} call {d.index}" if d.kind == "call" else f"{d.kind} {d.index}"
    line = Text("   value   ", style="muted") + Text(clean(f"{what}: {d.value or '?'}"))
    console.print(line)
    probe = next((p for p in report.probes if p.compile_id == d.compile_id), None)
    if d.stage:
        stage = Text("   stage   ", style="muted") + Text(clean(d.stage), style="bad")
        stage.append(f"  {clean(STAGES.get(d.stage, ''))}", style="muted")
        console.print(stage)
    if probe is not None:
        console.print(Text("   ladder  ", style="muted") + _ladder(probe))
    if d.compile_id:
        console.print(Text("   graph   ", style="muted") + Text(f"compile {clean(d.compile_id)}"))
    if d.node:
        node = Text("   node    ", style="muted") + Text(clean(f"{d.node} = {d.op}"))
        node.append(f"  {location(d.file, d.line)}", style="loc")
        console.print(node)
        if d.code:
            console.print(Text(f"           {clean(d.code)}", style="code"))
        judged = probe.node.judgement if probe and probe.node else None
        if judged is not None:
            console.print(Text("           ", style="muted") + _judged(judged))
    elif probe is not None and probe.node is not None and probe.node.why:
        console.print(Text("   node    ", style="muted") + Text(clean(probe.node.why), style="muted"))
    if d.pass_name:
        text = Text("   pass    ", style="muted") + Text(clean(d.pass_name), style="bad")
        bisect = probe.bisect if probe else None
        if bisect and bisect.subsystem:
            text.append(
                f"  (torch's CompilerBisector: {clean(bisect.backend or '?')} / {clean(bisect.subsystem)}"
                + (f" #{bisect.bisect_number}" if bisect.bisect_number is not None else "")
                + f", {bisect.compiles} compiles)",
                style="muted",
            )
        console.print(text)
    elif probe is not None and probe.bisect is not None and probe.bisect.note:
        console.print(Text("   pass    ", style="muted") + Text(clean(probe.bisect.note), style="muted"))
    if d.custom_pass:
        cp = d.custom_pass
        text = Text("   yours   ", style="muted") + Text(clean(f"{cp.get('config')} = {cp.get('function')}"))
        if cp.get("file"):
            text.append(f"  {location(cp.get('file'), cp.get('line'))}", style="loc")
        console.print(text)
    if d.explanation:
        console.print(Text("   why     ", style="muted") + Text(clean(d.explanation)))
    for other in report.probes:
        if other is not probe and other.error:
            console.print(
                Text(f"   probe of {clean(other.compile_id)} failed: {clean(other.error)}", style="warn")
            )


def _ladder(probe: Probe) -> Text:
    out = Text()
    for stage in probe.stages:
        out.append(clean(stage.backend))
        out.append(" ✓  " if stage.within else " ✗  ", style="good" if stage.within else "bad")
    if probe.error:
        out.append(f"(probe failed: {clean(probe.error)})", style="warn")
    return out


def _judged(j: Judgement) -> Text:
    out = Text(f"max |c−e| {_num_text(j.max_abs)}", style="muted")
    if j.compiled_error is not None:
        out.append(
            f", error against float64 {_num_text(j.compiled_error)} (eager's {_num_text(j.eager_error)}, "
            f"allowed {_num_text(j.allowed_error)})",
            style="muted",
        )
    if j.where:
        w = j.where
        at = f"; at {w.get('index')}: eager {_num_text(w.get('eager'))}"
        out.append(f"{at}, compiled {_num_text(w.get('compiled'))}", style="muted")
    return out


def _remedy(number: int, r: RemedyCheck, console: Console) -> None:
    if r.verified:
        mark = Text("✓ verified  ", style="good")
    elif r.ran:
        mark = Text("✗ not verified  ", style="bad")
    else:
        mark = Text("– not run  ", style="muted")
    console.print(
        Text(f"{number}. ") + mark + Text(f"[{clean(r.cause)}] ", style="muted") + Text(clean(r.change))
    )
    before, after = r.before or {}, r.after
    line = Text("   divergent values ", style="muted") + Text(str(before.get("divergent", "?")))
    if after is not None:
        line.append(
            f" → {after.get('divergent', '?')}", style="good" if not after.get("divergent") else "bad"
        )
    line.append("   max |c−e| ", style="muted")
    line.append(_num_text(before.get("max_abs")))
    if after is not None:
        line.append(f" → {_num_text(after.get('max_abs'))}")
    console.print(line)
    if r.why_not:
        console.print(Text("   why not  ", style="muted") + Text(clean(r.why_not), style="warn"))


def _expected(report: NumericsReport) -> str:
    worst = max((c for c in report.checks if c.max_abs), key=lambda c: c.max_abs or 0.0)
    j = worst.worst
    assert j is not None
    where = f"{clean(worst.name)}, {clean(j.label)}, {clean(j.dtype or '?')}"
    out = f"compiled differs from eager by up to {_num_text(worst.max_abs)} ({where})"
    if j.compiled_error is not None:
        out += (
            f", yet its error against float64 is {_num_text(j.compiled_error)} where eager's is "
            f"{_num_text(j.eager_error)} (allowed {_num_text(j.allowed_error)}): rounding, e.g. reductions "
            "reordered or intermediates kept in float32 — expected, not a fault"
        )
    return out + "."


def _runs(report: NumericsReport) -> str:
    parts = []
    for run in report.runs:
        seconds = f"{run.seconds:.1f} s" if run.seconds is not None else "?"
        status = "" if run.status == "ok" else f", {clean(run.status)}"
        parts.append(f"{clean(run.name)} ({seconds}{status})")
    return "runs: " + ", ".join(parts) if parts else "runs: none recorded"


def _num(value: float | None) -> Text:
    return Text(_num_text(value), style="" if value is not None else "muted")


def _num_text(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"
