"""Each call of a compiled frame, as the recompiles view lists it: its outcome in Dynamo's cache,
the guards that failed on the entries it was checked against, and what the analyses concluded
(core/analysis/recompile_remedies.py: cause and remedy; core/analysis/expected.py: expected).

Typed records below the views, so the analyses, fix and cost read them from the model's package,
not from a view. The recompiles view (core/views/recompiles.py) builds them from the recompiles
capture's per-call records (call_captures.py) or, for a log, from torch's recompile reasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tcx.core.model.promotions import Promotion


@dataclass
class FailedGuard:
    entry: str
    guard: str
    expected: str | None = None
    actual: str | None = None
    kind: str = "other"  # shape, dynamic_shape, dtype, device, requires_grad, value, identity, ...
    arg: str | None = None
    dim: int | None = None
    file: str | None = None
    line: int | None = None
    code: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "guard": self.guard,
            "expected": self.expected,
            "actual": self.actual,
            "kind": self.kind,
            "arg": self.arg,
            "dim": self.dim,
            "file": self.file,
            "line": self.line,
        }


@dataclass
class Call:
    index: int
    function: str
    file: str | None
    line: int | None
    outcome: str  # compile, hit, recompile, eager
    entry: str | None
    compile_id: str | None
    checked: list[str]
    args: list[dict[str, Any]] | None
    failed_guards: list[FailedGuard] = field(default_factory=list)
    cause: str | None = None
    remedy: str | None = None
    limit: dict[str, Any] | None = None
    from_trace: bool = False  # reconstructed from torch's trace (no live per-call capture)
    wraps: str | None = None  # the callable the program compiled, when `function` is a frame around it
    promotions: list[Promotion] = field(default_factory=list)  # dims made symbolic by this compile
    expected: str | None = None  # why this recompile is expected, not a problem (grad mode: train and eval)
    tied: list[tuple[str, int]] = field(
        default_factory=list
    )  # (arg, dim) a size guard ties to the failed size
    call_site: str | None = None  # the change at the user's line when library code calls the frame
    # the user's expressions for the failed size's argument and the sizes tied to it, where the user's call
    # names them by keyword (`compiled(input_ids=ids)` passes a wrapper's `kwargs['input_ids']` as `ids`),
    # and that call's file:line
    user_names: dict[str, str] = field(default_factory=dict)
    user_call: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "function": self.function,
            "wraps": self.wraps,
            "file": self.file,
            "line": self.line,
            "outcome": self.outcome,
            "compile_id": self.compile_id,
            "entry": self.entry,
            "checked": self.checked,
            "args": self.args,
            "failed_guards": [g.to_json() for g in self.failed_guards],
            "cause": self.cause,
            "remedy": self.remedy,
            "limit": self.limit,
            "expected": self.expected,
        }
