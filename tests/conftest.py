"""Shared helpers: run tcx as a user would (a subprocess), and read torch's own trace log.

Tests that record a real torch.compile run are marked `torch`; they compare tcx's numbers
with what torch itself wrote to its TORCH_TRACE log during the very same run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = REPO / "fixtures" / "programs"
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"


def run_tcx(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """`python -m tcx ARGS` from the repository root; returns the finished process."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "tcx", *args],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass
class TorchTrace:
    """Counts read straight from a TORCH_TRACE log with a deliberately separate, tiny parser."""

    graphs: int = 0
    graph_breaks: int = 0
    break_sites: set = field(default_factory=set)
    compile_ids: set = field(default_factory=set)
    recompiles: int = 0
    failed: set = field(default_factory=set)
    output_code: int = 0
    events: Counter = field(default_factory=Counter)


_LINE = re.compile(r"^[VIWEF]\d{4} [\d:.]+ +\d+ [^\]]*\] (\{.*\})\s*$")


def read_torch_trace(directory: Path) -> TorchTrace:
    logs = sorted(directory.glob("*.log"))
    assert logs, f"torch wrote no TORCH_TRACE log in {directory}"
    out = TorchTrace()
    failed_candidates: set = set()
    current = None
    payload: list[str] = []

    def close() -> None:
        if current and current.get("artifact", {}).get("name") == "dynamo_graph_break_reason":
            text = "".join(payload)
            where = re.search(r"Graph break in user code at (.+):(\d+)", text)
            reason_lines = text.split("Graph Break Reason:", 1)[1].splitlines()
            skip = ("Encountered graph break when attempting", "Failed to handle graph break gracefully")
            reason = next(ln.strip() for ln in reason_lines if ln.strip() and not ln.strip().startswith(skip))
            out.break_sites.add(
                (where.group(1) if where else None, where.group(2) if where else None, reason)
            )

    for line in logs[0].read_text().splitlines():
        if line.startswith("\t"):
            payload.append(line[1:] + "\n")
            continue
        m = _LINE.match(line)
        if not m:
            continue
        close()
        md = json.loads(m.group(1))
        current, payload = md, []
        cid = (md.get("frame_id"), md.get("frame_compile_id"))
        name = next(
            k for k in md if k not in ("frame_id", "frame_compile_id", "attempt", "has_payload", "stack")
        )
        out.events[name] += 1
        if name == "dynamo_start":
            out.compile_ids.add(cid)
        elif name == "dynamo_output_graph":
            out.graphs += 1
        elif name == "inductor_output_code":
            out.output_code += 1
        elif name == "compilation_metrics" and md[name].get("fail_type"):
            failed_candidates.add(cid)
        elif name == "artifact":
            art = md["artifact"]["name"]
            if art == "dynamo_graph_break_reason":
                out.graph_breaks += 1
            elif art == "recompile_reasons":
                out.recompiles += 1
    close()
    out.failed = failed_candidates
    return out


def explain_with_trace(
    target: str, tmp_path: Path, *extra: str
) -> tuple[dict, TorchTrace, subprocess.CompletedProcess]:
    """Run `tcx explain --format json` with TORCH_TRACE set: tcx's view and torch's log of one run."""
    trace_dir = tmp_path / "torch_trace"
    proc = run_tcx("explain", target, "--format", "json", *extra, env={"TORCH_TRACE": str(trace_dir)})
    assert proc.stdout, f"no JSON on stdout; stderr:\n{proc.stderr}"
    return json.loads(proc.stdout), read_torch_trace(trace_dir), proc


@pytest.fixture
def program():
    def path(name: str) -> str:
        return str(PROGRAMS / name)

    return path
