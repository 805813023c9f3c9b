"""Helpers for the graphs/fusion/codegen tests: record once per module, count torch's own kernels."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import _LINE

_KERNEL = re.compile(r"^\w+ = async_compile\.\w+\(", re.M)


def torch_output_codes(trace_dir: Path) -> list[str]:
    """The `inductor_output_code` payloads torch itself wrote to its TORCH_TRACE log."""
    out: list[str] = []
    for log in sorted(trace_dir.glob("*.log")):
        current, payload = None, []
        for line in [*log.read_text().splitlines(), ""]:
            if line.startswith("\t"):
                payload.append(line[1:])
                continue
            if current is not None:
                out.append("\n".join(payload))
                current = None
            m = _LINE.match(line)
            if m and "inductor_output_code" in json.loads(m.group(1)):
                current, payload = True, []
    return out


def torch_kernel_count(trace_dir: Path) -> int:
    return sum(len(_KERNEL.findall(code)) for code in torch_output_codes(trace_dir))
