"""A hung multi-rank job (`tcx record`, stopped by its timeout or a signal): where each rank was."""

from __future__ import annotations

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from tcx.core.views.ranks import HangReport
from tcx.renderers.safe import clean


def render_hang(report: HangReport, console: Console) -> None:
    console.print(Text(clean(report.summary), style="bad"))
    for r in report.last_events:
        line = Text(f"   rank {r.rank}: ", style="count")
        line.append(clean(r.description))
        line.append(f"  ({r.events} events logged)", style="muted")
        console.print(line)
    if report.divergence is not None:
        console.print(
            Padding(
                Text(
                    f"First divergence: compile {clean(report.divergence.compile_id)}: "
                    f"{clean(report.divergence.cause)}",
                    style="warn",
                ),
                (0, 0, 0, 3),
            )
        )
    console.print()
