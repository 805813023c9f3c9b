"""Sizes Dynamo made symbolic when it recompiled a frame that starts static (automatic dynamic
shapes), read from torch's trace: `create_symbol`, the guards added on each symbol, and each
compile's `compilation_metrics` (a frame compiled with dynamic=True promotes nothing).

Pure and torch-free; the recompiles view attaches them to its cache entries and calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tcx.core.ingest.trace_events import TraceEvent
from tcx.core.torchtext import guards as guard_text


@dataclass
class Promotion:
    """A dimension Dynamo made symbolic when it recompiled (automatic dynamic shapes)."""

    compile_id: str
    source: str
    arg: str | None
    dim: int | None
    symbol: str
    value: str | None
    range: str | None
    guards: list[dict[str, Any]] = field(default_factory=list)  # expr, file, line, code
    replaced: str | None = None  # the static guard that failed, e.g. "size[0] == 128"

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "source": self.source,
            "arg": self.arg,
            "dim": self.dim,
            "symbol": self.symbol,
            "value": self.value,
            "range": self.range,
            "guards": self.guards,
            "replaced": self.replaced,
        }


_SYMBOL_EVENTS = frozenset({"create_symbol", "guard_added_fast", "guard_added"})
# What read_promotions reads: the symbols and their guards, and each compile's config.
PROMOTION_EVENTS = (*sorted(_SYMBOL_EVENTS), "compilation_metrics")


def read_promotions(events: list[TraceEvent]) -> dict[str, list[Promotion]]:
    """Sizes Dynamo made symbolic when it recompiled a frame that starts static (automatic dynamic).
    A frame compiled with dynamic=True has symbols from its first compile: none is a promotion.
    Only a compile's last attempt counts (a restarted attempt logged the same symbols)."""
    out: dict[str, list[Promotion]] = {}
    by_symbol: dict[tuple[str, str], Promotion] = {}
    last: dict[str, int] = {}
    dynamic: set[str] = set()
    for ev in events:
        if ev.name in _SYMBOL_EVENTS and ev.compile_id:
            last[ev.compile_id] = max(last.get(ev.compile_id, 0), ev.attempt)
        elif ev.name == "compilation_metrics" and ev.compile_id and _compiled_dynamic(ev):
            dynamic.add(ev.compile_id)
    symbolic: set[tuple[str, str]] = set()  # (frame, source) made symbolic by an earlier compile
    for ev in events:
        if ev.name not in _SYMBOL_EVENTS or not ev.compile_id or not isinstance(ev.body, dict):
            continue
        if ev.attempt != last.get(ev.compile_id) or ev.compile_id in dynamic:
            continue
        if ev.name == "create_symbol":
            source = str(ev.body.get("source", ""))
            frame = ev.compile_id.split("/")[0]
            if (frame, source) in symbolic:  # symbolic since an earlier entry: not promoted here
                continue
            symbolic.add((frame, source))
            size = guard_text.size_source(source)
            p = Promotion(
                compile_id=ev.compile_id,
                source=source,
                arg=size[0] if size else guard_text.source_name(source),
                dim=size[1] if size else None,
                symbol=str(ev.body.get("symbol")),
                value=str(ev.body.get("val")) if ev.body.get("val") is not None else None,
                range=str(ev.body.get("vr")) if ev.body.get("vr") is not None else None,
            )
            out.setdefault(ev.compile_id, []).append(p)
            by_symbol[(ev.compile_id, p.symbol)] = p
        elif ev.name in ("guard_added_fast", "guard_added"):
            expr = str(ev.body.get("expr", ""))
            stack = ev.body.get("user_stack") or []
            top = stack[-1] if stack and isinstance(stack[-1], dict) else {}
            for (cid, sym), p in by_symbol.items():
                if cid == ev.compile_id and re.search(rf"\b{re.escape(sym)}\b", expr):
                    p.guards.append({"expr": expr, "line": top.get("line"), "code": top.get("loc")})
    return out


def _compiled_dynamic(ev: TraceEvent) -> bool:
    """torch.compile(dynamic=True) compiles with assume_static_by_default off (torch's own config)."""
    config = ev.body.get("dynamo_config") if isinstance(ev.body, dict) else None
    try:
        parsed = json.loads(config) if isinstance(config, str) else config
    except ValueError:
        return False
    return isinstance(parsed, dict) and parsed.get("assume_static_by_default") is False
