"""The comparable facts of one run: what `tcx diff` and CI baselines compare.

Built from a RunModel (live, saved or a TORCH_TRACE log) as typed facts (`RunFacts`); a baseline
file committed to a repository is their JSON (`to_json`), read back into the same types
(`RunFacts.from_json`, which says what is wrong with a file it cannot read) so a later run can be
compared without the first one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from tcx import __version__
from tcx.core.analysis.kernel_compare import KernelFact, kernel_facts
from tcx.core.budgets import COUNT_KEYS
from tcx.core.errors import InputError
from tcx.core.ingest.event_schema import decode_json, seconds
from tcx.core.model import RunModel
from tcx.core.model.conditions import RunConditions, conditions_from_json
from tcx.core.selection import Selection, whole_run
from tcx.core.views.cache import cache_counts
from tcx.core.views.envelope import SOURCE_KINDS
from tcx.core.views.explain import BreakSite, Explanation, explain

SCHEMA = "tcx.facts/1"
BASELINE_SCHEMA = "tcx.baseline/1"  # the facts as `tcx check --write-baseline` writes them
# Where a higher number is worse (a regression); compile_count follows graphs/recompiles.
WORSE_WHEN_HIGHER = (
    "graph_count",
    "graph_break_count",
    "unique_graph_break_count",
    "recompile_count",
    "failed_frame_count",
)
# Cumulative compile time per phase (each includes the ones below it), from compilation_metrics.
PHASES = {
    "entire_frame_compile_time_s": "total",
    "backend_compile_time_s": "backend",
    "inductor_compile_time_s": "inductor",
    "code_gen_time_s": "code_gen",
}
# What each side says about its input, echoed as written (older baseline files may lack some).
SIDE_KEYS = ("torch_version", "target", "source_kind", "backend", "device", "selection")


@dataclass(frozen=True)
class BreakFact:
    """One distinct graph break of a run, as a later run's break is matched against it."""

    type: str
    gb_id: str | None
    file: str | None
    line: int | None
    function: str | None
    code: str
    occurrences: int

    def key(self, with_file: bool = True) -> tuple[Any, ...]:
        """Match a break across two runs by what the line says, so edits that shift lines do not."""
        name = os.path.basename(self.file or "") if with_file else None
        return (self.type, name, self.function, self.code or self.line)

    @property
    def text(self) -> str:
        return f"{self.type} at {self.file}:{self.line}"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "gb_id": self.gb_id,
            "file": self.file,
            "line": self.line,
            "function": self.function,
            "code": self.code,
            "occurrences": self.occurrences,
        }


