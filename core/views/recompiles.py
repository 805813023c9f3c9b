"""The recompiles view's facts: every evaluation of a compiled frame, its cache entries, and why it
recompiled.

Pure and torch-free. Sources, all recorded events:
- `frame_call` (the recompiles capture): one per call of a torch.compile'd callable, with the
  argument signature and the outcome read from Dynamo's cache (compile / hit / recompile / eager);
- `guard_check`: on every cache miss of a frame with entries, each entry's failing guard and the
  actual values it read;
- torch's own trace: `recompile_reasons` (the failing guard per entry, in check order — the
  authority for recompile counts and reasons), `dynamo_start`, `compilation_metrics` (refused
  compiles, the recompile limit), `create_symbol` / `guard_added_fast` (dynamic promotion),
  `dynamo_cpp_guards_str` (each entry's guards);
- `what_if`: after the run, each `--what-if` input checked against every entry's guards.

On a TORCH_TRACE log only the trace exists: the recompiles, their reasons, promotions and
entries are shown; the per-call timeline (hits) and what-if need a live run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from tcx.core.analysis.recompile_remedies import RemedyContext, explain_call
from tcx.core.analysis.shape_facts import shape_facts
from tcx.core.ingest.trace_events import TraceEvent
from tcx.core.model import Recompile, RunModel
from tcx.core.model.guard_sets import GuardedTensor, GuardSummary
from tcx.core.selection import Selection, whole_run
from tcx.core.torchtext import guards as guard_text
from tcx.core.views.envelope import envelope

SCHEMA = "tcx.recompiles/1"
LIVE_ONLY_NOTE = (
    "read from a TORCH_TRACE log: recompiles, their failing guards and the cache entries come from "
    "torch's trace; the per-call timeline (cache hits) and --what-if need a live run (tcx recompiles "
    "script.py)"
)

MISSED_CALLS_NOTE = (
    "the per-call capture saw none of the compiled calls (compiled before tcx.record() started, or in a "
    "way tcx does not wrap): recompiles, their failing guards and the cache entries come from "
    "torch's trace; cache hits and argument shapes are not listed. Call torch.compile inside the recorded "
    "block, or run tcx recompiles script.py"
)


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


@dataclass
class Entry:
    compile_id: str
    function: str
    created_by: int | None
    served: list[int] = field(default_factory=list)
    tensors: list[GuardedTensor] = field(default_factory=list)
    shape_guards: list[str] = field(default_factory=list)
    value_guards: list[str] = field(default_factory=list)
    promotions: list[Promotion] = field(default_factory=list)
    refused: bool = False
    # hits past the listed calls that this entry served (None: the input does not say)
    hits_not_listed: int | None = 0
    state: dict[str, str] = field(default_factory=dict)  # the global-state guard's values (grad_mode ...)
    differs_from: str | None = None  # the entry this one is compared with (the one it failed first)
    differences: list[str] = field(default_factory=list)

    def summary(self) -> list[str]:
        out = [_tensor_line(t) for t in self.tensors]
        out += self.shape_guards + self.value_guards
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "function": self.function,
            "created_by": self.created_by,
            "served": self.served,
            "hits_not_listed": self.hits_not_listed,
            "differs_from": self.differs_from,
            "differences": self.differences,
            "global_state": self.state,
            "guards": self.summary(),
            "promotions": [p.to_json() for p in self.promotions],
        }


def _tensor_line(t: GuardedTensor) -> str:
    size = t.size.replace("None", "s")
    grad = ", requires_grad" if t.requires_grad else ""
    return f"{t.arg}: {t.dtype}{size}{grad}"


def differences(old: Entry, new: Entry) -> list[str]:
    """What `new`'s guards check differently from `old`'s: global state first (grad mode, autocast
    ...), then the tensors, then the symbolic-shape and value guards only one of them has."""
    out = [
        f"{key}: {old.state.get(key, '(absent)')} → {new.state.get(key, '(absent)')}"
        for key in sorted(set(old.state) | set(new.state))
        if old.state.get(key) != new.state.get(key)
    ]
    before = {t.arg: _tensor_line(t) for t in old.tensors}
    after = {t.arg: _tensor_line(t) for t in new.tensors}
    for arg in dict.fromkeys([*before, *after]):
        if before.get(arg) != after.get(arg):
            out.append(f"{before.get(arg) or arg + ': (not guarded)'} → {after.get(arg) or '(not guarded)'}")
    for mine, theirs, sign in (
        (new.shape_guards + new.value_guards, old.shape_guards + old.value_guards, "+"),
        (old.shape_guards + old.value_guards, new.shape_guards + new.value_guards, "-"),
    ):
        out += [f"{sign} {g}" for g in mine if g not in theirs]
    return out


@dataclass
class Reason:
    """One torch `recompile_reasons` artifact: the compile it started and each entry's failure."""

    compile_id: str | None
    function: str | None
    failures: list[FailedGuard]
    text: str


