"""What `tcx browse` shows: the run as a tree of items and the links between them.

Frames → compile ids → stages (recompile, Dynamo graph, graph breaks, guards, AOT graphs,
fusion, kernels, wrapper) → breaks, guards, kernels → ATen ops and user lines. Each item says
what the detail pane shows for it: a registered view (core/views/registry.py) built on a selection
narrowed to its compile ids, or the source around a user line. Every fact comes from the
views' own typed results, built once through the registry.

Pure: no textual, no torch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tcx.core.model import Compile, Frame, GraphBreak, RunModel
from tcx.core.selection import Selection
from tcx.core.views.registry import get
from tcx.renderers.guard_text import dotted
from tcx.renderers.header import short_path
from tcx.renderers.safe import clean

T = TypeVar("T")
AOT_KINDS = ("joint", "forward", "backward", "inference")
TENSOR_FAILURES = {"shape", "dynamic_shape", "dtype", "device", "requires_grad", "stride"}
_BARE_SOURCE = re.compile(r"""[LG]\[['"]([^'"]+)['"]\]""")  # L['x'] -> x, as recompile reasons write it


@dataclass(frozen=True)
class Detail:
    """What the detail pane renders for an item.

    `view` names a registered view (or "source": a user line in the recording's own copy of
    the file). The view is built on the Selection of `compile_ids` (empty: the browse's whole
    selection), `site` (one break site's key) and `kernel` (one kernel's name), with `build`
    options, and rendered with `render` options.
    `anchor`: a regular expression (MULTILINE); the detail scrolls to the line where its `nth`
    match starts, and marks it."""

    view: str
    compile_ids: tuple[str, ...] = ()
    build: tuple[tuple[str, Any], ...] = ()
    render: tuple[tuple[str, Any], ...] = ()
    site: tuple[str, str | None, int | None] | None = None
    kernel: str | None = None
    anchor: str = ""
    nth: int = 0
    file: str | None = None
    line: int | None = None


@dataclass
class Link:
    label: str
    target: str  # an item key


@dataclass
class Item:
    key: str
    kind: str  # run, frame, compile, stage, recompile, break, guard, kernel, op, line
    label: str
    detail: Detail
    parent: str | None = None
    children: list[str] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    search: str = ""  # what `/` matches (lower case); empty: not searchable


@dataclass
class Index:
    items: dict[str, Item]
    root: str
    order: list[str] = field(default_factory=list)  # depth-first, the tree's reading order

    def __post_init__(self) -> None:
        self.order = list(self._walk(self.root))
        self._pos = {k: i for i, k in enumerate(self.order)}

    def _walk(self, key: str) -> Iterator[str]:
        stack = [key]
        while stack:
            k = stack.pop()
            yield k
            stack.extend(reversed(self.items[k].children))

    def path(self, key: str) -> list[str]:
        """The keys from the root down to `key`."""
        out = []
        k: str | None = key
        while k is not None:
            out.append(k)
            k = self.items[k].parent
        return out[::-1]

    def of_kind(self, kind: str) -> list[str]:
        return [k for k in self.order if self.items[k].kind == kind]

    def matches(self, query: str) -> list[str]:
        q = query.strip().lower()
        return [k for k in self.order if q and q in self.items[k].search] if q else []

    def next_of(self, keys: list[str], current: str | None, backwards: bool = False) -> str | None:
        """The first of `keys` after `current` in reading order (before, `backwards`), wrapping."""
        if not keys:
            return None
        here = self._pos.get(current or "", -1)
        if backwards:
            earlier = [k for k in keys if self._pos[k] < here]
            return earlier[-1] if earlier else keys[-1]
        later = [k for k in keys if self._pos[k] > here]
        return later[0] if later else keys[0]


class _Builder:
    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        self.guard_code: dict[str, list[str]] = {}  # guard item -> its code, sources written bare

    def add(self, item: Item) -> Item:
        if item.key in self.items:  # the same name twice (e.g. two ops alike): keep the first
            return self.items[item.key]
        self.items[item.key] = item
        if item.parent is not None:
            self.items[item.parent].children.append(item.key)
        return item


def build_index(model: RunModel, selection: Selection) -> Index:
    """Every item of the run within `selection`, built from the registered views' results."""
    explanation = get("explain").builder()(model, selection)
    recompiles = get("recompiles").builder()(model, selection)
    guards = get("guards").builder()(model, selection)
    codegen = get("codegen").builder()(model, selection)
    b = _Builder()
    compiles: dict[str, Compile] = explanation.compiles
    graphs = _graph_kinds(model, compiles)
    fusion = {str(g.compile_id) for g in model.fusion if not g.preview}
    breaks = [o for s in explanation.sites for o in zip(s.occurrences, s.regions, strict=True)]
    root = b.add(
        Item(
            "run",
            "run",
            _run_label(model, len(compiles), len(breaks), codegen.kernel_count),
            Detail("explain"),
        )
    )
    for frame, members in _frames(compiles).items():
        first = members[0]
        where = f"  {_short(first.co_filename)}:{first.co_firstlineno}" if first.co_filename else ""
        b.add(
            Item(
                f"frame {frame}",
                "frame",
                f"{first.display_name}{where}  ({len(members)} compile{'s' if len(members) != 1 else ''})",
                Detail("explain"),  # filled below, once its compiles are known
                parent=root.key,
                search=_search(first.co_name, first.display_name, first.co_filename),
            )
        )
    # the compile each break resumed in, as explain names it (core/views/explain.py _ResumeCompiles)
    resume_of = {
        id(brk): region["resumed_in"] if region.get("resumed_in") not in (None, "eager") else None
        for brk, region in breaks
    }
    per = _PerCompile(breaks, guards.entries, codegen, recompiles)
    for cid, comp in compiles.items():
        own = per.breaks.get(cid, [])
        b.add(
            Item(
                f"compile {cid}",
                "compile",
                _compile_label(comp, len(own), len(per.kernels.get(cid, []))),
                Detail("explain", (cid,)),
                parent=f"frame {_frame_of(cid)}",
                search=_search(cid, comp.co_name, comp.display_name),
            )
        )
        _stages(b, comp, per, resume_of, graphs.get(cid, set()), cid in fusion)
    for item in b.items.values():
        if item.kind == "frame":  # its compiles
            item.detail = Detail("explain", tuple(k.split(" ", 1)[1] for k in item.children))
    _link_recompiles(b, recompiles)
    return Index(b.items, root.key)


