"""Helpers for the graphs/fusion/codegen tests: count the kernels in torch's own output code."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import torch_trace_records

_KERNEL = re.compile(r"^\w+ = async_compile\.\w+\(", re.M)


def torch_output_codes(trace_dir: Path) -> list[str]:
    """The `inductor_output_code` payloads torch itself wrote to its TORCH_TRACE log."""
    return [payload for name, _, payload in torch_trace_records(trace_dir) if name == "inductor_output_code"]


def torch_kernel_count(trace_dir: Path) -> int:
    return sum(len(_KERNEL.findall(code)) for code in torch_output_codes(trace_dir))
