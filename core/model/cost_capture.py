"""What the cost capture of a `tcx cost` run recorded (core/recorder/compat_cost.py), and the
timings of the program's other runs that tcx appended to the recording (`cost_run*`).

Each record is kept as the recorder wrote it (a JSON object of a versioned schema): the one reader
that types them is core/cost/measurements.py; `tcx cost` copies a timed run's calls, spans and
compiles into the recording it saves (cli/cmd_cost.py) through `copied`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

COST_EVENTS = (
    "cost_config",
    "cost_call",
    "cost_span",
    "cost_compile",
    "cost_step_found",
    "cost_eager_call",
    "cost_eager_run",
    "cost_run",
    "cost_run_call",
    "cost_run_span",
    "cost_run_compile",
    "cost_calls_more",
    "cost_profile",
    "cost_device",
)
# Read by a timed run only (`tcx cost` starting one more run): whether it ran on a GPU.
RUN_END = "cost_run_end"


@dataclass(frozen=True)
class CostCapture:
    by_kind: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # COST_EVENTS and RUN_END

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every cost event, kind by kind in COST_EVENTS' order, each kind in recording order."""
        return [e for kind in COST_EVENTS for e in self.by_kind.get(kind, [])]

    @property
    def configured(self) -> bool:
        """Was the cost capture on in this run?"""
        return bool(self.by_kind.get("cost_config"))

    @property
    def on_cuda(self) -> bool:
        """Did the run end on a GPU (what a timed run reports)?"""
        ends = self.by_kind.get(RUN_END)
        return bool(ends and ends[0].get("cuda"))

    def copied(self, kind: str, keys: tuple[str, ...], needs: str | None = None) -> list[dict[str, Any]]:
        """The events of `kind` (those that have `needs`), each cut to `keys` (those it has): what a
        timed run's copy keeps."""
        return [
            {k: e[k] for k in keys if k in e}
            for e in self.by_kind.get(kind, [])
            if needs is None or needs in e
        ]
