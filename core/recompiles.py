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

import re
from dataclasses import dataclass, field
from typing import Any

from tcx import __version__
from tcx.core.analysis import RunModel
from tcx.core.trace_events import TraceEvent

SCHEMA = "tcx.recompiles/1"
LIVE_ONLY_NOTE = (
    "read from a TORCH_TRACE log: recompiles, their failing guards and the cache entries come from "
    "torch's trace; the per-call timeline (cache hits) and --what-if need a live run (tcx recompiles "
    "script.py)"
)

_TENSOR_FAIL = re.compile(
    r"tensor '(?P<arg>[^']+(?:'\][^']*)?)' "
    r"(?P<what>size|stride|dtype|device|requires_grad|dispatch key set)"
    r" mismatch(?: at index (?P<dim>\d+))?\.?\s*"
    r"(?:expected (?P<expected>[^,]+?)(?:, actual (?P<actual>.+?))?)?$"
)
_VALUE_EQ = re.compile(r"^(?P<source>[^=<>!]+?) == (?P<expected>.+)$")
_COMMENT_LOC = re.compile(r"#\s*(?P<code>.*?)\s*#\s*(?P<file>[^#]+?):(?P<line>\d+) in (?P<fn>\w+)")
_SIZE_SOURCE = re.compile(r"(?:L\[')?(?P<arg>\w+)(?:'\])?\.size\(\)\[(?P<dim>\d+)\]")
_TENSOR_MATCH = re.compile(
    r"TENSOR_MATCH: check_tensor\((?P<source>[^,]+), \w+, DispatchKeySet\([^)]*\), torch\.(?P<dtype>\w+), "
    r"device=(?P<device>[^,]+), requires_grad=(?P<grad>\w+), size=(?P<size>\[[^\]]*\]), "
    r"stride=(?P<stride>\[[^\]]*\])"
    r"\)(?:\s*#\s*(?P<comment>.*))?"
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
    promotions: list[Promotion] = field(default_factory=list)  # dims made symbolic by this compile

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "function": self.function,
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
        }


@dataclass
class Entry:
    compile_id: str
    function: str
    created_by: int | None
    served: list[int] = field(default_factory=list)
    tensors: list[dict[str, Any]] = field(default_factory=list)
    shape_guards: list[str] = field(default_factory=list)
    value_guards: list[str] = field(default_factory=list)
    promotions: list[Promotion] = field(default_factory=list)
    refused: bool = False

    def summary(self) -> list[str]:
        out = []
        for t in self.tensors:
            size = t["size"].replace("None", "s")
            grad = ", requires_grad" if t["requires_grad"] else ""
            out.append(f"{t['arg']}: {t['dtype']}{size}{grad}")
        out += self.shape_guards + self.value_guards
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "function": self.function,
            "created_by": self.created_by,
            "served": self.served,
            "guards": self.summary(),
            "promotions": [p.to_json() for p in self.promotions],
        }


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
    calls: list[Call]
    entries: dict[str, list[Entry]]  # function -> entries in creation order
    reasons: list[Reason]
    what_ifs: list[WhatIf]
    dropped: int
    dropped_exact: bool
    live: bool
    limit: dict[str, Any]
    function_filter: str | None = None

    @property
    def recompile_count(self) -> int:
        return len(self.reasons)

    @property
    def promotions(self) -> list[Promotion]:
        return [p for es in self.entries.values() for e in es for p in e.promotions]

    @property
    def eager_calls(self) -> list[Call]:
        return [c for c in self.calls if c.outcome == "eager"]


# ----------------------------------------------------------------------------- building