class _PerCompile:
    """The views' facts grouped by compile id (each list in the view's order)."""

    def __init__(
        self,
        breaks: list[tuple[GraphBreak, dict[str, Any]]],
        entries: list[Any],
        codegen: Any,
        recompiles: Any,
    ) -> None:
        self.breaks = _by_compile(breaks, lambda pair: pair[0].compile_id)
        self.entries = _by_compile(entries, lambda e: e.compile_id)
        self.kernels = _by_compile(codegen.kernels, lambda k: k.compile_id)
        self.wrappers = _by_compile(codegen.wrappers, lambda w: w.compile_id)
        self.reasons = _by_compile(recompiles.reasons, lambda r: r.compile_id)
        self.calls = _by_compile(
            [c for c in recompiles.calls if c.outcome != "compile"], lambda c: c.compile_id
        )


def _by_compile(values: Iterable[T], cid: Callable[[T], str | None]) -> dict[str | None, list[T]]:
    out: dict[str | None, list[T]] = {}
    for v in values:
        out.setdefault(cid(v), []).append(v)
    return out


def _stages(
    b: _Builder,
    comp: Compile,
    per: _PerCompile,
    resume_of: dict[int, str | None],
    graphs: set[str],
    fused: bool,
) -> None:
    cid = comp.compile_id
    parent = f"compile {cid}"
    reason = (per.reasons.get(cid) or [None])[0]
    if reason is not None or comp.recompile_reason:
        call = (per.calls.get(cid) or [None])[0]
        failures = reason.failures if reason else []
        cause = (
            (call.cause if call else None)
            or (f"{failures[0].entry}: {_first_line(failures[0].guard)}" if failures else None)
            or _first_line(comp.recompile_reason or "")
        )
        b.add(
            Item(
                f"{parent}/recompile",
                "recompile",
                f"recompile: {_cut(cause.split('  #', 1)[0].strip(), 90)}",
                Detail("recompiles", (cid,)),
                parent=parent,
                search=_search(cause, reason.text if reason else comp.recompile_reason),
            )
        )
    if "dynamo" in graphs:
        b.add(
            Item(
                f"{parent}/dynamo",
                "stage",
                f"Dynamo graph ({comp.graph_op_count} ops)" if comp.graph_op_count else "Dynamo graph",
                Detail("graphs", (cid,), render=(("show", ("dynamo",)),)),
                parent=parent,
            )
        )
    own = per.breaks.get(cid, [])
    if own:
        _breaks(b, parent, cid, own, resume_of)
    entries = per.entries.get(cid, [])
    if entries:
        _guards(b, parent, cid, entries)
    aot = tuple(k for k in AOT_KINDS if k in graphs)
    if aot:
        b.add(
            Item(
                f"{parent}/aot",
                "stage",
                "AOT graphs (" + ", ".join(aot) + ")",
                Detail("graphs", (cid,), render=(("show", aot),)),
                parent=parent,
            )
        )
    if fused:
        b.add(Item(f"{parent}/fusion", "stage", "fusion", Detail("fusion", (cid,)), parent=parent))
    kernels = per.kernels.get(cid, [])
    if kernels:
        _kernels(b, parent, cid, kernels, graphs)
    for w in per.wrappers.get(cid, []):
        b.add(
            Item(
                f"{parent}/wrapper/{w.graph}",
                "stage",
                f"wrapper call() ({w.graph}, {len(w.launches)} launch{'es' if len(w.launches) != 1 else ''})",
                Detail(
                    "codegen",
                    (cid,),
                    build=(("graph", w.graph),),
                    render=(("lifetimes", True),),
                    anchor=wrapped("wrapper call(), annotated"),
                ),
                parent=parent,
            )
        )


