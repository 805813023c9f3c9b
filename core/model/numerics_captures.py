"""What a `tcx numerics` run recorded: the capture's configuration (what it could not apply), each
localization probe, and the report the parent writes into the compiled run's recording after all
its runs (core/numerics/report.py reads that document back; the numerics stage sits above the model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class NumericsCaptures:
    problems: list[str] = field(default_factory=list)  # `feature: why` for each feature not applied
    probes: list[dict[str, Any]] = field(default_factory=list)  # numerics_probe events, in order
    report: dict[str, Any] | None = None  # the numerics_report document


def read_numerics(
    config: dict[str, Any] | None, probes: list[dict[str, Any]], report: dict[str, Any] | None
) -> NumericsCaptures:
    features = (config or {}).get("features") or {}
    return NumericsCaptures(
        problems=[f"{k}: {v}" for k, v in features.items() if v], probes=list(probes), report=report
    )
