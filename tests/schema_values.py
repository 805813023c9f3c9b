"""Values the event schema admits (core/ingest/event_schema.py) at their extremes, put into real events.

A field the schema lets through reaches the model and every view, so every admitted value must
render: null where a field is nullable, integers of 400 digits, negatives, NaN and infinities
where a number is, empty and long strings, empty lists and objects. `with_extremes(event, kind)`
sets every field its spec names to one KIND of extreme at once; `with_one_extreme(event, rnd)`
sets one field, chosen at random, to one admitted value (the fuzz test's mutation).
"""

from __future__ import annotations

import random
from typing import Any

from tcx.core.ingest import event_schema as S

# One extreme per JSON type, per kind (fields of a type a kind does not name keep their values).
KINDS: dict[str, dict[type, Any]] = {
    "huge": {int: 10**400, float: 1e308, str: "x" * 400},
    "negative": {int: -(10**30), float: float("-inf"), str: ""},
    "minus_one": {int: -1, float: float("nan")},
    "zero": {int: 0, float: -0.0},
    "null": {},  # every nullable field null
    "empty": {},  # every list and object empty
}
# Admitted values per JSON type, for one field at a time.
SCALARS: dict[type, list[Any]] = {
    int: [0, -1, 10**400, -(10**30), 2**63],
    float: [float("nan"), float("inf"), float("-inf"), 1e308, -0.0, -2.5],
    str: ["", "x" * 5000, "\x1b[2J\x9b[red]x[/red]<b>y</b>", "\ud800", "0/0", "1/0"],
    bool: [True, False],
}


def _trace_key(md: dict[str, Any]) -> str | None:
    return next((k for k in md if k not in S.TRACE_CONTEXT.fields and k != "has_payload"), None)


def _specs(event: dict[str, Any]) -> list[tuple[list[str], S.Spec]]:
    """(path in the event, spec) of the parts of a recording event that the schema names."""
    kind = event.get("kind")
    if kind == "trace" and isinstance(event.get("md"), dict):
        out: list[tuple[list[str], S.Spec]] = [(["md"], S.TRACE_CONTEXT)]
        key = _trace_key(event["md"])
        if key in S.TRACE_BODIES:
            out.append((["md", key], S.TRACE_BODIES[key]))
        return out
    spec = S.RECORDER_EVENTS.get(kind) if isinstance(kind, str) else None
    return [([], S.Obj(**S.COMMON))] + ([([], spec)] if spec is not None else [])


def _get(value: Any, path: list[str]) -> Any:
    for part in path:
        value = value[part]
    return value


def _set(value: Any, path: list[str], new: Any) -> Any:
    if not path:
        return new
    return {**value, path[0]: _set(value[path[0]], path[1:], new)}


def with_extremes(event: dict[str, Any], kind: str) -> dict[str, Any]:
    """`event` with every field its spec names set to KINDS[kind]'s extreme (where it admits one)."""
    for path, spec in _specs(event):
        event = _set(event, path, _extreme(spec, _get(event, path), kind))
    return event


def _extreme(spec: S.Spec, value: Any, kind: str) -> Any:
    if isinstance(spec, S.Lazy):
        spec = spec.get()
    if isinstance(spec, S.Scalar):
        if kind == "null":
            return None if spec.nullable else value
        for t, new in KINDS[kind].items():
            if t in spec.types:
                return new
        return value
    if isinstance(spec, S.Obj) and isinstance(value, dict):
        return {k: _extreme(spec.fields[k], v, kind) if k in spec.fields else v for k, v in value.items()}
    if isinstance(spec, S.Seq) and isinstance(value, list):
        if kind == "empty":
            return []
        if kind == "null" and spec.nullable:
            return None
        return [_extreme(spec.item, v, kind) for v in value]
    if isinstance(spec, S.Map) and isinstance(value, dict):
        if kind == "empty":
            return {}
        return {k: _extreme(spec.value, v, kind) for k, v in value.items()}
    return value


def with_one_extreme(event: dict[str, Any], rnd: random.Random) -> dict[str, Any]:
    """`event` with one field its spec names (at any depth) set to a value the spec admits."""
    places: list[tuple[list[Any], S.Spec]] = []
    for path, spec in _specs(event):
        _places(spec, _get(event, path), path, places)
    if not places:
        return event
    path, spec = rnd.choice(places)
    return _set_any(event, path, admitted(spec, rnd))


def _places(spec: S.Spec, value: Any, path: list[Any], out: list[tuple[list[Any], S.Spec]]) -> None:
    if isinstance(spec, S.Lazy):
        spec = spec.get()
    if isinstance(spec, S.Obj) and isinstance(value, dict):
        for name, sub in spec.fields.items():
            out.append(([*path, name], sub))
            if name in value:
                _places(sub, value[name], [*path, name], out)
    elif isinstance(spec, S.Seq) and isinstance(value, list):
        for i, item in enumerate(value[:20]):
            out.append(([*path, i], spec.item))
            _places(spec.item, item, [*path, i], out)
    elif isinstance(spec, S.Map) and isinstance(value, dict):
        for key in list(value)[:20]:
            out.append(([*path, key], spec.value))


def _set_any(value: Any, path: list[Any], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, list):
        copy = list(value)
        copy[head] = _set_any(copy[head], rest, new)
        return copy
    copy = dict(value)
    copy[head] = _set_any(copy.get(head), rest, new) if rest else new
    return copy


def admitted(spec: S.Spec, rnd: random.Random, depth: int = 0) -> Any:
    """A value `spec` admits, drawn towards the extremes."""
    if isinstance(spec, S.Lazy):
        spec = spec.get()
    if isinstance(spec, S.Scalar):
        choices = [v for t in spec.types for v in SCALARS.get(t, [])] + ([None] if spec.nullable else [])
        return rnd.choice(choices or [None])
    if isinstance(spec, S.OneOf):
        return rnd.choice(sorted(spec.values))
    if isinstance(spec, S.Obj):
        if spec.nullable and rnd.random() < 0.3:
            return None
        names = [n for n in spec.fields if n in spec.required or rnd.random() < 0.5]
        return {n: admitted(spec.fields[n], rnd, depth + 1) for n in names} if depth < 3 else {}
    if isinstance(spec, S.Seq):
        if spec.nullable and rnd.random() < 0.3:
            return None
        count = 0 if depth >= 3 else rnd.choice([0, 1, 2])
        return [admitted(spec.item, rnd, depth + 1) for _ in range(count)]
    if isinstance(spec, S.Map):
        if spec.nullable and rnd.random() < 0.3:
            return None
        return {} if depth >= 3 else {"0/0": admitted(spec.value, rnd, depth + 1)}
    return None