@dataclass
class WhatIf:
    index: int
    spec: list[dict[str, Any]]
    function: str | None
    args: list[dict[str, Any]] | None
    verdict: str  # hit, recompile, eager, error
    entry: str | None
    failed_guards: list[FailedGuard]
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "spec": self.spec,
            "function": self.function,
            "args": self.args,
            "verdict": self.verdict,
            "entry": self.entry,
            "failed_guards": [g.to_json() for g in self.failed_guards],
            "error": self.error,
        }


@dataclass
class RecompileReport:
    model: RunModel
    selection: Selection
    calls: list[Call]
    entries: dict[str, list[Entry]]  # function -> entries in creation order
    reasons: list[Reason]
    what_ifs: list[WhatIf]
    dropped: int
    dropped_exact: bool
    live: bool
    limit: dict[str, Any]
    missed_calls: bool = False  # the per-call capture was on, yet saw none of the compiled calls

    @property
    def note(self) -> str | None:
        """Why the per-call timeline is missing, or None when it is complete."""
        return MISSED_CALLS_NOTE if self.missed_calls else None if self.live else LIVE_ONLY_NOTE

    @property
    def recompile_count(self) -> int:
        return len(self.reasons)

    @property
    def call_count(self) -> int:
        """Calls of the selected frames, with those the capture did not list (cache hits)."""
        return len(self.calls) + self.dropped

    @property
    def outcomes(self) -> dict[str, int]:
        counts = {"compile": 0, "hit": 0, "recompile": 0, "eager": 0}
        for c in self.calls:
            counts[c.outcome] = counts.get(c.outcome, 0) + 1
        counts["hit"] += self.dropped
        return counts

    @property
    def promotions(self) -> list[Promotion]:
        return [p for es in self.entries.values() for e in es for p in e.promotions]

    @property
    def eager_calls(self) -> list[Call]:
        return [c for c in self.calls if c.outcome == "eager"]


# ----------------------------------------------------------------------------- building


def analyze(model: RunModel, selection: Selection | None = None) -> RecompileReport:
    selection = selection or whole_run(model)
    captured = model.captures
    frame_calls = [e for e in captured.of("frame_call") if "hook_error" not in e]
    checks = [e for e in captured.of("guard_check") if "hook_error" not in e]
    configs = captured.of("recompile_config")
    dropped_events = captured.of("frame_calls_dropped")
    dropped, dropped_by_entry = _unlisted_hits(dropped_events)
    if dropped_by_entry is not None and not selection.whole_run:
        dropped = sum(n for cid, n in dropped_by_entry.items() if selection.includes(cid))
    # The final count is written at the end of the run; without it (a crash) the count is a floor.
    dropped_exact = any(e.get("final") for e in dropped_events)
    live = bool(frame_calls or configs)
    # the capture was on but saw no call of what compiled (torch.compile ran before `tcx.record()`)
    missed = live and not frame_calls and bool(model.compiles)
    live = live and not missed
    names = _compile_names(model)
    guards = {cid: tree.summary for cid, tree in model.guard_sets.tree_by_compile.items()}
    # One rule for every view and torch version: the model's recompiles (core/model/consumers.py).
    reasons = [_reason(r, names) for r in model.recompiles]
    promotions = _promotions(model.documents.of(*_PROMOTION_EVENTS, "compilation_metrics"))
    limit = _limit(model, configs, selection)
    reasons = [r for r in reasons if selection.includes(r.compile_id)]
    if frame_calls:
        calls = _calls_from_capture(frame_calls, checks, reasons)
    else:
        calls = _calls_from_trace(model, reasons, names)
    calls = [c for c in calls if _selected(c, selection)]
    # without the per-call capture (a log) no call was seen, listed or not
    entries = _entries(model, calls, names, guards, promotions, selection, dropped_by_entry if live else None)
    _attach_promotions(calls, entries)
    states = {cid: g.state for cid, g in guards.items()}
    ctx = RemedyContext(
        model,
        calls,
        limit,
        shape_facts(model),
        states,
        {c: g.shape for c, g in guards.items()},
        {c: [{"arg": t.arg, "size": t.size} for t in g.tensors] for c, g in guards.items()},
    )
    for call in calls:
        explain_call(call, ctx)
    what_ifs = [_what_if(e, names) for e in captured.of("what_if")]
    what_ifs = [w for w in what_ifs if selection.includes_function(w.function)]
    return RecompileReport(
        model=model,
        selection=selection,
        calls=calls,
        entries=entries,
        reasons=reasons,
        what_ifs=what_ifs,
        dropped=dropped,
        dropped_exact=dropped_exact or not dropped,
        live=live,
        limit=limit,
        missed_calls=missed,
    )