def analyze(model: RunModel, function: str | None = None) -> RecompileReport:
    rec_events = model.recorder_events
    frame_calls = [e for e in rec_events if e.get("kind") == "frame_call" and "hook_error" not in e]
    checks = [e for e in rec_events if e.get("kind") == "guard_check" and "hook_error" not in e]
    configs = [e for e in rec_events if e.get("kind") == "recompile_config"]
    dropped = max(
        (int(e.get("count", 0)) for e in rec_events if e.get("kind") == "frame_calls_dropped"), default=0
    )
    # The final count is written at the end of the run; without it (a crash) the count is a floor.
    dropped_exact = any(e.get("kind") == "frame_calls_dropped" and e.get("final") for e in rec_events)
    live = bool(frame_calls) or any(e.get("kind") == "recompile_config" for e in rec_events)
    names = _compile_names(model)
    guards = _guards_by_compile(model.trace_events)
    reasons = [_reason(ev, names) for ev in model.trace_events if ev.name == "artifact:recompile_reasons"]
    promotions = _promotions(model.trace_events)
    limit = _limit(model, configs)
    if function:
        reasons = [r for r in reasons if _matches(r.function, function)]
    if frame_calls:
        calls = _calls_from_capture(frame_calls, checks, reasons, guards)
    else:
        calls = _calls_from_trace(model, reasons, names, guards)
    if function:
        calls = [c for c in calls if _matches(c.function, function)]
    entries = _entries(model, calls, names, guards, promotions, function)
    _attach_promotions(calls, entries)
    for call in calls:
        _explain(call, calls, model, limit)
    what_ifs = [_what_if(e, names) for e in rec_events if e.get("kind") == "what_if"]
    return RecompileReport(
        model=model,
        calls=calls,
        entries=entries,
        reasons=reasons,
        what_ifs=what_ifs,
        dropped=dropped,
        dropped_exact=dropped_exact or not dropped,
        live=live,
        limit=limit,
        function_filter=function,
    )


def _matches(name: str | None, function: str) -> bool:
    return bool(name) and (name == function or str(name).startswith(f"torch_dynamo_resume_in_{function}_at_"))


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


def _limit(model: RunModel, configs: list[dict[str, Any]]) -> dict[str, Any]:
    for comp in model.compiles.values():
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
    """One failing guard as torch prints it (recompile_reasons or check_verbose)."""
    text = text.strip()
    head, _, comment = text.partition("  #")
    head = head.strip()
    clean_head = head.replace("L['", "").replace("']", "") if head.startswith("tensor '") else head
    g = FailedGuard(entry=entry, guard=clean_head)
    loc = _COMMENT_LOC.search("#" + comment) if comment else None
    if loc:
        g.file, g.line, g.code = loc.group("file"), int(loc.group("line")), loc.group("code")
    m = _TENSOR_FAIL.match(clean_head)
    if m:
        what = m.group("what")
        g.arg = m.group("arg")
        g.dim = int(m.group("dim")) if m.group("dim") else None
        g.expected, g.actual = _strip(m.group("expected")), _strip(m.group("actual"))
        g.kind = {"size": "shape", "stride": "stride", "dispatch key set": "dispatch"}.get(what, what)
        if what == "requires_grad" and g.expected and g.actual is None:
            want = g.expected.rpartition("=")[2].strip()
            g.expected = "True" if want in ("1", "True") else "False"
            g.actual = "False" if g.expected == "True" else "True"
        return g
    if "GLOBAL_STATE" in head or "___check_global_state" in head:
        g.kind = "global_state"
        return g
    if "___check_obj_id" in head or "ID_MATCH" in head:
        g.kind = "identity"
        g.arg = _source_name(head.split("(", 1)[-1].split(",", 1)[0])
        return g
    if "___check_type_id" in head:
        g.kind = "type"
        g.arg = _source_name(head.split("(", 1)[-1].split(",", 1)[0])
        return g
    if "BACKEND_MATCH" in head:
        g.kind = "backend"
        return g
    if "torch_function_mode" in head or "TORCH_FUNCTION" in head:
        g.kind = "global_state"
        return g
    if "Duplicate tensor" in head or "aliasing" in head.lower():
        g.kind = "aliasing"
        return g
    size = _SIZE_SOURCE.search(head)
    if size and re.search(r"<=|>=|<|>|==|!=", head):
        g.kind = "dynamic_shape"
        g.arg, g.dim = size.group("arg"), int(size.group("dim"))
        g.expected = head
        return g
    eq = _VALUE_EQ.match(head)
    if eq:
        source = eq.group("source").strip()
        g.expected = eq.group("expected").strip()
        g.arg = _source_name(source)
        is_global = source.startswith("G[")
        is_attr = "." in source.replace("L['", "").split("]", 1)[-1] if "]" in source else "." in source
        if is_global:
            g.kind = "global"
        elif "closure" in source or "__closure__" in source or "cell_contents" in source:
            g.kind = "closure"
        elif is_attr:
            g.kind = "attribute"
        else:
            g.kind = "int" if re.fullmatch(r"-?\d+", g.expected) else "value"
        return g
    return g


def _strip(v: str | None) -> str | None:
    return v.strip().rstrip(".") if v else v


