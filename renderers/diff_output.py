"""`tcx diff` output: terminal, JSON and Markdown (for a PR comment)."""

from __future__ import annotations

from typing import Literal

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tcx.core.views.cache import CACHE_NAMES
from tcx.core.views.diff import Diff
from tcx.core.views.run_facts import BreakFact
from tcx.renderers.header import location
from tcx.renderers.safe import clean, markdown_text

LABELS = {
    "graph_count": "graphs",
    "graph_break_count": "graph breaks",
    "unique_graph_break_count": "distinct graph breaks",
    "compile_count": "compiles",
    "recompile_count": "recompiles",
    "failed_frame_count": "failed frames",
}


def _site(s: BreakFact) -> str:
    return f"{s.type} at {location(s.file, s.line)}" + (f" ({s.code})" if s.code else "")


def terminal(d: Diff, console: Console) -> None:
    head = Text("tcx diff ", style="title")
    head.append(clean(d.a.target), style="loc")
    head.append("  →  ", style="muted")
    head.append(clean(d.b.target), style="loc")
    console.print(head)
    for item in d.conditions_differ:
        console.print(Text(f"The runs compiled differently: {clean(item)}", style="warn"))
    if d.conditions_differ:
        console.print(Text("Counts below may differ for that reason alone.", style="muted"))
    for item in d.programs_failed:
        console.print(Text(f"{clean(item)}: its counts are of the part that ran", style="bad"))
    table = Table(box=None, padding=(0, 2), header_style="muted")
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("", "left"),
        ("A", "right"),
        ("B", "right"),
        ("Δ", "right"),
    )
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for key, (a, b) in d.counts.items():
        delta = b - a
        style = "bad" if delta > 0 and key != "compile_count" else ("good" if delta < 0 else "muted")
        table.add_row(LABELS[key], str(a), str(b), Text(f"{delta:+d}", style=style))
    for phase, (took_a, took_b) in d.compile_time.items():
        table.add_row(
            f"compile time: {phase} (s)",
            _num(took_a),
            _num(took_b),
            Text(_delta(took_a, took_b), style="muted"),
        )
    for (cache, state), (n_a, n_b) in d.caches.items():
        label = f"{CACHE_NAMES.get(cache, cache)} cache {state}"
        table.add_row(label, str(n_a), str(n_b), Text(f"{n_b - n_a:+d}", style="muted"))
    console.print(table)
    for title, items, style in (
        ("graph breaks added", d.breaks_added, "bad"),
        ("graph breaks removed", d.breaks_removed, "good"),
    ):
        if items:
            console.print(Text(f"{title}:", style=style))
            for s in items:
                console.print(Text(f"  + {clean(_site(s))}" if style == "bad" else f"  - {clean(_site(s))}"))
    for old, new in d.breaks_changed:
        console.print(Text(f"  ~ {clean(_site(new))}: ×{old.occurrences} → ×{new.occurrences}", style="warn"))
    for title, names in (("kernels added", d.kernels_added), ("kernels removed", d.kernels_removed)):
        if names:
            console.print(Text(f"{title}: ", style="muted") + Text(clean(", ".join(names))))
    if any(d.kernels_compared.values()):
        console.print(Text("kernel by kernel: ", style="muted") + Text(kernel_summary(d)))
        for title, key in (("differ", "differ"), ("only in A", "only_in_a"), ("only in B", "only_in_b")):
            for label in d.kernels_compared.get(key, []):
                console.print(Text(f"  {title}: {clean(label)}", style="warn"))
    if d.regressions:
        console.print(Text("regressions: " + "; ".join(d.regressions), style="bad"))
    else:
        console.print(Text("no regressions", style="good"))


def markdown(d: Diff) -> str:
    esc = markdown_text
    lines = [
        f"### tcx diff: {esc(d.a.target)} → {esc(d.b.target)}",
        "",
        *[f"> **The runs compiled differently:** {esc(item)}" for item in d.conditions_differ],
        *(["> Counts below may differ for that reason alone.", ""] if d.conditions_differ else []),
        *[f"> **{esc(item)}**: its counts are of the part that ran" for item in d.programs_failed],
        *([""] if d.programs_failed else []),
        "| | A | B | Δ |",
        "|---|---:|---:|---:|",
    ]
    for key, (a, b) in d.counts.items():
        lines.append(f"| {LABELS[key]} | {a} | {b} | {b - a:+d} |")
    for phase, (took_a, took_b) in d.compile_time.items():
        lines.append(
            f"| compile time: {phase} (s) | {_num(took_a)} | {_num(took_b)} | {_delta(took_a, took_b)} |"
        )
    for (cache, state), (n_a, n_b) in d.caches.items():
        lines.append(f"| {CACHE_NAMES.get(cache, cache)} cache {state} | {n_a} | {n_b} | {n_b - n_a:+d} |")
    lines.append("")
    for title, items in (("Graph breaks added", d.breaks_added), ("Graph breaks removed", d.breaks_removed)):
        if items:
            lines.append(f"**{title}**")
            lines += [f"- {esc(_site(s))}" for s in items]
            lines.append("")
    if d.kernels_added or d.kernels_removed:
        lines.append(
            f"Kernels added: {esc(', '.join(d.kernels_added)) or 'none'}; "
            f"removed: {esc(', '.join(d.kernels_removed)) or 'none'}"
        )
        lines.append("")
    if any(d.kernels_compared.values()):
        lines += [f"Kernel by kernel: {esc(kernel_summary(d))}", ""]
    lines.append(
        "**Regressions:** " + ("; ".join(esc(r) for r in d.regressions) if d.regressions else "none")
    )
    return "\n".join(lines) + "\n"


def kernel_summary(d: Diff) -> str:
    """How many kernels are identical, differ or were generated by one run only."""
    k = d.kernels_compared
    parts = [f"{len(k.get('identical', []))} identical", f"{len(k.get('differ', []))} differ"]
    parts += [
        f"{len(k[key])} {label}"
        for key, label in (
            ("not_compared", "not compared (no source in the facts)"),
            ("only_in_a", "only in A"),
            ("only_in_b", "only in B"),
        )
        if k.get(key)
    ]
    return ", ".join(parts)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _delta(a: float | None, b: float | None) -> str:
    return "" if a is None or b is None else f"{b - a:+.2f}"