def _breaks(
    b: _Builder,
    parent: str,
    cid: str,
    own: list[tuple[GraphBreak, dict[str, Any]]],
    resume_of: dict[int, str | None],
) -> None:
    stage = b.add(
        Item(
            f"{parent}/breaks",
            "stage",
            f"graph breaks ({len(own)})",
            Detail("explain", (cid,)),
            parent=parent,
        )
    )
    for i, (brk, region) in enumerate(own):
        resume = resume_of[id(brk)]
        key = f"{stage.key}/{i}"
        where = f"{_short(brk.file)}:{brk.line}" if brk.file else "?"
        item = b.add(
            Item(
                key,
                "break",
                f"{brk.gb_type} at {where}",
                Detail("explain", (cid,), site=brk.key),
                parent=stage.key,
                search=_search(brk.gb_type, brk.gb_id, brk.explanation, *(f.name for f in brk.user_stack)),
            )
        )
        if resume:
            item.links.append(Link(f"resumes in compile {resume}", f"compile {resume}"))
        elif region.get("resumed_in") == "eager":
            item.label += "  (the frame runs in eager Python)"
        for j, fr in enumerate(reversed(brk.user_stack)):
            line = _line_item(b, f"{key}/line/{j}", key, fr)
            item.links.append(Link(line.label, line.key))


