"""What torch's shape environment logged about each compile's sizes, from its structured trace.

- `create_symbol`: a size (or a Python int or float) became a symbol; the first source only, the
  others that share the symbol (duck sizing: equal sizes of different inputs get one symbol) are
  listed when the symbol is specialized;
- `symbolic_shape_specialization`: a symbol was replaced by a constant, with every source sharing
  it, torch's reason (e.g. `range_refined_to_singleton`) and the user line that forced it;
- `guard_added_fast`: the guard that forced it (e.g. `Eq(s11, 8)`), at that same user line;
- `describe_tensor` / `describe_source`: the dimensions the program marked with
  torch._dynamo.mark_dynamic (`dynamo_dynamic_indices`), read for one compile when asked.

Only the last attempt of a compile counts: an attempt that was restarted logged the same symbols
again. Pure and torch-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tcx.core.ingest.trace_events import Interner, TraceEvent
from tcx.core.model import RunModel
from tcx.core.torchtext import guards as guard_text

_EVENTS = frozenset({"create_symbol", "symbolic_shape_specialization", "guard_added_fast"})
_DESCRIBE = frozenset({"describe_tensor", "describe_source"})


@dataclass(frozen=True)
class UserLine:
    file: str | None
    line: int | None
    code: str

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "code": self.code}


@dataclass(frozen=True)
class Dim:
    """A size as the user names it: `x` dim 1 (`arg`, `dim`), or a scalar input (`dim` None)."""

    arg: str
    dim: int | None

    @property
    def text(self) -> str:
        return f"{self.arg}.size({self.dim})" if self.dim is not None else self.arg


_SIZE_SIDE = re.compile(r"(?P<src>\S+)\.size\(\)\[(?P<dim>\d+)\]")  # one side of a tie: `L['y'].size()[0]`


def dim_of(source: str) -> Dim:
    """`L['x'].size()[1]` -> x dim 1; `L['model'].norm_type` -> model.norm_type (a scalar)."""
    size = guard_text.size_source(source)
    return Dim(size[0], size[1]) if size else Dim(guard_text.source_name(source), None)


@dataclass
class Specialization:
    """A symbol torch replaced by a constant while compiling, and why."""

    compile_id: str
    symbol: str
    value: str
    dims: list[Dim]  # every source that shared the symbol (more than one: duck sizing)
    reason: str  # torch's words, e.g. range_refined_to_singleton
    guard: str | None  # the guard that forced it, e.g. Eq(s11, 8)
    at: UserLine | None

    def others(self, dim: Dim) -> list[Dim]:
        return [d for d in self.dims if d != dim]

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "symbol": self.symbol,
            "value": self.value,
            "sources": [d.text for d in self.dims],
            "reason": self.reason,
            "guard": self.guard,
            "at": self.at.to_json() if self.at else None,
        }


@dataclass
class CompileShapes:
    """One compile's (last attempt's) symbols and specializations."""

    symbols: dict[Dim, tuple[str, str]] = field(default_factory=dict)  # dim -> (symbol, value)
    specializations: list[Specialization] = field(default_factory=list)

    def specialization_of(self, dim: Dim) -> Specialization | None:
        return next((s for s in self.specializations if dim in s.dims), None)


def shape_facts(model: RunModel) -> dict[str, CompileShapes]:
    """compile id -> what its last attempt's shape environment logged."""
    events = model.documents.of(*_EVENTS)
    last_attempt: dict[str, int] = {}
    for ev in events:
        if ev.compile_id:
            last_attempt[ev.compile_id] = max(last_attempt.get(ev.compile_id, 0), ev.attempt)
    interner = model.interner
    out: dict[str, CompileShapes] = {}
    guards: dict[str, list[tuple[str, UserLine | None]]] = {}
    for ev in events:
        cid = ev.compile_id
        if not cid or ev.attempt != last_attempt.get(cid):
            continue
        body = ev.body
        facts = out.setdefault(cid, CompileShapes())
        if not isinstance(body, dict):
            continue
        if ev.name == "create_symbol":
            dim = dim_of(str(body.get("source", "")))
            facts.symbols.setdefault(dim, (str(body.get("symbol")), str(body.get("val"))))
        elif ev.name == "guard_added_fast":
            guards.setdefault(cid, []).append((str(body.get("expr", "")), _user_line(body, interner, ev)))
        elif ev.name == "symbolic_shape_specialization":
            symbol = str(body.get("symbol", ""))
            value = number_text(body.get("value"))
            guard = _forcing_guard(guards.get(cid, []), symbol, value)
            facts.specializations.append(
                Specialization(
                    compile_id=cid,
                    symbol=symbol,
                    value=value,
                    dims=[dim_of(str(s)) for s in body.get("sources") or []],
                    reason=str(body.get("reason") or "?"),
                    guard=guard[0] if guard else None,
                    at=_user_line(body, interner, ev) or (guard[1] if guard else None),
                )
            )
    return out