def _unlisted_hits(counts: list[dict[str, Any]]) -> tuple[int, dict[str, int] | None]:
    """The hits that were counted, not listed: their number, and per cache entry (compile id) when
    the recording says which entry served them (one made before tcx wrote `by_entry` does not)."""
    if not counts:
        return 0, {}
    last = max(counts, key=lambda e: int(e.get("count", 0)))
    by_entry = last.get("by_entry")
    return int(last.get("count", 0)), by_entry if isinstance(by_entry, dict) else None


def _selected(call: Call, selection: Selection) -> bool:
    """By the compile the call made or the entry that served it; by name when it has neither."""
    ids = [cid for cid in (call.compile_id, call.entry) if cid]
    if ids:
        return any(selection.includes(cid) for cid in ids)
    return selection.includes_function(call.function)


def _compile_names(model: RunModel) -> dict[str, str]:
    """compile id -> function name, and frame id -> function name (as "frame:N")."""
    out: dict[str, str] = {}
    for cid, comp in model.compiles.items():
        name = comp.co_name or (comp.stack[-1].name if comp.stack else None)
        if name:
            out[cid] = name
            if comp.frame_id is not None:
                out.setdefault(f"frame:{comp.frame_id}", name)
    return out


def _limit(model: RunModel, configs: list[dict[str, Any]], selection: Selection) -> dict[str, Any]:
    for comp in model.compiles.values():
        if not selection.includes(comp.compile_id):
            continue
        reason = comp.fail_reason or ""
        m = re.search(r"\((?:currently )?set to (\d+)\)", reason)
        if "recompile limit" in (comp.fail_type or "") + reason or "cache_size_limit" in reason:
            cfg = "torch._dynamo.config.recompile_limit"
            if "accumulated" in reason:
                cfg = "torch._dynamo.config.accumulated_recompile_limit"
            return {
                "limit": int(m.group(1)) if m else None,
                "config": cfg,
                "hit": True,
                "compile_id": comp.compile_id,
            }
    base = dict(configs[0]) if configs else {"limit": None, "config": "torch._dynamo.config.recompile_limit"}
    base.pop("kind", None)
    return {**base, "hit": False, "compile_id": None}


# ---------------------------------------------------------------- guard text


def parse_failure(text: str, entry: str = "?") -> FailedGuard:
    """One failing guard of cache entry `entry`, as torch prints it (recompile_reasons or check_verbose)."""
    f = guard_text.parse_failure(text)
    loc = f.location
    return FailedGuard(
        entry=entry,
        guard=f.guard,
        expected=f.expected,
        actual=f.actual,
        kind=f.kind,
        arg=f.arg,
        dim=f.dim,
        file=loc.file if loc else None,
        line=loc.line if loc else None,
        code=loc.code if loc else None,
    )


def _reason(r: Recompile, names: dict[str, str]) -> Reason:
    failures = [parse_failure(text, entry) for entry, text in guard_text.recompile_reasons(r.payload)]
    function = names.get(r.compile_id or "") or names.get(f"frame:{r.frame_id}")
    return Reason(compile_id=r.compile_id, function=function, failures=failures, text=_reason_text(r.payload))


def _reason_text(payload: str) -> str:
    try:
        return str(json.loads(payload))
    except ValueError:
        return payload


# ---------------------------------------------------------------- calls