def _guards(b: _Builder, parent: str, cid: str, entries: list[Any]) -> None:
    count = sum(e.guard_count for e in entries)
    stage = b.add(
        Item(
            f"{parent}/guards",
            "stage",
            f"guards ({count})",
            Detail("guards", (cid,)),
            parent=parent,
        )
    )
    seen: dict[tuple[str, str], int] = {}
    i = 0
    for entry in entries:
        for group in entry.groups:
            for g in group.guards:
                nth = seen.get((g.kind, g.source), 0)
                seen[(g.kind, g.source)] = nth + 1
                first = _first_line(g.text[0].split("  #", 1)[0]) if g.text else ""
                label = f"{g.kind} {g.source}".strip()
                item = b.add(
                    Item(
                        f"{stage.key}/{i}",
                        "guard",
                        label if g.source else f"{label}  {first[:60]}".rstrip(),
                        Detail("guards", (cid,), anchor=_guard_row(g.kind, g.source), nth=nth),
                        parent=stage.key,
                        search=_search(g.kind, g.source, *g.text),
                    )
                )
                i += 1
                b.guard_code[item.key] = [
                    _BARE_SOURCE.sub(r"\1", t.split("  #", 1)[0].strip()) for t in g.text
                ]


def _kernels(b: _Builder, parent: str, cid: str, kernels: list[Any], graphs: set[str]) -> None:
    stage = b.add(
        Item(
            f"{parent}/kernels",
            "stage",
            f"kernels ({len(kernels)})",
            Detail("codegen", (cid,), render=(("lifetimes", False),)),
            parent=parent,
        )
    )
    several = len({k.graph for k in kernels}) > 1
    for k in kernels:
        key = f"{stage.key}/{k.graph}/{k.name}"
        aten = [str(op) for op in k.origins.get("aten_ops") or []]
        item = b.add(
            Item(
                key,
                "kernel",
                f"{k.name}" + (f"  ({k.graph})" if several else ""),
                Detail(
                    "codegen",
                    (cid,),
                    build=(("graph", k.graph),),
                    render=(("lifetimes", False),),
                    kernel=k.name,
                ),
                parent=stage.key,
                search=_search(k.name, k.category, *k.fused_ops, *aten),
            )
        )
        shown = k.graph if k.graph in graphs else None
        for op in aten:
            detail = (
                Detail("graphs", (cid,), render=(("show", (shown,)),), anchor=wrapped(op) + r"(?![\w.])")
                if shown
                else Detail("codegen", (cid,), build=(("graph", k.graph),), kernel=k.name)
            )
            child = b.add(Item(f"{key}/op/{op}", "op", f"ATen {op}", detail, parent=key, search=_search(op)))
            item.links.append(Link(child.label, child.key))
        for j, ul in enumerate(k.origins.get("user_lines") or []):
            fr = Frame(
                str(ul.get("file")), ul.get("line"), str(ul.get("function") or "?"), ul.get("code") or ""
            )
            line = _line_item(b, f"{key}/line/{j}", key, fr)
            item.links.append(Link(line.label, line.key))


def _line_item(b: _Builder, key: str, parent: str, fr: Frame) -> Item:
    code = f"  {fr.code.strip()}" if fr.code else ""
    return b.add(
        Item(
            key,
            "line",
            f"line {_short(fr.file)}:{fr.line}{code}",
            Detail("source", file=fr.file, line=fr.line),
            parent=parent,
            search=_search(fr.name, fr.code),
        )
    )


def _link_recompiles(b: _Builder, recompiles: Any) -> None:
    """A recompile links to each entry's failing guard and to the entry that had served the call."""
    for reason in recompiles.reasons:
        item = b.items.get(f"compile {reason.compile_id}/recompile")
        if item is None:
            continue
        call = next((c for c in recompiles.calls if c.compile_id == reason.compile_id), None)
        failures = (call.failed_guards if call and call.failed_guards else None) or reason.failures
        for f in failures:
            target = _failing_guard(b, f)
            if target:
                item.links.append(Link(f"failing guard of entry {f.entry}: {_first_line(f.guard)}", target))
            if f"compile {f.entry}" in b.items:
                item.links.append(
                    Link(f"entry {f.entry}, which had served the calls before", f"compile {f.entry}")
                )