def marked_dynamic(model: RunModel, compile_id: str) -> set[Dim]:
    """The dimensions the program marked with torch._dynamo.mark_dynamic, as torch described the
    compile's input tensors (`dynamo_dynamic_indices`). Asked for one compile at a time: a large
    log keeps these records on disk."""
    described: dict[tuple[Any, Any, int], list[int]] = {}  # (describer, id, attempt) -> dims
    out: set[Dim] = set()
    for ev in model.documents.of(*_DESCRIBE):
        if ev.compile_id != compile_id:
            continue
        key = (ev.body_field("describer_id"), ev.body_field("id"), ev.attempt)
        if ev.name == "describe_tensor":
            dims = ev.body_field("dynamo_dynamic_indices")
            if isinstance(dims, list) and dims:
                described[key] = [d for d in dims if isinstance(d, int)]
        else:
            source = ev.body_field("source")
            for d in described.get(key, []) if isinstance(source, str) else []:
                out.add(Dim(guard_text.source_name(source), d))
    return out


def number_text(raw: Any) -> str:
    """torch writes `8` for ints and `2.00000000000000` for floats (sympy's repr)."""
    text = str(raw)
    if "." not in text:
        return text
    try:
        return repr(float(text))
    except ValueError:
        return text


def _forcing_guard(
    guards: list[tuple[str, UserLine | None]], symbol: str, value: str
) -> tuple[str, UserLine | None] | None:
    """The latest guard on `symbol` before its specialization: `Eq(s11, 8)` when torch added one."""
    mentions = re.compile(rf"\b{re.escape(symbol)}\b")
    exact = f"Eq({symbol}, {value})"
    for expr, at in reversed(guards):
        if expr == exact:
            return expr, at
    return next(((e, a) for e, a in reversed(guards) if mentions.search(e)), None)


def _user_line(body: dict[str, Any], interner: Interner, ev: TraceEvent) -> UserLine | None:
    stack = body.get("user_stack") or []
    last = stack[-1] if stack and isinstance(stack[-1], dict) else None
    if last is None:
        return None
    line = last.get("line")
    return UserLine(
        file=interner.file(last.get("filename"), ev.rank) if last.get("filename") is not None else None,
        line=line if isinstance(line, int) else None,
        code=str(last.get("loc") or ""),
    )


# an argument passed through the compiled frame's **kwargs (a decorator's wrapper around forward): the user's
# call passes it by keyword, and the fix capture marks the call's keyword argument
KEYWORD_ARG = re.compile(r"kwargs\['(\w+)'\]")


def mark_target(arg: str, user_names: dict[str, str] | None = None) -> str:
    """What a mark names for `arg` in the user's code: their own expression where their call passes it
    (`user_names`), the tensor passed by keyword for `kwargs['k']`, else the argument itself."""
    if user_names and arg in user_names:
        return user_names[arg]
    m = KEYWORD_ARG.fullmatch(arg)
    return f"<the tensor you pass as {m[1]}=>" if m else arg


def tied_sizes(dim: Dim, guards: list[str]) -> list[Dim]:
    """The argument sizes that guards of the form `L['y'].size()[0] == L['x'].size()[0]` tie to `dim`,
    followed from one tie to the next. Marking `dim` dynamic alone while a tied size stays static
    makes torch raise ConstraintViolationError, so a remedy marks them together."""
    pairs = []
    for guard in guards:
        sides = [_SIZE_SIDE.fullmatch(side.strip()) for side in guard.split(" == ")]
        if len(sides) == 2 and sides[0] and sides[1]:
            a, b = (Dim(guard_text.source_name(m["src"]), int(m["dim"])) for m in sides if m)
            pairs.append((a, b))
    tied, todo = [dim], [dim]
    while todo:
        d = todo.pop()
        for a, b in pairs:
            other = b if a == d else a if b == d else None
            if other is not None and other not in tied:
                tied.append(other)
                todo.append(other)
    # an argument the caller can mark: a parameter, or a keyword passed through the frame's **kwargs
    return [d for d in tied[1:] if d.arg.isidentifier() or KEYWORD_ARG.fullmatch(d.arg)]