def _calls_from_capture(
    frame_calls: list[dict[str, Any]],
    checks: list[dict[str, Any]],
    reasons: list[Reason],
) -> list[Call]:
    by_cid = {r.compile_id: r for r in reasons if r.compile_id}
    used: set[str] = set()
    pending_checks = list(checks)
    calls: list[Call] = []
    for ev in frame_calls:
        call = Call(
            index=int(ev.get("index", len(calls))),
            function=str(ev.get("function")),
            file=ev.get("file"),
            line=ev.get("line"),
            outcome=str(ev.get("outcome")),
            entry=ev.get("entry"),
            compile_id=ev.get("entry") if ev.get("outcome") in ("compile", "recompile") else None,
            checked=list(ev.get("checked") or []),
            args=ev.get("args"),
            limit=ev.get("config"),
            wraps=ev.get("wraps"),
        )
        if call.outcome in ("recompile", "eager"):
            check = _take_check(pending_checks, call)
            reason = by_cid.get(call.compile_id) if call.compile_id else None
            if reason is None and call.outcome == "eager":
                reason = _refused_reason(reasons, used, call)
            if reason is not None:
                used.add(reason.compile_id or "")
                call.compile_id = call.compile_id or reason.compile_id
                call.failed_guards = _merge(reason.failures, check)
            elif check is not None:
                call.failed_guards = _merge([], check)
        calls.append(call)
    return calls


def _take_check(pending: list[dict[str, Any]], call: Call) -> dict[str, Any] | None:
    for i, ev in enumerate(pending):
        if (
            ev.get("function") == call.function
            and ev.get("file") == call.file
            and ev.get("line") == call.line
        ):
            return pending.pop(i)
    return None


def _refused_reason(reasons: list[Reason], used: set[str], call: Call) -> Reason | None:
    frame = call.checked[0].split("/")[0] if call.checked else None
    for r in reasons:
        cid = r.compile_id
        if cid and cid not in used and frame and cid.split("/")[0] == frame and cid not in call.checked:
            return r
    return None


def _merge(failures: list[FailedGuard], check: dict[str, Any] | None) -> list[FailedGuard]:
    """torch's reasons are the authority; the live guard check adds the actual values it read."""
    results = {r.get("compile_id"): r for r in (check or {}).get("results") or []}
    if not failures:
        failures = [
            parse_failure((r.get("failed") or ["?"])[0], str(cid))
            for cid, r in results.items()
            if not r.get("passed")
        ]
    for g in failures:
        r = results.get(g.entry)
        if r and g.actual is None:
            actual = r.get("actual") or {}
            if len(actual) == 1:
                g.actual = next(iter(actual.values()))
            elif actual:
                g.actual = ", ".join(f"{guard_text.source_name(k)}={v}" for k, v in actual.items())
    return failures


def _calls_from_trace(model: RunModel, reasons: list[Reason], names: dict[str, str]) -> list[Call]:
    """Without the live capture: one call per compile (first compile, recompile, refused)."""
    by_cid = {r.compile_id: r for r in reasons if r.compile_id}
    calls: list[Call] = []
    for cid, comp in model.compiles.items():
        if comp.is_resume and cid not in by_cid:
            continue
        if cid.startswith("!"):
            continue
        reason = by_cid.get(cid)
        refused = comp.failed and "recompile limit" in ((comp.fail_type or "") + (comp.fail_reason or ""))
        outcome = "eager" if refused else ("recompile" if reason else "compile")
        calls.append(
            Call(
                index=len(calls),
                function=names.get(cid, "?"),
                file=comp.co_filename,
                line=comp.co_firstlineno,
                outcome=outcome,
                entry=None if refused else cid,
                compile_id=cid,
                checked=[f.entry for f in reason.failures] if reason else [],
                args=None,
                failed_guards=list(reason.failures) if reason else [],
                from_trace=True,
            )
        )
    return calls


# ---------------------------------------------------------------- entries and promotion


_PROMOTION_EVENTS = frozenset({"create_symbol", "guard_added_fast", "guard_added"})


def _promotions(events: list[TraceEvent]) -> dict[str, list[Promotion]]:
    """Sizes Dynamo made symbolic when it recompiled a frame that starts static (automatic dynamic).
    A frame compiled with dynamic=True has symbols from its first compile: none is a promotion.
    Only a compile's last attempt counts (a restarted attempt logged the same symbols)."""
    out: dict[str, list[Promotion]] = {}
    by_symbol: dict[tuple[str, str], Promotion] = {}
    last: dict[str, int] = {}
    dynamic: set[str] = set()
    for ev in events:
        if ev.name in _PROMOTION_EVENTS and ev.compile_id:
            last[ev.compile_id] = max(last.get(ev.compile_id, 0), ev.attempt)
        elif ev.name == "compilation_metrics" and ev.compile_id and _compiled_dynamic(ev):
            dynamic.add(ev.compile_id)
    symbolic: set[tuple[str, str]] = set()  # (frame, source) made symbolic by an earlier compile
    for ev in events:
        if ev.name not in _PROMOTION_EVENTS or not ev.compile_id or not isinstance(ev.body, dict):
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


