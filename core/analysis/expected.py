"""Recompiles that are expected, not problems: the recompiles view decides which (`Call.expected`: only
grad mode differs between training and evaluation). A problem list counts and ranks the others; the
expected ones are listed apart with the reason, never ranked (a first compile is not listed at all)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Expected:
    """One expected recompile: what recompiled, why that is expected, where the frame is."""

    title: str
    detail: str
    where: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class RecompileSplit:
    count: int  # recompiles that are problems
    causes: list[str]  # "cause: remedy" of those, once each
    expected: list[Expected]


def split_recompiles(total: int, calls: Sequence[Any]) -> RecompileSplit:
    """The selection's `total` recompiles, split by the recompiles view's calls: problems and expected."""
    recompiled = [c for c in calls if c.outcome == "recompile"]
    expected = [
        Expected(
            f"{c.function} recompiled ({c.compile_id})",
            c.expected,
            f"{c.file}:{c.line}" if c.file else None,
        )
        for c in recompiled
        if c.expected
    ]
    causes = [f"{c.cause}: {c.remedy or ''}".strip(": ") for c in recompiled if c.cause and not c.expected]
    return RecompileSplit(max(0, total - len(expected)), list(dict.fromkeys(causes)), expected)