def _source_name(source: str) -> str:
    s = source.strip()
    for prefix in ("L['", "G['"):
        if s.startswith(prefix):
            s = s[len(prefix) :]
            s = s.replace("']", "", 1)
    return s


def _split_entry(text: str) -> tuple[str, str]:
    m = re.match(r"^\s*(\d+/\d+|[\w!/]+/\d+): (.*)$", text, re.S)
    return (m.group(1), m.group(2)) if m else ("?", text)


def _reason(ev: TraceEvent, names: dict[str, str]) -> Reason:
    import json

    payload = ev.payload or ""
    try:
        value = json.loads(payload)
    except ValueError:
        value = payload
    items = value if isinstance(value, list) else [value]
    failures = []
    for item in items:
        entry, rest = _split_entry(str(item).split("\nUser stack trace:", 1)[0])
        # A reason may join several failures of one entry with "; ".
        failures.append(parse_failure(rest, entry))
    function = names.get(ev.compile_id or "") or names.get(f"frame:{ev.frame_id}")
    return Reason(compile_id=ev.compile_id, function=function, failures=failures, text=str(value))


# ---------------------------------------------------------------- calls


def _calls_from_capture(
    frame_calls: list[dict[str, Any]],
    checks: list[dict[str, Any]],
    reasons: list[Reason],
    guards: dict[str, dict[str, Any]],
) -> list[Call]:
    by_cid = {r.compile_id: r for r in reasons if r.compile_id}
    used: set[str] = set()
    pending_checks = list(checks)
    calls = []
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
                g.actual = ", ".join(f"{_source_name(k)}={v}" for k, v in actual.items())
    return failures


def _calls_from_trace(
    model: RunModel, reasons: list[Reason], names: dict[str, str], guards: dict[str, dict[str, Any]]
) -> list[Call]:
    """Without the live capture: one call per compile (first compile, recompile, refused)."""
    by_cid = {r.compile_id: r for r in reasons if r.compile_id}
    calls = []
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