def _entries(
    model: RunModel,
    calls: list[Call],
    names: dict[str, str],
    guards: dict[str, GuardSummary],
    promotions: dict[str, list[Promotion]],
    selection: Selection,
    unlisted: dict[str, int] | None,
) -> dict[str, list[Entry]]:
    entries: dict[str, list[Entry]] = {}
    index: dict[str, Entry] = {}
    for cid, comp in model.compiles.items():
        name = names.get(cid)
        if not name or comp.failed or (comp.graph_count == 0 and cid not in guards):
            continue
        if not selection.includes(cid):
            continue
        g = guards.get(cid) or GuardSummary()
        e = Entry(
            compile_id=cid,
            function=name,
            created_by=None,
            tensors=g.tensors,
            shape_guards=g.shape,
            value_guards=g.values,
            promotions=promotions.get(cid, []),
            hits_not_listed=None if unlisted is None else unlisted.get(cid, 0),
            state=g.state,
        )
        entries.setdefault(name, []).append(e)
        index[cid] = e
    for call in calls:
        served = index.get(call.entry or "")
        if served is None:
            continue
        e = served
        if call.outcome in ("compile", "recompile"):
            e.created_by = call.index
            failed = call.failed_guards[0].entry if call.failed_guards else None
            if failed in index and failed != e.compile_id:
                e.differs_from = failed
        e.served.append(call.index)
    for es in entries.values():
        for before, e in pairwise(es):
            e.differs_from = e.differs_from or before.compile_id
            e.differences = differences(index[e.differs_from], e)
    return entries


def _attach_promotions(calls: list[Call], entries: dict[str, list[Entry]]) -> None:
    by_cid = {e.compile_id: e for es in entries.values() for e in es}
    for call in calls:
        e = by_cid.get(call.compile_id or "")
        if not e or call.outcome != "recompile":
            continue
        call.promotions = list(e.promotions)
        for p in e.promotions:
            static = next(
                (g for g in call.failed_guards if g.kind == "shape" and g.arg == p.arg and g.dim == p.dim),
                None,
            )
            if static:
                p.replaced = f"size[{p.dim}] == {static.expected}"


# ---------------------------------------------------------------- what-if


def _what_if(ev: dict[str, Any], names: dict[str, str]) -> WhatIf:
    if ev.get("error"):
        return WhatIf(
            index=int(ev.get("index", 0)),
            spec=ev.get("spec") or [],
            function=ev.get("function"),
            args=ev.get("args"),
            verdict="error",
            entry=None,
            failed_guards=[],
            error=str(ev["error"]),
        )
    results = ev.get("results") or []
    passed = next((r for r in results if r.get("passed")), None)
    failed = []
    for r in results:
        if r is passed:
            break
        g = parse_failure((r.get("failed") or ["?"])[0], str(r.get("compile_id")))
        actual = r.get("actual") or {}
        if g.actual is None and len(actual) == 1:
            g.actual = next(iter(actual.values()))
        failed.append(g)
    cfg = ev.get("config") or {}
    if passed:
        verdict, entry = "hit", str(passed.get("compile_id"))
    elif cfg.get("limit") is not None and len(results) >= int(cfg["limit"]):
        verdict, entry = "eager", None
    else:
        verdict, entry = "recompile", None
    return WhatIf(
        index=int(ev.get("index", 0)),
        spec=ev.get("spec") or [],
        function=ev.get("function"),
        args=ev.get("args"),
        verdict=verdict,
        entry=entry,
        failed_guards=failed,
    )


# ---------------------------------------------------------------- JSON


def to_json(rep: RecompileReport) -> dict[str, Any]:
    m = rep.model
    return {
        **envelope(SCHEMA, m, rep.selection),
        "per_call_capture": rep.live,
        "note": rep.note,
        "recompile_count": rep.recompile_count,
        "call_count": rep.call_count,
        "calls_not_listed": rep.dropped,
        "call_count_exact": rep.dropped_exact,
        "outcomes": rep.outcomes,
        "recompile_limit": rep.limit,
        "calls": [c.to_json() for c in rep.calls],
        "entries": {fn: [e.to_json() for e in es] for fn, es in rep.entries.items()},
        "promotions": [p.to_json() for p in rep.promotions],
        "reasons": [
            {
                "compile_id": r.compile_id,
                "function": r.function,
                "failed_guards": [g.to_json() for g in r.failures],
                "text": r.text,
            }
            for r in rep.reasons
        ],
        "what_if": [w.to_json() for w in rep.what_ifs],
        "problems": m.problems,
    }
