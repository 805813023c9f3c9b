"""Compile-cache lookups: each FX graph and AOTAutograd cache lookup torch logged, read once.

torch logs one `artifact:fx_graph_cache_{hit,miss,bypass}` (or `aotautograd_cache_*`, `*_bundled_*`)
per lookup, its payload the key's parts, torch's detailed status, the bypass reason and the time
saved or taken; and `aotautograd_cache_pickle_failure` when it could not store the entry it missed.
The model parses each payload once; the cache view (`tcx cache`) and the run facts' counts (`tcx
diff`, baselines) read the same lookups, the view adding what needs the analyses (restarts).
What torch counted per compile in compilation_metrics (remote-cache hits and misses, whether its
compiler config disabled the caches) is read here too (`CacheMetrics`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tcx.core.ingest.trace_events import TraceEvent
from tcx.core.torchtext.cache_key import Component, parse_components
from tcx.core.torchtext.json_object import json_object

_ARTIFACT = re.compile(r"^artifact:(?P<cache>fx_graph|aotautograd)(?:_bundled)?_cache_(?P<state>[a-z]+)$")
_PICKLE_FAILURE = "artifact:aotautograd_cache_pickle_failure"
CACHE_ARTIFACTS = ("artifact:fx_graph*_cache_*", "artifact:aotautograd*_cache_*")  # the pickle failure too


@dataclass
class CacheLookup:
    """One lookup torch reported: a cache, a compile id (and its attempt), and what happened."""

    cache: str  # fx_graph | aotautograd
    state: str  # hit | miss | bypass | disabled
    compile_id: str | None
    graph: str | None  # forward | backward | inference (the FX graph cache), from the key's parts
    key: str | None
    detail: str | None  # torch's cache_status_detailed: full_miss, guard_miss, hit
    reason: str | None  # the bypass reason
    guard_expr: str | None  # the stored entry's shape guards (a guard_miss)
    time_saved_s: float | None
    time_taken_s: float | None
    components: dict[str, Component]
    not_stored: str | None = None  # torch could not save the entry (a pickling failure)
    attempt: int = 0


def read_cache_lookups(events: Iterable[TraceEvent]) -> list[CacheLookup]:
    """Every lookup in log order (`events`: the run's CACHE_ARTIFACTS)."""
    lookups: list[CacheLookup] = []
    seen: dict[str, tuple[str, Component] | None] = {}
    for ev in events:
        if ev.name == _PICKLE_FAILURE:
            _mark_not_stored(lookups, ev.compile_id, json_object(ev.payload))
            continue
        m = _ARTIFACT.match(ev.name)
        if m:
            body = json_object(ev.payload)
            lookups.append(_lookup(m["cache"], m["state"], ev.compile_id, ev.attempt, body, seen))
    return lookups


@dataclass(frozen=True)
class CacheMetrics:
    """One compilation_metrics record's cache facts."""

    compile_id: str | None
    remote: dict[tuple[str, str], int]  # (fx_graph | aotautograd, hit | miss) -> the count, when not 0
    caches_disabled: bool | None  # torch's compiler config's force_disable_caches; None: it does not say


_REMOTE = (("fx_graph", "inductor_fx"), ("aotautograd", "aotautograd"))


def read_cache_metrics(events: Iterable[TraceEvent]) -> list[CacheMetrics]:
    """The cache facts of each compilation_metrics record (one whose body is not an object: none)."""
    out = []
    for ev in events:
        body = ev.body
        if not isinstance(body, dict):
            continue
        remote = {}
        for cache, prefix in _REMOTE:
            for state in ("hit", "miss"):
                value = body.get(f"{prefix}_remote_cache_{state}_count")
                if isinstance(value, int) and value:
                    remote[(cache, state)] = value
        config = json_object(body["compiler_config"] if isinstance(body.get("compiler_config"), str) else "")
        disabled = bool(config["force_disable_caches"]) if "force_disable_caches" in config else None
        out.append(CacheMetrics(ev.compile_id, remote, disabled))
    return out


def _lookup(
    cache: str,
    state: str,
    compile_id: str | None,
    attempt: int,
    info: dict[str, Any],
    seen: dict[str, tuple[str, Component] | None],
) -> CacheLookup:
    parts = _components(info.get("components") or [], seen)
    saved = info.get("time_saved_ns")
    saved_s = saved / 1e9 if isinstance(saved, (int, float)) else None
    if saved_s is None and isinstance(info.get("time_saved_ms"), (int, float)):
        saved_s = info["time_saved_ms"] / 1e3
    taken = info.get("time_taken_ns")
    return CacheLookup(
        cache=cache,
        state=state,
        compile_id=compile_id,
        graph=_graph_kind(parts) if cache == "fx_graph" else None,
        key=_str(info.get("key")),
        detail=_str(info.get("cache_status_detailed")),
        reason=_str(info.get("cache_bypass_reason")),
        guard_expr=_str(info.get("cache_status_guard_expr")),
        time_saved_s=None if saved_s is None else round(saved_s, 3),
        time_taken_s=round(taken / 1e9, 3) if isinstance(taken, (int, float)) else None,
        components=parts,
        attempt=attempt,
    )


def _components(lines: list[object], seen: dict[str, tuple[str, Component] | None]) -> dict[str, Component]:
    """The key's parts, each distinct part parsed once for the whole run (`seen`: `[DIGEST] NAME`
    -> the part). A job's lookups repeat the same few hundred parts (every Inductor config value,
    the versions) in every key: parsed per lookup, they were most of a report's memory on a large
    log (255,000 parts, 33 MB of 77 on a 77 MB log). The digest is the value's own hash, so one
    digest and name is one value."""
    out: dict[str, Component] = {}
    for line in lines:
        if not isinstance(line, str):
            continue
        head = line.partition(":")[0]
        if head not in seen:
            seen[head] = next(iter(parse_components([line]).items()), None)
        part = seen[head]
        if part is not None:
            out[part[0]] = part[1]
    return out


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _graph_kind(parts: dict[str, Component]) -> str | None:
    def flag(name: str) -> bool | None:
        part = parts.get(f"fx_kwargs[{name}]")
        return None if part is None or part.value is None else part.value.strip() == "True"

    if flag("is_backward"):
        return "backward"
    if flag("is_inference"):
        return "inference"
    return "forward" if flag("is_backward") is False else None


def _mark_not_stored(lookups: list[CacheLookup], compile_id: str | None, info: dict[str, Any]) -> None:
    """torch could not pickle the AOTAutograd entry it was about to store (after its miss)."""
    for lookup in reversed(lookups):
        if lookup.compile_id == compile_id and lookup.cache == "aotautograd" and lookup.state == "miss":
            what = f"field {info['field']}" if info.get("field") else "the entry"
            lookup.not_stored = f"torch could not pickle {what}: {info.get('error') or '?'}"
            return
