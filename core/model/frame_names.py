"""Frames named as the user knows them: a decorator's `wrapper` frame by the method it wraps.

A library decorator (transformers' `@can_return_tuple`, `@deprecate_kwarg` ...) makes Dynamo compile
its `wrapper`/`wrapped_func` frame, not `LlamaForCausalLM.forward`. The name comes from the guards
Dynamo put on that frame, never from a guess: the frame holds the function it calls in a closure
(a CLOSURE_MATCH/FUNCTION_MATCH guard on `L['func']`), the class from the TYPE_MATCH guard on its
`self` (or `args[0]`), the method from a guard on that function's `__name__` when Dynamo read it.
Pure and torch-free; live recordings only (a log's guard tree is not parsed for this): it reads the
model's live guard lists (core/model/guard_sets.py).
"""

from __future__ import annotations

import re

from tcx.core.model.facts import Compile
from tcx.core.model.guard_sets import Guard
from tcx.core.model.run import RunModel

_HELD = re.compile(r"^L\['(\w+)'\]$")
_SELF = ("L['self']", "L['args'][0]")
_CLASS = re.compile(r"type=<class '(?:[\w.]+\.)?(\w+)'>")


def decorated_names(model: RunModel) -> dict[str, str]:
    """Compile id -> `LlamaForCausalLM.forward (via wrapped_func)`, for each decorator frame whose
    guards say what it wraps (one pass over the recorded guard lists)."""
    out = {}
    for e in model.guard_sets.live:
        comp = model.compiles.get(e.compile_id or "")
        if comp is None or comp.is_resume:
            continue
        name = _wrapped(e.guards, comp.co_name or "?")
        if name:
            out[str(e.compile_id)] = name
    return out


def frame_name(comp: Compile | None, names: dict[str, str], fallback: str = "?") -> str:
    """The frame's display name, or what it wraps when its guards say so (`names`: decorated_names)."""
    if comp is None:
        return fallback
    return names.get(comp.compile_id) or comp.display_name


def _wrapped(guards: list[Guard], frame: str) -> str | None:
    held: set[str] = set()
    owner = method = None
    for g in guards:
        kind, source, text = g.kind, g.source, " ".join(g.text)
        m = _HELD.match(source)
        if m and kind in ("CLOSURE_MATCH", "FUNCTION_MATCH") and not m.group(1).startswith("__"):
            held.add(m.group(1))
        elif kind == "TYPE_MATCH" and source in _SELF and owner is None:
            found = _CLASS.search(text)
            owner = found.group(1) if found else None
    for g in guards:
        for var in held:
            if g.source == f"L['{var}'].__name__":
                found = re.search(r"== '(\w+)'", " ".join(g.text))
                method = found.group(1) if found else method
    if not held or owner is None:
        return None
    if method:
        return f"{owner}.{method} (via {frame})"
    return f"{frame} (around a {owner} method)"