def _failing_guard(b: _Builder, failure: Any) -> str | None:
    """The guard item of `failure.entry` that failed: by the argument it guards or by its text,
    else the entry's guards."""
    stage = b.items.get(f"compile {failure.entry}/guards")
    if stage is None:
        return None
    guards = [b.items[k] for k in stage.children]
    if failure.arg:
        source = f"['{failure.arg}']"
        tensor = failure.kind in TENSOR_FAILURES
        for g in guards:
            if source in g.search and (not tensor or g.label.startswith("TENSOR_MATCH")):
                return g.key
        for g in guards:
            if source in g.label:
                return g.key
    # torch quotes the guard's own code, with sources written bare (`len(args) == 1`).
    needle = failure.guard.split("  #", 1)[0].strip()
    for g in guards:
        if any(len(t) > 5 and (t in needle or needle in t) for t in b.guard_code.get(g.key, ())):
            return g.key
    return stage.key


def _graph_kinds(model: RunModel, compiles: dict[str, Compile]) -> dict[str, set[str]]:
    return {cid: kinds for cid, kinds in model.graphs.logged.items() if cid is not None and cid in compiles}


def _frames(compiles: dict[str, Compile]) -> dict[str, list[Compile]]:
    out: dict[str, list[Compile]] = {}
    for cid, comp in compiles.items():
        out.setdefault(_frame_of(cid), []).append(comp)
    return out


def _frame_of(cid: str) -> str:
    return cid.rsplit("/", 1)[0]


def _run_label(model: RunModel, compiles: int, breaks: int, kernels: int) -> str:
    return (
        f"{short_path(model.target)}  ·  {compiles} compile{'s' if compiles != 1 else ''}, "
        f"{breaks} graph break{'s' if breaks != 1 else ''}, {model.recompile_count} recompile"
        f"{'s' if model.recompile_count != 1 else ''}, {kernels} kernel{'s' if kernels != 1 else ''}"
    )


def _compile_label(comp: Compile, breaks: int, kernels: int) -> str:
    tags = []
    if comp.failed:
        tags.append(f"FAILED ({_first_line(comp.fail_type or '')})")
    if comp.recompile_reason:
        tags.append("recompile")
    if comp.graph_op_count is not None:
        tags.append(f"{comp.graph_op_count} ops")
    if breaks:
        tags.append(f"{breaks} break{'s' if breaks != 1 else ''}")
    if kernels:
        tags.append(f"{kernels} kernel{'s' if kernels != 1 else ''}")
    return f"{comp.compile_id}  {comp.display_name}" + (f"  · {', '.join(tags)}" if tags else "")


def wrapped(literal: str) -> str:
    """A regular expression for `literal` as a renderer may have wrapped it to the pane's width:
    a space may become a line break (and the next line's indent), a long word may be cut anywhere."""
    return "".join(r"\s+" if ch == " " else re.escape(ch) + r"(?:\n *)?" for ch in literal)


def _guard_row(kind: str, source: str) -> str:
    """The first line of a guard's row in the guards view: `    KIND  SOURCE text`, the source dotted
    as the view shows it."""
    head = "^    " + wrapped(clean(kind))
    return head + (r"\s+" + wrapped(clean(dotted(source))) if source else "") + r"(?=\s|$)"


def _short(file: str) -> str:
    """A file as labels name it: inside site-packages from the package on, else as headers do."""
    _, sep, inside = file.rpartition("site-packages/")
    return inside if sep else short_path(file)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _search(*parts: object) -> str:
    return "\n".join(str(p) for p in parts if p).lower()
