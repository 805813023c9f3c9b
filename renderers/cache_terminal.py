"""`tcx cache` for people: per compile, each cache lookup in each run and why it missed; then
compile time per frame and phase, the top time sinks, and what a fully warm start would cost."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tcx.core.analysis.compile_phases import PHASE_NAMES
from tcx.core.views.cache import CACHE_NAMES, CacheView, Change, Lookup, RunCaches
from tcx.renderers.header import location, short_path, view_header
from tcx.renderers.safe import clean

VALUE_CHARS = 100
STATE_STYLE = {"hit": "good", "miss": "bad", "bypass": "warn"}


def render_cache(view: CacheView, console: Console) -> None:
    view_header("cache", view.model, console, function=view.selection.function, extra=_runs_line(view))
    _caches_note(view, console)
    cids = view.compile_ids()
    if any(run.lookups for run in view.runs):
        console.print(Text("Cache lookups", style="title"))
        for cid in cids:
            _render_lookups(view, cid, console)
        console.print()
    _render_times(view, cids, console)
    _render_summary(view, console)


def _runs_line(view: CacheView) -> str:
    if len(view.runs) == 1:
        return ""
    parts = []
    for run in view.runs:
        env = " ".join(f"{k}={v}" for k, v in run.env.items())
        what = env or (short_path(run.model.target) if run.model.target != view.model.target else "")
        parts.append(f"{run.label} ({what})" if what else run.label)
    return "runs: " + ", ".join(parts)


def _caches_note(view: CacheView, console: Console) -> None:
    for run in view.runs:
        who = f"{run.label}: " if len(view.runs) > 1 else ""
        if run.caches_disabled:
            console.print(
                Text(
                    f"{who}the compile caches were disabled in this run (tcx records with them off to see "
                    "every stage): no lookups to show. `tcx cache PROGRAM` runs it cold, then warm, with "
                    "them on.",
                    style="warn",
                )
            )
        elif not run.lookups and run.times:
            console.print(Text(f"{who}torch logged no FX graph or AOTAutograd cache lookup.", style="muted"))
    for run in view.runs:
        for cache, counts in run.remote().items():
            line = f"remote {CACHE_NAMES[cache]} cache: {counts['hit']} hit(s), {counts['miss']} miss(es)"
            console.print(Text(f"{run.label}: {line}", style="muted"))


def _render_lookups(view: CacheView, cid: str, console: Console) -> None:
    frame = view.frame(cid)
    head = Text(f"{clean(cid)} ", style="title")
    head.append(clean(frame["function"] or "?"), style="bold")
    if frame["file"]:
        head.append("  " + location(frame["file"], frame["line"]), style="loc")
    console.print(head)
    slots: list[tuple[Any, ...]] = []
    for run in view.runs:
        for lk in run.of(cid):
            if lk.slot not in slots:
                slots.append(lk.slot)
    for slot in slots:
        row = Text("  " + f"{_slot_name(slot):<24}")
        for run in view.runs:
            found = next((x for x in run.of(cid) if x.slot == slot), None)
            row.append(f" {run.label} " if len(view.runs) > 1 else " ", style="muted")
            row.append(
                found.state if found else "-", style=STATE_STYLE.get(found.state, "") if found else "muted"
            )
            if found and found.hit and found.time_saved_s:
                row.append(f" (saved {found.time_saved_s:.2f} s)", style="muted")
        console.print(row)
        _render_whys(view, slot, console)
    if not slots:
        console.print(Text("  no cache lookups", style="muted"))


def _slot_name(slot: tuple[Any, ...]) -> str:
    _cid, cache, graph, n = slot
    name = str(CACHE_NAMES.get(cache, cache)) + (f" ({graph})" if graph else "")
    if isinstance(n, str):  # a lookup of an attempt torch restarted
        return f"{name} ({n}, restarted)"
    return name + (f" #{n + 1}" if n else "")


def _render_whys(view: CacheView, slot: tuple[Any, ...], console: Console) -> None:
    """Each run's reason for a lookup that did not hit (identical ones once, naming the runs)."""
    shown: dict[str, list[str]] = {}
    whys: dict[str, tuple[Lookup, RunCaches]] = {}
    for k, run in enumerate(view.runs):
        for lk in run.lookups:
            if lk.slot != slot or lk.hit or lk.why is None:
                continue
            if k == 0 and lk.state == "miss" and len(view.runs) > 1:
                continue  # the cold run's misses are expected
            shown.setdefault(lk.why.summary, []).append(run.label)
            whys.setdefault(lk.why.summary, (lk, run))
    for summary, labels in shown.items():
        lk, _run = whys[summary]
        prefix = f"{', '.join(labels)}: " if len(view.runs) > 1 else ""
        console.print(Text(f"      {prefix}{clean(' '.join(summary.split()))}", style="warn"))
        if lk.not_stored:
            console.print(Text(f"        {clean(lk.not_stored)}", style="muted"))
        for change in lk.why.changes if lk.why else []:
            _render_change(change, console)