@dataclass
class RunFacts:
    """The facts of the selected compiles of one run."""

    side: dict[str, Any]  # SIDE_KEYS: what the run was (echoed as written, never compared by key)
    conditions: RunConditions
    counts: dict[str, int]
    graph_breaks: list[BreakFact]
    recompile_reasons: list[str]
    kernels: list[KernelFact]
    compile_time_s: dict[str, float]
    caches: dict[str, dict[str, int]] = field(default_factory=dict)  # cache -> state -> lookups
    # how the program ended ("ok", "exception", ...; "not recorded" for a log or an older baseline)
    # and, when it failed, with what (an exception type, a signal)
    ended: str = "not recorded"
    failure: str | None = None
    schema: str = SCHEMA
    tcx_version: str = __version__

    @property
    def target(self) -> str:
        return str(self.side.get("target") or "?")

    @property
    def failed(self) -> bool:
        """The program did not finish, so its counts are of the part that ran."""
        return self.ended not in ("ok", "not recorded")

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "tcx_version": self.tcx_version,
            **self.side,
            "counts": dict(self.counts),
            "graph_breaks": [b.to_json() for b in self.graph_breaks],
            "recompile_reasons": list(self.recompile_reasons),
            "kernels": [k.to_json() for k in self.kernels],
            "compile_time_s": dict(self.compile_time_s),
            "caches": {c: dict(s) for c, s in self.caches.items()},
            "program": {"status": self.ended, "failure": self.failure},
        }

    @classmethod
    def from_json(cls, doc: Any, origin: str) -> RunFacts:
        """A facts document (a baseline file) read back into the types; InputError names what is wrong."""
        if not isinstance(doc, dict):
            raise InputError(f"{origin}: the facts are not a JSON object.")
        program: dict[str, Any] = doc["program"] if isinstance(doc.get("program"), dict) else {}
        try:
            return cls(
                side={k: doc.get(k) for k in SIDE_KEYS},
                conditions=conditions_from_json(doc.get("backend")),
                counts={k: _count(doc.get("counts", {}).get(k, 0), f"counts.{k}") for k in COUNT_KEYS},
                graph_breaks=[_break(b) for b in _list(doc.get("graph_breaks"), "graph_breaks")],
                recompile_reasons=[
                    str(r) for r in _list(doc.get("recompile_reasons") or [], "recompile_reasons")
                ],
                kernels=[KernelFact.from_json(k) for k in _list(doc.get("kernels") or [], "kernels")],
                compile_time_s=_times(doc.get("compile_time_s") or {}),
                caches={
                    str(c): {str(s): _count(n, f"caches.{c}.{s}") for s, n in states.items()}
                    for c, states in (doc.get("caches") or {}).items()
                    if isinstance(states, dict)
                },
                ended=str(program.get("status") or "not recorded"),
                failure=None if program.get("failure") is None else str(program["failure"]),
                schema=str(doc.get("schema") or SCHEMA),
                tcx_version=str(doc.get("tcx_version") or "?"),
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise InputError(f"{origin}: the facts are malformed ({exc}).") from None


def baseline_file(path: str) -> RunFacts | None:
    """A baseline file read as facts (a side of `tcx diff`); None when `path` is not a JSON file
    that says it is one (recordings and logs are read as runs)."""
    from pathlib import Path

    file = Path(path)
    try:
        if file.suffix != ".json" or not file.is_file():
            return None
    except (OSError, ValueError):  # a name the OS refuses: TARGET resolution says so
        return None
    try:
        doc = decode_json(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a 100,000-deep document too (decode_json: ValueError)
        return None
    if not isinstance(doc, dict) or doc.get("schema") not in (SCHEMA, BASELINE_SCHEMA):
        return None
    return RunFacts.from_json(doc, f"baseline {path!r}")


def _list(value: Any, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{key!r} is not a list")
    return value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# A count in a baseline is a whole number a run can reach: from 0 to int64's largest.
MAX_COUNT = 2**63 - 1


def _count(value: Any, key: str) -> int:
    if not _number(value) or not (0 <= value <= MAX_COUNT) or value != int(value):
        raise ValueError(f"{key} is not a count (a whole number from 0 to 2**63 - 1): {str(value)[:40]}")
    return int(value)


def _times(value: Any) -> dict[str, float]:
    """Seconds per compile phase; a value that is no time (NaN, negative, 400 digits) is left out,
    as a log's compile time that is no time is unknown (event_schema.seconds)."""
    if not isinstance(value, dict):
        raise ValueError("'compile_time_s' is not an object")
    times = {str(k): seconds(v) for k, v in value.items()}
    return {k: v for k, v in times.items() if v is not None}


def _break(b: Any) -> BreakFact:
    if not isinstance(b, dict) or not isinstance(b.get("type"), str):
        raise ValueError(f"a graph break without a type: {b!r:.80}")
    line = b.get("line")
    return BreakFact(
        type=b["type"],
        gb_id=None if b.get("gb_id") is None else str(b["gb_id"]),
        file=None if b.get("file") is None else str(b["file"]),
        line=line if isinstance(line, int) and not isinstance(line, bool) else None,
        function=None if b.get("function") is None else str(b["function"]),
        code=str(b.get("code") or ""),
        occurrences=_count(b.get("occurrences", 1), "graph_breaks[].occurrences"),
    )


def run_facts(
    model: RunModel, selection: Selection | None = None, *, ex: Explanation | None = None
) -> RunFacts:
    """The facts of the selected compiles (`ex`, when given, must be built on `selection`)."""
    selection = selection or whole_run(model)
    ex = ex or explain(model, selection)
    return RunFacts(
        side={
            "torch_version": model.torch_version,
            "target": model.target,
            "source_kind": SOURCE_KINDS.get(model.source_kind, model.source_kind),
            "backend": model.status.conditions.to_json(),
            "device": model.status.device(selection),
            "selection": selection.to_json(),
        },
        conditions=model.status.conditions,
        counts={k: getattr(ex, k) for k in COUNT_KEYS},
        graph_breaks=[_site(s) for s in ex.sites],
        recompile_reasons=_recompile_reasons(model, selection),
        kernels=kernel_facts(model, selection),
        compile_time_s=phase_totals(model, selection),
        caches=cache_counts(model, selection),
        ended=model.status.program.status,
        failure=model.status.program.exc_type or model.status.program.signal,
    )


def to_json(facts: RunFacts) -> dict[str, Any]:
    return facts.to_json()


def _site(s: BreakSite) -> BreakFact:
    return BreakFact(
        type=s.gb_type,
        gb_id=s.gb_id,
        file=s.file,
        line=s.line,
        function=s.function,
        code=s.user_stack[-1].code if s.user_stack else "",
        occurrences=len(s.occurrences),
    )


def _recompile_reasons(model: RunModel, selection: Selection) -> list[str]:
    if selection.whole_run:
        return list(model.recompile_reasons)
    return [
        c.recompile_reason
        for c in model.compiles.values()
        if selection.includes(c.compile_id) and c.recompile_reason
    ]


def phase_totals(model: RunModel, selection: Selection) -> dict[str, float]:
    """Seconds of compile time per phase over the selected compiles (torch's compilation_metrics)."""
    totals: dict[str, float] = {}
    for comp in model.compiles.values():
        if not selection.includes(comp.compile_id):
            continue
        metrics = comp.metrics
        for key, phase in PHASES.items():
            value = seconds(metrics.get(key), 1e-6 if key.endswith("_us") else 1.0)
            if value is not None:
                totals[phase] = round(totals.get(phase, 0.0) + value, 4)
    return totals
