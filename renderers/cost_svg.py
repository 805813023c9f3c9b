"""`tcx cost` in `tcx report`'s HTML: where a step's time goes as an inline SVG chart (no script, nothing
fetched, every text escaped), and the per-step findings ranked by measured cost."""

from __future__ import annotations

import html

from tcx.core.cost.measurements import Cost, StepCost, totals_by_part
from tcx.core.cost.profile import PARTS
from tcx.renderers.header import location
from tcx.renderers.safe import clean

COLORS = {
    "kernel": "#3a9d5d",
    "extern": "#2f7fb5",
    "graph_op": "#6aa9d6",
    "eager": "#d9534f",
    "guards": "#e0a526",
    "autograd": "#a05fb5",
    "optimizer": "#4a5fc1",
    "between": "#c8c8c8",
    "other": "#9a9a9a",
}
WIDTH, BAR_H, ROWS = 720, 18, 12


def cost_section_html(cost: Cost) -> str:
    """The report's "Cost per step" section."""
    s = cost.primary
    if s is None or not s.breakdown:
        why = cost.unavailable or "; ".join(cost.warnings) or "no step was profiled"
        return f'<section id="cost"><h2>Cost per step</h2><p>{_e(why)}</p></section>'
    g = s.group
    head = f"{g.function}, {g.label}: "
    head += (
        f"{g.time.value:.{g.time.decimals}f} ms per step ({g.time.low:.{g.time.decimals}f}–"
        f"{g.time.high:.{g.time.decimals}f}, {g.time.count} steps)"
        if g.time is not None and g.time_shown
        else f"step time not shown: {g.time_note}"
    )
    if g.speedup is not None and g.speedup_shown:
        head += f", speedup {g.speedup.value:.2f}× ({g.speedup.low:.2f}–{g.speedup.high:.2f}×)"
    findings = "".join(
        f"<li><b>{_e(x.title)}</b> {x.ms_per_step or 0:.3g} ms/step"
        + (f" ({x.share:.0%})" if x.share is not None else "")
        + f" at <code>{_e(location(x.file, x.line))}</code>"
        + (f"<br><small>{_e(x.remedy)}</small>" if x.remedy else "")
        + "</li>"
        for x in cost.per_step[:10]
    )
    return (
        f'<section id="cost"><h2>Cost per step</h2><p>{_e(head)}</p>{chart_svg(s)}'
        f"<h3>What to fix first</h3><ol>{findings or '<li>nothing measurable</li>'}</ol></section>"
    )


def chart_svg(s: StepCost) -> str:
    """One stacked bar of the parts, then the largest rows of the breakdown, each to scale."""
    totals = totals_by_part(s)
    whole = sum(totals.values()) or 1.0
    rows = s.breakdown[:ROWS]
    height = 40 + 22 + len(rows) * (BAR_H + 6) + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" role="img" '
        f'aria-label="where a step of {_e(s.group.function)} spends its time" style="font:12px sans-serif">'
    ]
    x = 0.0
    for part in PARTS:
        ms = totals.get(part, 0.0)
        if ms <= 0:
            continue
        w = ms / whole * WIDTH
        out.append(
            f'<rect x="{x:.1f}" y="4" width="{w:.1f}" height="{BAR_H}" fill="{COLORS[part]}">'
            f"<title>{_e(part)}: {ms:.3f} ms ({ms / whole:.1%})</title></rect>"
        )
        x += w
    legend_x = 0
    for part in PARTS:
        if totals.get(part, 0.0) <= 0:
            continue
        out.append(f'<rect x="{legend_x}" y="28" width="10" height="10" fill="{COLORS[part]}"/>')
        label = f"{part} {totals[part] / whole:.0%}"
        out.append(f'<text x="{legend_x + 14}" y="37">{_e(label)}</text>')
        legend_x += 14 + 8 * len(label) + 12
    top = max((r.ms_per_step for r in rows), default=1.0) or 1.0
    for i, row in enumerate(rows):
        y = 62 + i * (BAR_H + 6)
        w = row.ms_per_step / top * (WIDTH * 0.45)
        out.append(
            f'<rect x="0" y="{y}" width="{w:.1f}" height="{BAR_H}" fill="{COLORS.get(row.part, "#999")}"/>'
        )
        label = f"{row.ms_per_step:.3g} ms  {row.part} {row.phase} {row.compile_id or ''} {row.name}"
        out.append(f'<text x="{w + 6:.1f}" y="{y + 13}">{_e(label[:110])}</text>')
    out.append("</svg>")
    return "".join(out)


def _e(text: object) -> str:
    return html.escape(clean(text), quote=True)