def _render_change(c: Change, console: Console) -> None:
    if c.kind == "graph":
        console.print(Text("        graph code:", style="bold"))
        for item in c.diff:
            line = item["line"]
            code = line.split(";  ", 1)[0]  # without the `;  x = None` that frees a value
            row = Text(f"          {clean(code)}", style="bad" if line.startswith("-") else "good")
            user = item.get("user")
            if user:
                row.append(f"   ← {location(user.get('file'), user.get('line'))}", style="loc")
                if user.get("code"):
                    row.append(f"  {clean(user['code'])}", style="muted")
            console.print(row)
        return
    row = Text(f"        {clean(c.kind)}: ", style="muted")
    row.append(clean(c.name), style="bold")
    if c.diff:
        console.print(row)
        for item in c.diff:
            console.print(Text(f"          {clean(item['line'])}"))
        return
    if c.old is not None or c.new is not None:
        row.append(f"  {_value(c.old)} → {_value(c.new)}")
    else:
        row.append("  (not text: its digest differs)", style="muted")
    console.print(row)


def _value(text: str | None) -> str:
    if text is None:
        return "(absent or not text)"
    text = " ".join(text.split())
    return clean(text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…")


def _render_times(view: CacheView, cids: list[str], console: Console) -> None:
    timed = [cid for cid in cids if any(cid in run.times for run in view.runs)]
    if not timed:
        console.print(
            Text("Compile time: torch logged no compilation_metrics for these compiles.", style="muted")
        )
        return
    console.print(Text("Compile time (s)", style="title"))
    table = Table(box=None, padding=(0, 1), header_style="muted")
    table.add_column("compile")
    table.add_column("phase")
    for run in view.runs:
        table.add_column(run.label, justify="right")
    several = len(view.runs) > 1
    if several:
        table.add_column("saved", justify="right")
    for cid in timed:
        frame = view.frame(cid)
        totals = [run.times[cid].seconds if cid in run.times else None for run in view.runs]
        table.add_row(
            Text(clean(f"{cid} {frame['function'] or '?'}"), style="bold"),
            "total",
            *(_num(v) for v in totals),
            *([_saved(totals[0], totals[-1])] if several else []),
        )
        present = {p for run in view.runs if cid in run.times for p in run.times[cid].phases}
        for phase in (*PHASE_NAMES, "other"):
            if phase not in present:
                continue
            values = [run.times[cid].phases.get(phase) if cid in run.times else None for run in view.runs]
            table.add_row(
                "", Text(phase, style="muted"), *(_num(v) for v in values), *([""] if several else [])
            )
    if len(timed) > 1:
        totals = [run.compile_seconds for run in view.runs]
        table.add_row(
            Text("all", style="bold"),
            "total",
            *(_num(v) for v in totals),
            *([_saved(totals[0], totals[-1])] if several else []),
        )
    console.print(table)
    if not any(run.times[cid].phases for run in view.runs for cid in timed if cid in run.times):
        console.print(Text("per-phase times: this input has no chromium_event timers", style="muted"))
    console.print()


def _render_summary(view: CacheView, console: Console) -> None:
    sinks = view.time_sinks()
    if sinks:
        console.print(Text(f"Top time sinks ({view.judged.label})", style="title"))
        for s in sinks:
            row = Text(f"  {s['seconds']:7.2f} s  {s['phase']:<22} ")
            row.append(clean(s["function"] or "?"), style="bold")
            if s["file"]:
                row.append("  " + location(s["file"], s["line"]), style="loc")
            row.append(f"  ({clean(s['compile_id'])})", style="muted")
            console.print(row)
        console.print()
    warm = view.fully_warm_sentence()
    if warm is not None:
        console.print(Text(clean(warm)))
    judged = view.judged
    line = Text(f"{judged.label}: ", style="title")
    line.append(
        f"{view.cache_lookup_count} lookups · {view.cache_hit_count} hit · "
        f"{view.cache_miss_count - view.cache_bypass_count} missed · {view.cache_bypass_count} bypassed"
    )
    if view.abandoned_lookup_count:
        line.append(f" · {view.abandoned_lookup_count} more by restarted attempts, not counted")
    if view.compile_seconds is not None:
        line.append(f" · compile {view.compile_seconds:.2f} s")
    if judged.torch_saved_seconds:
        line.append(f" · torch says its hits saved {judged.torch_saved_seconds:.2f} s")
    if view.saved_seconds is not None:
        line.append(f" · {view.runs[0].label} → {judged.label}: {view.saved_seconds:+.2f} s saved")
    style = (
        "good"
        if view.cache_miss_count == 0 and view.cache_lookup_count
        else "bad"
        if view.cache_miss_count
        else ""
    )
    line.stylize(style, 0, len(judged.label) + 1)
    console.print(line)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _saved(first: float | None, last: float | None) -> Text:
    if first is None or last is None:
        return Text("-", style="muted")
    delta = round(first - last, 3)  # as CacheView.saved_seconds rounds it
    return Text(f"{delta:+.2f}", style="good" if delta > 0 else "bad" if delta < 0 else "muted")
