"""Guard sets per compile: what each cache entry's guards check, read by one parser for every view.

A live run records one `guards` capture per new cache entry (Dynamo's own guard list, each guard's
kind, source, text and user location) and a `cache_entries` walk per code object at the end (the
entries still alive). A TORCH_TRACE log has torch's `dynamo_cpp_guards_str` tree per compile
instead: its leaves are read here, from the payload the model keeps, when a view asks (never at
build, so a view over a large log prints its first compile before it parses the next).

The guards view lists each guard (`GuardTree.guards`), the recompiles view compares entries by their
tensors, shape and value guards and global state (`GuardTree.summary`), the ranks view compares
trees across processes (`GuardTree.fingerprint`): the same leaves, parsed by `guard_tree_leaves`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tcx.core.ingest.trace_events import TraceEvent
from tcx.core.torchtext import guards as guard_text
from tcx.core.torchtext.locations import guard_location

# Object ids and addresses differ between processes even when the guards mean the same thing.
_PROCESS_SPECIFIC = re.compile(r"\b0x[0-9a-fA-F]+\b|\b\d{6,}\b")


@dataclass
class Guard:
    """One guard: its kind (TENSOR_MATCH, SHAPE_ENV ...), the source it reads, its text and the
    user line that made it."""

    kind: str
    source: str
    text: list[str]
    file: str | None = None
    line: int | None = None
    code: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source": self.source,
            "text": self.text,
            "file": self.file,
            "line": self.line,
            "code": self.code,
        }


@dataclass(frozen=True)
class GuardedTensor:
    """A TENSOR_MATCH guard's tensor: `arg` as the user names it, `size` as torch prints it."""

    arg: str
    dtype: str
    device: str
    requires_grad: bool
    size: str
    file: str | None
    line: int | None


@dataclass
class GuardSummary:
    """What a recompile compares between two entries of one frame."""

    tensors: list[GuardedTensor] = field(default_factory=list)
    shape: list[str] = field(default_factory=list)  # the symbolic-shape guards (top-level lambdas)
    values: list[str] = field(default_factory=list)  # EQUALS_MATCH guards
    state: dict[str, str] = field(default_factory=dict)  # the global-state guard's values (grad_mode ...)


@dataclass
class LiveGuardSet:
    """A live run's guard list of one new cache entry, as Dynamo built it."""

    compile_id: str | None
    function: str
    file: str | None
    guards: list[Guard]
    shape_relations: list[str]  # the shape environment's guards, each with the user line


class GuardTree:
    """One compile's `dynamo_cpp_guards_str` tree; its payload is read from the log when asked."""

    def __init__(self, event: TraceEvent) -> None:
        self._event = event

    @property
    def compile_id(self) -> str | None:
        return self._event.compile_id

    @property
    def text(self) -> str:
        return self._event.payload or ""

    def guards(self) -> list[Guard]:
        """Every leaf, with the source of the manager above it (parsed anew each call: a view that
        lists them keeps what it needs, the model keeps only the payload's reference)."""
        return parse_guard_tree(self.text)

    @functools.cached_property
    def summary(self) -> GuardSummary:
        out = GuardSummary()
        for leaf in guard_text.guard_tree_leaves(self.text):
            if leaf.kind in ("GLOBAL_STATE", "GRAD_MODE"):
                out.state.update(_global_state(leaf.kind, leaf.text))
                continue
            check = guard_text.parse_check_tensor(leaf.text) if leaf.kind == "TENSOR_MATCH" else None
            if check:
                loc = guard_location(leaf.text)
                out.tensors.append(
                    GuardedTensor(
                        arg=guard_text.source_name(check.source),
                        dtype=check.dtype,
                        device=check.device,
                        requires_grad=check.requires_grad,
                        size=check.size,
                        file=loc.file if loc else None,
                        line=loc.line if loc else None,
                    )
                )
            elif leaf.kind == "LAMBDA_GUARD" and leaf.depth == 0:  # symbolic-shape guards
                out.shape.append(guard_text.guard_code(leaf.text))
            elif leaf.kind == "EQUALS_MATCH":
                out.values.append(guard_text.guard_code(leaf.text))
        return out

    @functools.cached_property
    def fingerprint(self) -> str:
        """Same guards, same fingerprint, across processes: ids, addresses, timings and the order in
        which a process happened to build the tree are left out."""
        lines = sorted(
            _PROCESS_SPECIFIC.sub("#", ln.strip())
            for ln in self.text.splitlines()
            if ln.strip() and "Guard latency" not in ln
        )
        return hashlib.sha1("\n".join(lines).encode()).hexdigest()[:12]


