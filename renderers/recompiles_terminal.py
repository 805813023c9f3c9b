"""`tcx recompiles` for people: the call timeline, each frame's cache entries, causes and remedies."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from tcx.core.model.call_records import Call, FailedGuard
from tcx.core.model.failure import failure
from tcx.core.views.recompiles import Entry, RecompileReport, WhatIf
from tcx.renderers.code_block import Wrapped
from tcx.renderers.failure import render_failure, render_failure_notice
from tcx.renderers.guard_text import dotted
from tcx.renderers.header import view_header
from tcx.renderers.safe import clean

OUTCOME_STYLE = {"compile": "warn", "hit": "good", "recompile": "bad", "eager": "bad"}


ENTRY_LINES = 8  # guard lines per cache entry unless --all


def render_recompiles(rep: RecompileReport, console: Console, *, full: bool = False) -> None:
    _header(rep, console)
    failed = failure(rep.model)
    if failed and rep.model.compiles:
        render_failure_notice(failed, console)
    for call in [c for c in rep.eager_calls if c.cause == "recompile limit"][:1]:
        _shout_limit(rep, call, console)
    _timeline(rep, console)
    _entries(rep, console, full)
    _promotions(rep, console)
    _causes(rep, console)
    if rep.what_ifs:
        _what_ifs(rep.what_ifs, console)
    if failed:
        console.print()
        render_failure(failed, console)


def _header(rep: RecompileReport, console: Console) -> None:
    view_header("recompiles", rep.model, console, function=rep.selection.function)
    counts = Text()
    outcomes = rep.outcomes
    counts.append("recompiles ", style="muted")
    counts.append(str(rep.recompile_count), style="bad" if rep.recompile_count else "count")
    if rep.live:
        counts.append(f"  calls {rep.call_count}", style="muted")
        for k in ("compile", "hit", "recompile", "eager"):
            counts.append(f"  {k} ", style="muted")
            counts.append(
                str(outcomes[k]), style=OUTCOME_STYLE[k] if outcomes[k] and k != "compile" else "count"
            )
    console.print(counts)
    if not rep.live:
        console.print(Text(f"note: {rep.model.source_kind}: {rep.note or _live_note()}", style="warn"))
    for name, why in rep.model.status.features.unavailable().items():
        console.print(Text(f"note: {clean(name)}: {clean(why)}", style="warn"))
    console.print()


def _live_note() -> str:
    from tcx.core.views.recompiles import LIVE_ONLY_NOTE

    return LIVE_ONLY_NOTE


def _shout_limit(rep: RecompileReport, call: Call, console: Console) -> None:
    cfg = call.limit or rep.limit
    text = Text(
        f"RECOMPILE LIMIT HIT: {call.function} runs in EAGER Python from call #{call.index} on "
        f"({cfg.get('config') or 'torch._dynamo.config.recompile_limit'} = {cfg.get('limit')}). "
        "Nothing is compiled for it any more, and torch does not say so at runtime.",
        style="bad",
    )
    console.print(text)
    console.print()


def _runs_of_hits(calls: list[Call]) -> list[tuple[Any, ...]]:
    """Consecutive hits of the same function, signature and entry collapse into one row."""
    rows: list[list[Any]] = []
    for call in calls:
        last = rows[-1][0] if rows else None
        same = (
            last is not None
            and call.outcome == "hit" == last.outcome
            and (call.function, call.entry, _args_text(call)) == (last.function, last.entry, _args_text(last))
            and call.index == last.index + rows[-1][1]
        )
        if same:
            rows[-1][1] += 1
        else:
            rows.append([call, 1])
    return [(c, n) for c, n in rows]


def _args_text(call: Call) -> str:
    if call.args is None:
        return "(arguments not recorded)" if not call.from_trace else ""
    return ", ".join(_arg_text(a) for a in call.args)


def _arg_text(a: dict[str, Any]) -> str:
    kind = a.get("kind")
    name = a.get("name", "?")
    if kind == "tensor":
        dtype = {
            "float32": "f32",
            "float64": "f64",
            "float16": "f16",
            "bfloat16": "bf16",
            "int64": "i64",
        }.get(a.get("dtype", ""), a.get("dtype", ""))
        dev = "" if a.get("device") == "cpu" else f"@{a.get('device')}"
        grad = " grad" if a.get("requires_grad") else ""
        return f"{name}={dtype}[{','.join(map(str, a.get('shape', [])))}]{dev}{grad}"
    if kind == "value":
        return f"{name}={a.get('value')}"
    if kind in ("tuple", "list"):
        return f"{name}=({', '.join(_arg_text(i) for i in a.get('items', []))})"
    return f"{name}=<{a.get('type')}>"


def _guard_text(g: FailedGuard) -> str:
    text = f"{g.entry}: {dotted(g.guard)}"
    if g.kind in ("dynamic_shape", "global", "closure", "attribute", "value", "int") and g.actual is not None:
        text += f"   (actual {g.actual})"
    return text


def _timeline(rep: RecompileReport, console: Console) -> None:
    if not rep.calls:
        console.print(Text("No compiled frame was called.", style="muted"))
        return
    label = "Calls, in order" if rep.live else "Compiles, in order (from the trace)"
    console.print(Text(label, style="title"))
    table = Table.grid(padding=(0, 2))
    table.add_column(justify="right", style="muted", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column()
    # Past the first calls only recompiles are listed: in the whole run a gap in the indexes is
    # that many hits; with a selection it also holds other frames' calls, so only the total is known.
    gaps_are_hits = rep.selection.whole_run
    next_index = rep.calls[0].index if rep.calls else 0
    for call, repeats in _runs_of_hits(rep.calls):
        if call.index > next_index and gaps_are_hits:
            gap = call.index - next_index
            table.add_row(
                f"#{next_index}–#{call.index - 1}",
                Text(f"hit ×{gap}", style="muted"),
                Text("cache hits, counted, not listed", style="muted"),
            )
        next_index = call.index + repeats
        outcome = Text(
            call.outcome.upper() if call.outcome == "eager" else call.outcome,
            style=OUTCOME_STYLE[call.outcome],
        )
        if repeats > 1:
            outcome.append(f" ×{repeats}", style="muted")
        detail = Text()
        detail.append(clean(call.wraps or call.function), style="title")
        args = _args_text(call)
        if args:
            detail.append(f"({clean(args)})", style="muted")
        if call.wraps:
            detail.append(f" (Dynamo's frame {clean(call.function)})", style="muted")
        if call.outcome == "hit":
            detail.append(f"  served by entry {call.entry}", style="good")
        elif call.outcome == "compile":
            detail.append(f"  new entry {call.entry}")
        elif call.outcome == "recompile":
            detail.append(f"  new entry {call.entry}")
            if call.cause:
                detail.append(f"  — {call.cause}", style="warn")
        elif call.outcome == "eager" and call.cause != "recompile limit":
            detail.append(f"  {call.cause}", style="bad")
        elif call.outcome == "eager":
            cfg = call.limit or rep.limit
            detail.append(
                f"  no entry matched and Dynamo will not compile: recompile limit "
                f"{cfg.get('config')} = {cfg.get('limit')}",
                style="bad",
            )
        for g in call.failed_guards:
            detail.append("\n  ✗ ", style="bad")
            detail.append(clean(_guard_text(g)))
        index = f"#{call.index}" if repeats == 1 else f"#{call.index}–#{call.index + repeats - 1}"
        table.add_row(index, outcome, Wrapped(detail, prose=True))
    console.print(Padding(table, (0, 0, 0, 1)))
    floor = "" if rep.dropped_exact else "at least "
    if gaps_are_hits and len(rep.calls) + rep.dropped > next_index:
        more = len(rep.calls) + rep.dropped - next_index
        console.print(
            Text(f"  #{next_index}… {floor}{more} more cache hits, counted, not listed", style="muted")
        )
    elif not gaps_are_hits and rep.dropped:
        console.print(
            Text(f"  and {floor}{rep.dropped} cache hits of these frames, counted, not listed", style="muted")
        )
    console.print()


def _entries(rep: RecompileReport, console: Console, full: bool) -> None:
    shown = {fn: es for fn, es in rep.entries.items() if len(es) > 1 or any(e.served for e in es)}
    if not shown:
        return
    console.print(Text("Cache entries (state machine: entry → its guards → calls it served)", style="title"))
    for fn, entries in shown.items():
        console.print(Text(f"  {clean(fn)}", style="title"))
        for e in entries:
            _entry(e, console, full)
    console.print()


def _entry(e: Entry, console: Console, full: bool) -> None:
    head = Text(f"    [{clean(e.compile_id)}]", style="count")
    if e.created_by is not None:
        head.append(f" created by call #{e.created_by}", style="muted")
    served = [i for i in e.served if i != e.created_by]
    if served:
        head.append(f" · served {_ranges(served)}", style="good")
    if e.hits_not_listed:
        head.append(
            f" · {'and ' if served else ''}{e.hits_not_listed} hits counted, not listed", style="good"
        )
    elif not served and e.created_by is not None and e.hits_not_listed == 0:
        head.append(" · never hit again", style="muted")
    console.print(head)
    # module paths dotted (`self.h.0.weight`); --all prints every line as torch wrote it
    show = (lambda text: text) if full else dotted
    lines = [show(line) for line in e.summary()]
    if e.differs_from:
        # what differs, one line each; the rest is the same as there: counted, listed with --all
        differences = [show(d) for d in e.differences]
        differs = f"        differs from [{clean(e.differs_from)}]"
        if len(differences) == 1:
            console.print(Wrapped(Text(f"{differs}: {clean(differences[0])}", style="warn"), hang=10))
        elif differences:
            console.print(Text(f"{differs}:", style="warn"))
            for d in differences:
                console.print(Wrapped(Text(f"          {clean(d)}", style="warn"), hang=12))
        else:
            console.print(
                Wrapped(Text(f"{differs} in none of the guards listed here", style="warn"), hang=10)
            )
        if not full:
            same = [line for line in lines if not any(line in d for d in differences)]
            if same:
                console.print(
                    Text(
                        f"        and {len(same)} guard line{'s' if len(same) != 1 else ''} as in "
                        f"[{clean(e.differs_from)}] (--all shows every line)",
                        "muted",
                    )
                )
            return
    for line in lines if full else lines[:ENTRY_LINES]:
        console.print(Wrapped(Text(f"        {clean(line)}", style="muted"), hang=10))
    if not full and len(lines) > ENTRY_LINES:
        more = len(lines) - ENTRY_LINES
        console.print(
            Text(
                f"        … {more} more guard line{'s' if more != 1 else ''} (--all shows every line)",
                "muted",
            )
        )


def _ranges(idx: list[int]) -> str:
    if len(idx) > 6:
        return f"calls #{idx[0]}…#{idx[-1]} ({len(idx)} calls)"
    return "call" + ("s " if len(idx) > 1 else " ") + ", ".join(f"#{i}" for i in idx)


def _promotions(rep: RecompileReport, console: Console) -> None:
    proms = rep.promotions
    if not proms:
        return
    console.print(Text("Dynamic-shape promotion", style="title"))
    for p in proms:
        t = Text(f"  {clean(p.compile_id)}: ")
        t.append(f"{clean(p.arg)} dim {p.dim}", style="title")
        t.append(f" became symbolic {p.symbol} (range {clean(p.range)}, value {p.value} on this call)")
        console.print(Wrapped(t, prose=True, hang=6))
        if p.replaced:
            console.print(Text(f"      replaced static guard  {clean(p.replaced)}", style="muted"))
        for g in p.guards:
            where = f"   # line {g.get('line')}: {g.get('code')}" if g.get("line") else ""
            guard = Text(f"      guard  {clean(g.get('expr'))}{clean(where)}", style="muted")
            console.print(Wrapped(guard, hang=13))
    console.print()


def _causes(rep: RecompileReport, console: Console) -> None:
    seen: dict[tuple[Any, ...], Call] = {}
    for c in rep.calls:
        if c.remedy and c.outcome in ("recompile", "eager"):
            key = (c.function, c.cause, c.remedy)
            seen.setdefault(key, c)
    if not seen:
        return
    console.print(Text("Why, and what to change", style="title"))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="muted", justify="right", no_wrap=True)
    grid.add_column()
    for (fn, cause, remedy), c in seen.items():
        n = sum(1 for x in rep.calls if (x.function, x.cause, x.remedy) == (fn, cause, remedy))
        cause_text = Text(clean(f"{cause} in {fn} (×{n}, first at call #{c.index})"), style="warn")
        grid.add_row("cause", Wrapped(cause_text, prose=True))
        grid.add_row("fix", Wrapped(Text(clean(remedy), style="good"), prose=True))
    console.print(Padding(grid, (0, 0, 0, 1)))
    console.print()


def _what_ifs(items: list[WhatIf], console: Console) -> None:
    console.print(
        Text(
            "What if (evaluated with torch's guards on the recorded entries; nothing recompiled)",
            style="title",
        )
    )
    for w in items:
        t = Text(f"  --what-if #{w.index} ")
        if w.args:
            t.append(clean(", ".join(_arg_text(a) for a in w.args)), style="muted")
        console.print(t)
        if w.error:
            console.print(Text(f"      cannot answer: {clean(w.error)}", style="warn"))
            continue
        for g in w.failed_guards:
            console.print(Wrapped(Text(f"      ✗ {clean(_guard_text(g))}", style="muted"), hang=8))
        if w.verdict == "hit":
            console.print(Text(f"      → served by entry {w.entry}, no recompile", style="good"))
        elif w.verdict == "eager":
            console.print(
                Text("      → no entry matches and the recompile limit is reached: runs EAGER", style="bad")
            )
        else:
            first = w.failed_guards[0] if w.failed_guards else None
            why = f" ({first.kind} guard failed first)" if first else ""
            console.print(Text(f"      → would RECOMPILE{why}", style="bad"))