def _guards_by_compile(events: list[TraceEvent]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for ev in events:
        if ev.name != "dynamo_cpp_guards_str" or not ev.compile_id:
            continue
        text = ev.payload or ""
        tensors, shape, values = [], [], []
        for line in text.splitlines():
            stripped = line.lstrip("| ")
            m = _TENSOR_MATCH.search(line)
            if m:
                loc = _COMMENT_LOC.search("# " + (m.group("comment") or ""))
                tensors.append(
                    {
                        "arg": _source_name(m.group("source")),
                        "dtype": m.group("dtype"),
                        "device": m.group("device"),
                        "requires_grad": m.group("grad") == "True",
                        "size": m.group("size"),
                        "file": loc.group("file") if loc else None,
                        "line": int(loc.group("line")) if loc else None,
                    }
                )
            elif line.startswith("+- LAMBDA_GUARD:"):
                shape.append(stripped.removeprefix("+- LAMBDA_GUARD:").split("  #", 1)[0].strip())
            elif "EQUALS_MATCH:" in line:
                values.append(stripped.split("EQUALS_MATCH:", 1)[1].split("  #", 1)[0].strip())
        out[ev.compile_id] = {"tensors": tensors, "shape": shape, "values": values}
    return out


def _promotions(events: list[TraceEvent]) -> dict[str, list[Promotion]]:
    out: dict[str, list[Promotion]] = {}
    by_symbol: dict[tuple[str, str], Promotion] = {}
    for ev in events:
        if not ev.compile_id or not isinstance(ev.body, dict):
            continue
        if ev.name == "create_symbol":
            source = str(ev.body.get("source", ""))
            m = _SIZE_SOURCE.search(source)
            p = Promotion(
                compile_id=ev.compile_id,
                source=source,
                arg=m.group("arg") if m else _source_name(source),
                dim=int(m.group("dim")) if m else None,
                symbol=str(ev.body.get("symbol")),
                value=str(ev.body.get("val")) if ev.body.get("val") is not None else None,
                range=str(ev.body.get("vr")) if ev.body.get("vr") is not None else None,
            )
            out.setdefault(ev.compile_id, []).append(p)
            by_symbol[(ev.compile_id, p.symbol)] = p
        elif ev.name in ("guard_added_fast", "guard_added"):
            expr = str(ev.body.get("expr", ""))
            stack = ev.body.get("user_stack") or []
            last = stack[-1] if stack and isinstance(stack[-1], dict) else {}
            for (cid, sym), p in by_symbol.items():
                if cid == ev.compile_id and re.search(rf"\b{re.escape(sym)}\b", expr):
                    p.guards.append({"expr": expr, "line": last.get("line"), "code": last.get("loc")})
    return out


def _entries(
    model: RunModel,
    calls: list[Call],
    names: dict[str, str],
    guards: dict[str, dict[str, Any]],
    promotions: dict[str, list[Promotion]],
    function: str | None,
) -> dict[str, list[Entry]]:
    entries: dict[str, list[Entry]] = {}
    index: dict[str, Entry] = {}
    for cid, comp in model.compiles.items():
        name = names.get(cid)
        if not name or comp.failed or (comp.graph_count == 0 and not guards.get(cid)):
            continue
        if function and not _matches(name, function):
            continue
        g = guards.get(cid, {})
        e = Entry(
            compile_id=cid,
            function=name,
            created_by=None,
            tensors=g.get("tensors", []),
            shape_guards=g.get("shape", [])[:6],
            value_guards=g.get("values", [])[:6],
            promotions=promotions.get(cid, []),
        )
        entries.setdefault(name, []).append(e)
        index[cid] = e
    for call in calls:
        e = index.get(call.entry or "")
        if e is None:
            continue
        if call.outcome in ("compile", "recompile"):
            e.created_by = call.index
        e.served.append(call.index)
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


# ---------------------------------------------------------------- causes and remedies


CAUSES = {
    "shape": "shape specialization",
    "dynamic_shape": "branch on a dynamic size",
    "stride": "stride/layout change",
    "dtype": "dtype change",
    "device": "device change",
    "requires_grad": "requires_grad change",
    "dispatch": "dispatch keys changed (device, requires_grad or a tensor subclass)",
    "global": "Python global value",
    "closure": "closure value",
    "attribute": "attribute value",
    "value": "Python value",
    "int": "integer specialization",
    "identity": "object identity (a module or tensor recreated)",
    "type": "type change",
    "global_state": "global state (grad mode, autocast, deterministic, torch function mode)",
    "aliasing": "input aliasing changed",
    "backend": "a different backend",
    "recompile_limit": "recompile limit",
    "other": "guard failure",
}


def _explain(call: Call, calls: list[Call], model: RunModel, limit: dict[str, Any]) -> None:
    if call.outcome == "eager":
        cfg = call.limit or limit
        if limit.get("hit") or call.failed_guards:
            call.cause = CAUSES["recompile_limit"]
            call.remedy = _limit_remedy(call, calls, cfg)
        else:
            call.cause = "not compiled (Dynamo skipped the frame or its compile failed)"
            call.remedy = f"Run `tcx explain` on this target to see why {call.function} was not compiled."
        return
    if call.outcome != "recompile" or not call.failed_guards:
        return
    g = call.failed_guards[0]
    call.cause = CAUSES.get(g.kind, CAUSES["other"])
    call.remedy = _remedy(call, g, calls, model)


def _where(g: FailedGuard) -> str:
    if g.file and g.line:
        return f" (guard from {g.file}:{g.line}{': ' + g.code if g.code else ''})"
    return ""


def _asked_static(model: RunModel) -> bool:
    return any(str(c.get("used", {}).get("dynamic")) == "False" for c in model.compile_calls)


def _promoted(call: Call, g: FailedGuard) -> bool:
    return any(p.arg == g.arg and p.dim == g.dim for p in call.promotions)


def _remedy(call: Call, g: FailedGuard, calls: list[Call], model: RunModel) -> str:
    fn = call.function
    if g.kind == "shape":
        seen = sorted({s for s in _dim_values(calls, fn, g.arg, g.dim)})
        values = f" (seen: {', '.join(map(str, seen))})" if len(seen) > 1 else ""
        if _asked_static(model):
            lead = " The program compiles with dynamic=False, so every new size compiles again: drop it, or"
        elif _promoted(call, g):
            lead = (
                " Dynamo then made it symbolic (automatic dynamic), so this recompile happens once; "
                "to avoid even that one,"
            )
        else:
            lead = ""
        return (
            f"Dimension {g.dim} of `{g.arg}` changes between calls{values}.{lead or ' To fix it,'} mark it "
            f"dynamic before the first call: torch._dynamo.mark_dynamic({g.arg}, {g.dim}) (or "
            f"maybe_mark_dynamic({g.arg}, {g.dim}) if it may stay static), or compile with dynamic=True."
        )
    if g.kind == "dynamic_shape":
        return (
            f"A Python branch on `{g.arg}.size({g.dim})`{_where(g)} compiles one entry per "
            "side; that is fine for a two-way branch. For one graph, make it branchless (torch.where) "
            "or use torch.cond."
        )
    if g.kind in ("dtype", "device"):
        return (
            f"`{g.arg}` arrives as {g.expected} and as {g.actual}: convert at the call site "
            f"({g.arg}.to(...)) so one entry serves, or accept one entry per {g.kind}."
        )
    if g.kind in ("requires_grad", "dispatch"):
        return (
            f"`{g.arg}` sometimes requires grad and sometimes not: training and evaluation get separate "
            "entries (fine if only two); run evaluation under torch.no_grad() or pass "
            f"{g.arg}.detach() if it never needs gradients."
        )
    if g.kind in ("global", "closure", "attribute", "value"):
        what = {"global": "global", "closure": "closure variable", "attribute": "attribute"}.get(
            g.kind, "value"
        )
        return (
            f"The {what} `{g.arg}` changed ({g.expected} -> {g.actual}){_where(g)}; Dynamo bakes Python "
            "values into "
            "the graph. Pass it as a tensor argument (torch.tensor(value)) or keep it constant."
        )
    if g.kind == "int":
        return (
            f"The Python int `{g.arg}` is specialized ({g.arg} == {g.expected}, now {g.actual}){_where(g)}. "
            "Pass it as a tensor, or let Dynamo make it symbolic: dynamic=True (or drop dynamic=False), "
            "torch._dynamo.mark_dynamic does not apply to ints."
        )
    if g.kind == "identity":
        return (
            f"`{g.arg}` is a new object on this call (recreated module or tensor): create it once and "
            "keep it alive, reusing it across calls."
        )
    if g.kind == "global_state":
        return (
            "Global state (grad mode, autocast, deterministic algorithms) differs from when the entry was "
            "compiled: call the compiled function under one consistent mode, or accept one entry per mode."
        )
    if g.kind == "type":
        return f"`{g.arg}` changed type between calls: pass the same type every time."
    return "See the failing guard; keep what it checks constant across calls."


def _limit_remedy(call: Call, calls: list[Call], cfg: dict[str, Any]) -> str:
    causes = [c.cause for c in calls if c.function == call.function and c.outcome == "recompile" and c.cause]
    top = max(set(causes), key=causes.count) if causes else None
    cfg_name = cfg.get("config") or "torch._dynamo.config.recompile_limit"
    value = cfg.get("limit")
    first = (
        f"fix the cause of the recompiles ({top}) — see the remedy on those calls"
        if top
        else "fix the recompiles"
    )
    return (
        f"{call.function} runs in eager Python from now on: {first}; "
        "torch.compiler.set_stance('eager_on_recompile') makes later misses run eager on purpose without "
        f"compiling; raising {cfg_name} (now {value}) is the last resort."
    )


def _dim_values(calls: list[Call], fn: str, arg: str | None, dim: int | None) -> list[int]:
    out = []
    for c in calls:
        if c.function != fn or not c.args or dim is None:
            continue
        for a in c.args:
            if a.get("name") == arg and a.get("kind") == "tensor" and dim < len(a.get("shape", [])):
                out.append(a["shape"][dim])
    return out


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
    from tcx.core.explain import backend_info, program_status

    m = rep.model
    return {
        "schema": SCHEMA,
        "tcx_version": __version__,
        "torch_version": m.torch_version,
        "target": m.target,
        "function": rep.function_filter,
        "backend": backend_info(m),
        "source": "live" if rep.live else m.source_kind,
        "note": None if rep.live else LIVE_ONLY_NOTE,
        "recompile_count": rep.recompile_count,
        "call_count": len(rep.calls) + rep.dropped,
        "calls_not_listed": rep.dropped,
        "call_count_exact": rep.dropped_exact,
        "outcomes": _outcome_counts(rep),
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
        "program": program_status(m),
        "problems": m.problems,
    }


def _outcome_counts(rep: RecompileReport) -> dict[str, int]:
    counts = {"compile": 0, "hit": 0, "recompile": 0, "eager": 0}
    for c in rep.calls:
        counts[c.outcome] = counts.get(c.outcome, 0) + 1
    counts["hit"] += rep.dropped
    return counts
