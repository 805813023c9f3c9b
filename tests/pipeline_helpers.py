"""Helpers for the graphs/fusion/codegen tests: render the session's recordings, count torch's own kernels."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import run_tcx, torch_trace_records

_KERNEL = re.compile(r"^\w+ = async_compile\.\w+\(", re.M)


def torch_output_codes(trace_dir: Path) -> list[str]:
    """The `inductor_output_code` payloads torch itself wrote to its TORCH_TRACE log."""
    return [payload for name, _, payload in torch_trace_records(trace_dir) if name == "inductor_output_code"]


def torch_kernel_count(trace_dir: Path) -> int:
    return sum(len(_KERNEL.findall(code)) for code in torch_output_codes(trace_dir))


def view_of(view: str, recording: Path, *extra: str) -> dict:
    """`tcx VIEW RECORDING --format json`: a view rendered from a saved recording (no run)."""
    proc = run_tcx(view, str(recording), "--format", "json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
