"""Why Dynamo traced a frame again (a restart): torch's own reason, per abandoned attempt.

A restart throws an attempt away and traces the same compile id again (`attempt` 1, 2, ...):
its graph, cache lookups and symbols were logged and then discarded. torch records why in the
compile's `compilation_metrics.restart_reasons` (the exception's `restart_reason`, or its class
when it has none), and the attempt itself shows what caused it:

- TensorifyScalarRestartAnalysis: Inductor's `_tensorify_python_scalars` pass could not turn a
  symbolic Python float into a tensor, so torch specializes the float and traces again. The
  floats are the float symbols (`create_symbol`) the attempt made that the next attempt
  specialized (`symbolic_shape_specialization`);
- a speculation restart (the reason is a graph-break text): Dynamo traces again to compile the
  part before the break; the attempt's graph-break record names it;
- any other restart: torch's reason as it wrote it.

Pure and torch-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from tcx.core.model import RunModel
from tcx.core.model.shape_facts import number_text

_CLASS = re.compile(r"^<class '(?:[\w.]+\.)?(?P<name>\w+)'>$")
TENSORIFY = "TensorifyScalarRestartAnalysis"


@dataclass(frozen=True)
class Restart:
    """Attempt `attempt` of `compile_id` was abandoned and traced again."""

    compile_id: str
    attempt: int
    kind: str  # torch's exception class, e.g. TensorifyScalarRestartAnalysis, or "restart"
    reason: str  # what the user reads: torch's reason, with the sources it names
    graphs: int = 0  # graphs the attempt logged (dynamo_output_graph): torch's graph count has them

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "attempt": self.attempt,
            "kind": self.kind,
            "reason": self.reason,
            "graphs": self.graphs,
        }


def restarts(model: RunModel) -> list[Restart]:
    """Every abandoned attempt of the run, in compile order."""
    attempts = {cid: c.attempts - 1 for cid, c in model.compiles.items()}  # the last attempt of each
    if not any(attempts.values()):
        return []
    logs = model.attempt_logs  # (cid, attempt) -> float symbols, specializations, a break, graphs
    floats = {key: log.floats for key, log in logs.items()}
    specialized = {key: {s: number_text(v) for s, v in log.specialized.items()} for key, log in logs.items()}
    breaks = {key for key, log in logs.items() if log.broke}
    graphs = {key: log.graphs for key, log in logs.items()}
    out = []
    for cid, last in attempts.items():
        if last == 0:
            continue
        comp = model.compiles.get(cid)
        reasons = [str(r) for r in (comp.restart_reasons if comp else [])]
        for attempt in sorted(a for a in comp.seen_attempts if a < last) if comp else ():
            restart = _restart(cid, attempt, reasons, floats, specialized, breaks)
            out.append(replace(restart, graphs=graphs.get((cid, attempt), 0)))
    return out


def restarts_by_attempt(model: RunModel) -> dict[tuple[str, int], Restart]:
    return {(r.compile_id, r.attempt): r for r in restarts(model)}


def _restart(
    cid: str,
    attempt: int,
    reasons: list[str],
    floats: dict[tuple[str, int], dict[str, str]],
    specialized: dict[tuple[str, int], dict[str, str]],
    breaks: set[tuple[str, int]],
) -> Restart:
    kinds = {_kind(r): r for r in reasons}
    later = specialized.get((cid, attempt + 1), {})
    dropped = {sym: src for sym, src in floats.get((cid, attempt), {}).items() if sym in later}
    if TENSORIFY in kinds or dropped:
        named = ", ".join(f"`{src}` ({later[sym]}, symbol {sym})" for sym, src in dropped.items())
        what = f"the Python float {named}" if len(dropped) == 1 else f"the Python floats {named}"
        if not dropped:
            what = "a symbolic Python float"
        return Restart(
            cid,
            attempt,
            TENSORIFY,
            f"Inductor's _tensorify_python_scalars pass could not turn {what} into a tensor, so torch "
            "specialized it and traced the frame again (a float is traced as a symbol because "
            "torch._dynamo.config.specialize_float is False)",
        )
    # torch's reason as its first line: a speculation restart's reason is a whole graph-break text
    # (explanation, hints, a link), which the break's own section shows in full.
    texts = list(dict.fromkeys(_first_line(r) for r in reasons if not _CLASS.match(r)))
    if (cid, attempt) in breaks:
        why = f" ({'; '.join(texts)})" if texts else ""
        again = "Dynamo traced again to compile the part before it"
        return Restart(cid, attempt, "graph break", f"a graph break{why}: {again}")
    if texts:
        return Restart(cid, attempt, "restart", f"torch: {'; '.join(texts)}")
    if reasons:
        return Restart(cid, attempt, _kind(reasons[0]), f"torch: {', '.join(_kind(r) for r in reasons)}")
    return Restart(cid, attempt, "restart", "torch logged no restart reason for this compile")


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()


def _kind(reason: str) -> str:
    m = _CLASS.match(reason.strip())
    return m["name"] if m else "restart"
