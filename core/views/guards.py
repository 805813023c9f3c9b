"""The guards view's facts: every cache entry of every compiled frame and what its guards protect.

Pure and torch-free. A live run records one `guards` event per new cache entry (Dynamo's
own guard list, the one compilation_metrics counts, with the guard tree's text) and a
`cache_entries` event per code object at the end. A TORCH_TRACE log has torch's
`dynamo_cpp_guards_str` tree instead: its leaves are parsed and grouped the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tcx.core.ingest.lazy_items import LazyItems
from tcx.core.model import RunModel
from tcx.core.selection import Selection, whole_run
from tcx.core.torchtext.guards import guard_tree_leaves, shape_guard_text, tensor_match_text
from tcx.core.torchtext.locations import guard_location
from tcx.core.views.envelope import envelope

SCHEMA = "tcx.guards/1"
_ROOT = re.compile(r"^(?P<scope>[LG])\[['\"](?P<name>[^'\"]+)['\"]\]")
STATE_KINDS = {
    "GRAD_MODE",
    "GLOBAL_STATE",
    "DETERMINISTIC_ALGORITHMS",
    "TORCH_FUNCTION_STATE",
    "TORCH_FUNCTION_MODE_STACK",
    "DEFAULT_DEVICE",
    "AUTOGRAD_SAVED_TENSORS_HOOKS",
    "LAMBDA_GUARD",
}
IDENTITY_KINDS = {"ID_MATCH", "MODULE_MATCH", "BUILTIN_MATCH", "CLASS_MATCH", "NN_MODULE", "FUNCTION_MATCH"}
# Guards torch adds to any nn.Module or import, whatever the program does: its bookkeeping, folded
# into one line by the text view (`--all-text` prints each). What each says, by kind.
INTERNAL_KINDS = {
    "EMPTY_NN_MODULE_HOOKS_DICT": "a module's hook dicts are empty",
    "NOT_PRESENT_IN_GENERIC_DICT": "a module attribute is not shadowed in its instance dict",
}
_MODULE_DICT = re.compile(r"\.(?:_modules|_parameters|_buffers|__dict__)$")
_DYNAMIC_MARKING = re.compile(r"hasattr\(.*'_dynamo_\w*'\)")
ORDER = ["input tensor", "local", "closure", "module/object", "global", "global state", "symbolic shapes"]


@dataclass
class Guard:
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


@dataclass
class Group:
    category: str
    subject: str
    guards: list[Guard] = field(default_factory=list)
    summary: str | None = None  # e.g. the tensor's dtype/shape/stride for an input


@dataclass
class Entry:
    compile_id: str | None
    function: str
    file: str | None
    guards: list[Guard]
    groups: list[Group]
    torch_guard_count: int | None
    shape_relations: list[str]
    alive: bool | None
    origin: str  # "live" (Dynamo's guard list) or "tree" (leaves of dynamo_cpp_guards_str)

    @property
    def guard_count(self) -> int:
        return len(self.guards)


@dataclass
class GuardsView:
    model: RunModel
    selection: Selection
    entries: Sequence[Entry]
    unavailable: str | None

    @property
    def entry_count(self) -> int:
        return len(self.entries)


def build_guards(model: RunModel, selection: Selection | None = None) -> GuardsView:
    selection = selection or whole_run(model)
    walks = model.captures.of("cache_entries")
    alive = {cid: True for e in walks for cid in e.get("compile_ids") or []}
    entries = [_live_entry(e, model, alive if walks else None) for e in model.captures.of("guards")]
    entries = [e for e in entries if e is not None]
    trees = [] if entries else model.documents.of("dynamo_cpp_guards_str")
    reason = None
    if not entries and not trees:
        reason = model.status.features.why("guards") or "no compiled frame produced guards in this run"

    entries = [e for e in entries if selection.includes(e.compile_id)]
    if trees:  # a log's guard trees, each parsed when the view reaches it
        trees = [ev for ev in trees if selection.includes(ev.compile_id)]
        return GuardsView(model, selection, LazyItems(trees, lambda ev: _tree_entry(ev, model)), None)
    return GuardsView(model=model, selection=selection, entries=entries, unavailable=reason)


def _live_entry(e: dict[str, Any], model: RunModel, alive: dict[str, bool] | None) -> Entry | None:
    if e.get("error"):
        return None
    guards = []
    for g in e.get("guards") or []:
        guards.append(
            Guard(
                kind=str(g.get("kind") or "?"),
                source=str(g.get("source") or ""),
                text=[str(t) for t in g.get("text") or []],
                file=g.get("file"),
                line=g.get("line"),
                code=str(g.get("code") or ""),
            )
        )
    relations = [shape_guard_text(s) for s in e.get("shape_env_guards") or []]
    cid = e.get("compile_id")
    comp = model.compiles.get(cid or "")
    return Entry(
        compile_id=cid,
        function=str(e.get("function") or "?"),
        file=e.get("file"),
        guards=guards,
        groups=group_guards(guards),
        torch_guard_count=comp.guard_count if comp else None,
        shape_relations=relations,
        alive=None if alive is None else bool(alive.get(cid or "")),
        origin="live",
    )


def _tree_entry(ev: Any, model: RunModel) -> Entry:
    guards = parse_guard_tree(ev.payload or "")
    comp = model.compiles.get(ev.compile_id or "")
    relations = [g.text[0] for g in guards if g.kind == "SHAPE_ENV" and g.text]
    return Entry(
        compile_id=ev.compile_id,
        function=(comp.co_name if comp and comp.co_name else "?"),
        file=comp.co_filename if comp else None,
        guards=guards,
        groups=group_guards(guards),
        torch_guard_count=comp.guard_count if comp else None,
        shape_relations=relations,
        alive=None,
        origin="tree",
    )


def parse_guard_tree(text: str) -> list[Guard]:
    """The leaves of torch's `TREE_GUARD_MANAGER` dump, each with the source of the manager above it."""
    guards: list[Guard] = []
    for leaf in guard_tree_leaves(text):
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


