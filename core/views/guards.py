"""The guards view's facts: every cache entry of every compiled frame and what its guards protect.

Pure and torch-free. The guards come from the model's guard sets (core/model/guard_sets.py): a
live run's Dynamo guard lists (the ones compilation_metrics counts) and which entries were alive at
the end, or a TORCH_TRACE log's `dynamo_cpp_guards_str` trees, each parsed when the view reaches
it; this view groups them by what they protect.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tcx.core.ingest.lazy_items import LazyItems
from tcx.core.model import RunModel
from tcx.core.model.guard_sets import Guard, GuardTree, LiveGuardSet
from tcx.core.selection import Selection, whole_run
from tcx.core.torchtext.guards import tensor_match_text
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
    sets = model.guard_sets
    entries = [_live_entry(e, model, sets.alive) for e in sets.live]
    trees = [] if entries else sets.trees
    reason = None
    if not entries and not trees:
        reason = model.status.features.why("guards") or "no compiled frame produced guards in this run"

    entries = [e for e in entries if selection.includes(e.compile_id)]
    if trees:  # a log's guard trees, each parsed when the view reaches it
        trees = [t for t in trees if selection.includes(t.compile_id)]
        return GuardsView(model, selection, LazyItems(trees, lambda t: _tree_entry(t, model)), None)
    return GuardsView(model=model, selection=selection, entries=entries, unavailable=reason)


def _live_entry(e: LiveGuardSet, model: RunModel, alive: set[str] | None) -> Entry:
    comp = model.compiles.get(e.compile_id or "")
    return Entry(
        compile_id=e.compile_id,
        function=e.function,
        file=e.file,
        guards=e.guards,
        groups=group_guards(e.guards),
        torch_guard_count=comp.guard_count if comp else None,
        shape_relations=e.shape_relations,
        alive=None if alive is None else (e.compile_id or "") in alive,
        origin="live",
    )


def _tree_entry(tree: GuardTree, model: RunModel) -> Entry:
    guards = tree.guards()
    comp = model.compiles.get(tree.compile_id or "")
    relations = [g.text[0] for g in guards if g.kind == "SHAPE_ENV" and g.text]
    return Entry(
        compile_id=tree.compile_id,
        function=(comp.co_name if comp and comp.co_name else "?"),
        file=comp.co_filename if comp else None,
        guards=guards,
        groups=group_guards(guards),
        torch_guard_count=comp.guard_count if comp else None,
        shape_relations=relations,
        alive=None,
        origin="tree",
    )


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
