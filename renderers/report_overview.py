"""The report's overview, one source for every format (terminal, HTML, Markdown): the counts, one
row per compile, the compile total and what it covers, the command that prints a view."""

from __future__ import annotations

import shlex

from tcx.core.views.report import Report
from tcx.renderers.safe import clean

OVERVIEW_COLUMNS = (
    "compile",
    "frame",
    "Dynamo instr/nodes/breaks",
    "AOT fw/bw ops, saved",
    "Inductor kernels/extern",
    "guards",
    "recompiled",
    "compile s",
)
TOP_PROBLEMS = 10


def overview_counts(report: Report) -> list[tuple[str, int]]:
    """The run's counts, as torch counts them (the text, HTML and Markdown overviews print these)."""
    ex = report.explanation
    return [
        ("graphs", ex.graph_count),
        ("compiles", ex.compile_count),
        ("recompiles", ex.recompile_count),
        ("graph breaks", ex.graph_break_count),
        ("distinct breaks", ex.unique_graph_break_count),
        ("failed frames", ex.failed_frame_count),
        ("kernels", sum(row.kernels for row in report.pipeline)),
    ]


def overview_rows(report: Report) -> list[tuple[str, ...]]:
    """One row of OVERVIEW_COLUMNS per compile: each stage's numbers, as every format prints them."""
    rows: list[tuple[str, ...]] = []
    for row in report.pipeline:
        a = row.aot
        if a.forward_ops is None and a.inference_ops is None:
            aot = "-"
        elif a.inference_ops is not None:
            aot = f"{a.inference_ops} inference"
        else:
            aot = f"{a.forward_ops}/{_dash(a.backward_ops)}, {_kib(a.saved_bytes)}"
        time_s = row.compile_time_s
        rows.append(
            (
                clean(row.compile_id),
                clean(row.frame) + (" (failed)" if row.failed else ""),
                f"{_dash(row.instructions)}/{_dash(row.graph_nodes)}/{row.graph_breaks}",
                aot,
                f"{row.kernels}/{row.extern_calls}",
                _dash(row.guards),
                "yes" if row.recompiled else "",
                "-" if time_s is None else f"{time_s:.2f}",
            )
        )
    return rows


def compile_time_text(report: Report) -> str:
    """One compile total and what it covers: the per-compile column's sum (every compilation_metrics
    torch wrote for a compile, a training step's backward compile included), then the phases of the
    frames' own compiles (the first compilation_metrics of each, cumulative: each holds the next)."""
    times = [row.compile_time_s for row in report.pipeline if row.compile_time_s is not None]
    phases = dict(report.compile_time_s)
    frames_total = phases.pop("total", None)
    if times:
        parts = [
            f"compile time {sum(times):.2f} s over {len(times)} compile(s) (the 'compile s' column's sum: "
            "each compile as torch timed it, with its backward's compile where it has one)"
        ]
        if frames_total is not None and abs(frames_total - sum(times)) >= 0.01:
            parts.append(f"the frames' own compiles took {frames_total:.2f} s of it")
    else:
        parts = [f"compile time {frames_total or 0.0:.2f} s (the frames' own compiles)"]
    if phases:
        parts.append("of that, " + ", of which ".join(f"{k} {v:.2f} s" for k, v in phases.items()))
    return "; ".join(parts)


def view_command(name: str, target: str) -> str:
    """The command that prints one view of the run (`explain` for the graph-breaks section)."""
    return f"tcx {name} {shlex.quote(target)}"


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


def _kib(n: int | None) -> str:
    return "-" if n is None else f"{n / 1024:.1f} KiB"