def classify(g: Guard, tensor_sources: set[str]) -> tuple[str, str]:
    """(category, subject) of what a guard protects."""
    if g.kind == "SHAPE_ENV":
        return "symbolic shapes", ""
    if not g.source or (g.kind in STATE_KINDS and not g.source.startswith(("L[", "G["))):
        return "global state", ""
    m = _ROOT.match(g.source)
    if not m:
        return "global state" if g.kind in STATE_KINDS else "module/object", g.source
    scope, name = m.group("scope"), m.group("name")
    root = m.group(0)
    if "__closure__" in g.source or "cell_contents" in g.source:
        return "closure", name
    if scope == "L":
        if root in tensor_sources:
            return "input tensor", name
        if name == "self" or g.kind in IDENTITY_KINDS or "." in g.source[len(root) :]:
            return "module/object", name
        return "local", name
    return "global", name


def internal(g: Guard) -> str | None:
    """What a torch-internal guard checks, or None for a guard about the program's own values:
    module bookkeeping (hook dicts, instance dicts, the type of `_modules`), dynamic-shape marking
    (`hasattr(x, '_dynamo_dynamic_indices') == False`) and the identity of objects reached through
    an imported module (`G['__import_transformers...'].torch.Tensor is G[...]`)."""
    if g.kind in INTERNAL_KINDS:
        return INTERNAL_KINDS[g.kind]
    body = " ".join(g.text)
    if "DYNAMIC_MARKING" in g.kind or (g.text and all(map(dynamic_marking, g.text))):
        return DYNAMIC_MARKING
    if g.kind == "TYPE_MATCH" and _MODULE_DICT.search(g.source):
        return "a module's _modules/_parameters/_buffers are dicts"
    if g.kind in IDENTITY_KINDS and (g.source.startswith("G['__import_") or " is G[" in body):
        return "an object reached through an imported module is the one it was"
    return None


DYNAMIC_MARKING = "a tensor is not marked dynamic (hasattr(..., '_dynamo_*_indices') == False)"


def dynamic_marking(text: str) -> bool:
    """A check that a tensor was not marked dynamic (`torch._dynamo.mark_dynamic` and kin)."""
    return bool(_DYNAMIC_MARKING.search(text))


def group_guards(guards: list[Guard]) -> list[Group]:
    tensor_sources = {g.source for g in guards if g.kind == "TENSOR_MATCH"}
    groups: dict[tuple[str, str], Group] = {}
    for g in guards:
        key = classify(g, tensor_sources)
        group = groups.setdefault(key, Group(category=key[0], subject=key[1]))
        group.guards.append(g)
        # The header describes the group's own tensor: an input's. A module's group holds its
        # parameters' and buffers' guards, each on its own row; one of them is not the module.
        if g.kind == "TENSOR_MATCH" and group.summary is None and key[0] == "input tensor":
            group.summary = next((s for s in map(tensor_match_text, g.text) if s), None)
    for group in groups.values():
        tensors = sum(1 for g in group.guards if g.kind == "TENSOR_MATCH")
        if group.summary is None and group.category != "input tensor" and tensors:
            group.summary = f"({tensors} of its tensor{'s' if tensors != 1 else ''} guarded below)"
    return sorted(
        groups.values(),
        key=lambda gr: (ORDER.index(gr.category) if gr.category in ORDER else len(ORDER), gr.subject),
    )


def to_json(view: GuardsView) -> dict[str, Any]:
    return {
        **envelope(SCHEMA, view.model, view.selection),
        "unavailable_reason": view.unavailable,
        "entry_count": view.entry_count,
        "entries": [_entry_json(e) for e in view.entries],
    }


def _entry_json(e: Entry) -> dict[str, Any]:
    return {
        "compile_id": e.compile_id,
        "function": e.function,
        "file": e.file,
        "guard_count": e.guard_count,
        "torch_guard_count": e.torch_guard_count,
        "counted_as": "dynamo guards" if e.origin == "live" else "guard tree leaves",
        "alive_at_end": e.alive,
        "shape_relations": e.shape_relations,
        "groups": [
            {
                "category": g.category,
                "subject": g.subject,
                "summary": g.summary,
                "guards": [x.to_json() for x in g.guards],
            }
            for g in e.groups
        ],
        "guards": [g.to_json() for g in e.guards],
    }
