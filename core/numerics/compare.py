"""The values two runs kept (core/recorder/compat_numerics.py), compared record by record.

Records are matched by what they are (a call of a function and its number, a backward pass, an
optimizer step), values within a record by label (an output's position, a parameter's name). The
eager run's float64 twins are the reference; a second eager run, when there is one, says which
values the program itself does not repeat.

Imports torch (the kept values are tensors): only the `tcx numerics` command calls it, after the runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch

from tcx.core.numerics.judge import Tolerance, judge
from tcx.core.numerics.report import ValueCheck

Key = tuple[str, str | None, int]


@dataclass
class Kept:
    """One run's kept values, or why there are none."""

    records: list[dict[str, Any]]
    dropped: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    shadow_ops: int = 0
    fallback_ops: dict[str, int] = field(default_factory=dict)
    missing: str | None = None

    def by_key(self) -> dict[Key, dict[str, Any]]:
        return {_key(r): r for r in self.records}


def load(path: str) -> Kept:
    if not os.path.isfile(path):
        return Kept([], missing="the run kept no values (it ended before the program's end)")
    try:
        doc = torch.load(path, weights_only=True)
    except Exception as exc:  # a run that died while writing its file
        return Kept([], missing=f"the kept values could not be read ({type(exc).__name__})")
    return Kept(
        records=list(doc.get("records") or []),
        dropped=dict(doc.get("dropped") or {}),
        errors=list(doc.get("errors") or []),
        shadow_ops=int(doc.get("shadow_ops") or 0),
        fallback_ops=dict(doc.get("fallback_ops") or {}),
    )


def compare(compiled: Kept, eager: Kept, tolerance: Tolerance, again: Kept | None = None) -> list[ValueCheck]:
    """One ValueCheck per record of either run, in the compiled run's order (records only the eager
    run has come after, with a note); values judged with the eager run's float64 twins."""
    eager_by_key = eager.by_key()
    again_by_key = again.by_key() if again is not None else None
    checks = []
    seen = set()
    for record in compiled.records:
        key = _key(record)
        seen.add(key)
        other = eager_by_key.get(key)
        if other is None:
            checks.append(
                _missing(record, "the eager run has no such record (it stopped or took another path)")
            )
            continue
        check = _check(record, other, tolerance)
        if again_by_key is not None:
            _repeatable(check, other, again_by_key.get(key))
        checks.append(check)
    for record in eager.records:
        if _key(record) not in seen:
            checks.append(
                _missing(record, "the compiled run has no such record (it stopped or took another path)")
            )
    for seq, check in enumerate(checks):
        check.seq = seq
    return checks


def _check(compiled: dict[str, Any], eager: dict[str, Any], tolerance: Tolerance) -> ValueCheck:
    kind, function, index = _key(compiled)
    mine = dict(zip(compiled["labels"], compiled["values"], strict=True))
    refs = eager.get("refs") or [None] * len(eager["labels"])
    computed = eager.get("computed") or [False] * len(eager["labels"])
    judgements = []
    notes = []
    for label, value, ref, known in zip(eager["labels"], eager["values"], refs, computed, strict=True):
        if label not in mine:
            notes.append(f"{label} is missing in the compiled run")
            continue
        judgements.append(judge(label, mine[label], value, ref if known else None, tolerance))
    extra = sorted(set(mine) - set(eager["labels"]))
    if extra:
        notes.append(f"the compiled run also has {', '.join(extra[:5])}")
    if compiled.get("others") != eager.get("others"):
        notes.append("non-tensor values differ from eager's")
    return ValueCheck(kind, function, index, judgements, note="; ".join(notes) or None)


def _repeatable(check: ValueCheck, eager: dict[str, Any], again: dict[str, Any] | None) -> None:
    """Mark the check with whether a second eager run kept the same values, bit for bit."""
    if again is None:
        check.nondeterministic = True
        return
    other = dict(zip(again["labels"], again["values"], strict=True))
    spread = 0.0
    same = True
    for label, value in zip(eager["labels"], eager["values"], strict=True):
        twin = other.get(label)
        if twin is None or twin.shape != value.shape or twin.dtype != value.dtype:
            same = False
            continue
        if not torch.equal(torch.nan_to_num(twin), torch.nan_to_num(value)):
            same = False
            if value.is_floating_point():
                spread = max(spread, float((twin.double() - value.double()).abs().max()))
    check.nondeterministic = not same
    check.eager_spread = spread if not same else 0.0


def _missing(record: dict[str, Any], why: str) -> ValueCheck:
    kind, function, index = _key(record)
    return ValueCheck(kind, function, index, [], note=why)


def _key(record: dict[str, Any]) -> Key:
    return (str(record["kind"]), record.get("function"), int(record["index"]))