@dataclass
class GuardSets:
    """Every compile's guards: a live run's lists, or a log's trees (a live run has both when torch's
    trace was on; the views prefer the lists)."""

    live: list[LiveGuardSet]
    alive: set[str] | None  # the compile ids whose entries were alive at the end (None: not walked)
    trees: list[GuardTree]

    @functools.cached_property
    def tree_by_compile(self) -> dict[str, GuardTree]:
        """Each compile id's tree (the last one logged, should torch log one twice)."""
        return {t.compile_id: t for t in self.trees if t.compile_id}


def build_guard_sets(
    trees: Iterable[TraceEvent], lists: Iterable[dict[str, Any]], walks: list[dict[str, Any]]
) -> GuardSets:
    """The model's guard sets from its `dynamo_cpp_guards_str` events and the recorder's `guards`
    and `cache_entries` captures (a list that failed to be read, `error`, is left out)."""
    alive = {str(cid) for w in walks for cid in w.get("compile_ids") or []} if walks else None
    live = [_live(e) for e in lists if not e.get("error")]
    return GuardSets(live=live, alive=alive, trees=[GuardTree(ev) for ev in trees])


def _live(e: dict[str, Any]) -> LiveGuardSet:
    guards = [
        Guard(
            kind=str(g.get("kind") or "?"),
            source=str(g.get("source") or ""),
            text=[str(t) for t in g.get("text") or []],
            file=g.get("file"),
            line=g.get("line"),
            code=str(g.get("code") or ""),
        )
        for g in e.get("guards") or []
    ]
    return LiveGuardSet(
        compile_id=e.get("compile_id"),
        function=str(e.get("function") or "?"),
        file=e.get("file"),
        guards=guards,
        shape_relations=[guard_text.shape_guard_text(s) for s in e.get("shape_env_guards") or []],
    )


def parse_guard_tree(text: str) -> list[Guard]:
    """The leaves of torch's `TREE_GUARD_MANAGER` dump, each with the source of the manager above it."""
    guards: list[Guard] = []
    for leaf in guard_text.guard_tree_leaves(text):
        kind, body = leaf.kind, leaf.text
        if kind == "LAMBDA_GUARD" and ("<=" in body or ">=" in body or " < " in body or " > " in body):
            kind = "SHAPE_ENV" if "size()" in body or "stride()" in body else kind
        guards.append(_with_location(Guard(kind=kind, source=leaf.source, text=[body.strip()])))
    return guards


def _with_location(g: Guard) -> Guard:
    for t in g.text:
        loc = guard_location(t)
        if loc:
            g.file, g.line, g.code = loc.file, loc.line, loc.code
            break
    return g


def _global_state(kind: str, text: str) -> dict[str, str]:
    """`___check_global_state() against {"grad_mode":false,...}` -> {"grad_mode": "false", ...};
    an older torch's `GRAD_MODE: ...` guard holds grad mode alone."""
    if kind == "GRAD_MODE":
        return {"grad_mode": guard_text.guard_code(text)}
    _, sep, rest = text.partition(" against ")
    try:
        values = json.loads(rest.split("  #", 1)[0]) if sep else None
    except ValueError:
        return {}
    if not isinstance(values, dict):
        return {}
    return {str(k): json.dumps(v, separators=(",", ":")) for k, v in values.items()}
