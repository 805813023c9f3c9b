"""Helpers for the graphs/fusion/codegen tests: record once per module, count torch's own kernels."""

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


def seed_f_view(view: str, rootpath: Path) -> dict:
    """`tcx VIEW seed_f.py:f` trained once with x [128,32], as JSON."""
    proc = run_tcx(
        view,
        f"{rootpath}/fixtures/programs/seed_f.py:f",
        "--call",
        "128x32:grad,32x64:grad,64:grad",
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
