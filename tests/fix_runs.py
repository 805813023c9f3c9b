"""What the `tcx fix` tests share: a run of `tcx fix` with torch's own log of each of its runs kept,
and the counts to compare with that log."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import TorchTrace, run_tcx, torch_trace_records


def fix_json(program: Path, logs: Path, *extra: str) -> dict:
    """`tcx fix PROGRAM --format json`, torch's TORCH_TRACE log of each run kept under `logs`."""
    proc = run_tcx(
        "fix", str(program), "--no-save", "--keep-logs", str(logs), "--format", "json", *extra, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def remedy(doc: dict, change: str) -> dict:
    """The one remedy whose change contains `change`."""
    found = [r for r in doc["remedies"] if change in r["change"]]
    assert len(found) == 1, [r["change"] for r in doc["remedies"]]
    return found[0]


def counts(trace: TorchTrace) -> dict[str, int]:
    """Torch's own counts of a run, as tcx fix names them."""
    return {"graph_breaks": trace.graph_breaks, "graphs": trace.graphs, "recompiles": trace.recompiles}


def figures(doc_figures: dict) -> dict[str, int]:
    """The same counts from tcx fix's `before` / `after`."""
    return {k: doc_figures[k] for k in ("graph_breaks", "graphs", "recompiles")}


def recompile_reasons(trace: Path) -> list[str]:
    """The payloads of torch's `recompile_reasons` artifacts: each cache entry's failing guard."""
    return [
        payload
        for name, md, payload in torch_trace_records(trace)
        if name == "artifact" and md["artifact"]["name"] == "recompile_reasons"
    ]
