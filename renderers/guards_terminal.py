"""`tcx guards` for people: per cache entry, its guards grouped by what they protect."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.text import Text

from tcx.core.ingest.lazy_items import stream
from tcx.core.model.guard_sets import Guard
from tcx.core.torchtext.guards import tensor_match_text
from tcx.core.views.guards import DYNAMIC_MARKING, Entry, GuardsView, dynamic_marking, internal
from tcx.renderers.code_block import Wrapped, print_lines
from tcx.renderers.guard_text import dotted
from tcx.renderers.header import location, short_path, view_header
from tcx.renderers.safe import clean


def render_guards(view: GuardsView, console: Console, *, full: bool = False) -> None:
    view_header("guards", view.model, console, function=view.selection.function)
    if view.unavailable and not view.entries:
        console.print(Text(f"no guards: {clean(view.unavailable)}", style="warn"))
        return
    n = len(view.entries)
    console.print(Text(f"{n} cache entr{'ies' if n != 1 else 'y'}", style="title"))
    described = False  # a TENSOR_MATCH guard printed as a description, not torch's text
    for entry in stream(view.entries):
        console.print()
        _render_entry(entry, console, full)
        described = described or (
            not full and any(g.kind == "TENSOR_MATCH" for gr in entry.groups for g in gr.guards)
        )
    if described:
        console.print()
        console.print(
            Text(
                "TENSOR_MATCH guards are described (type, dtype, size, stride, requires_grad, device); "
                "--all-text prints torch's own check_tensor text, dispatch keys included.",
                style="muted",
            )
        )


def _render_entry(e: Entry, console: Console, full: bool) -> None:
    head = Text(f"entry {clean(e.compile_id)}", style="title")
    head.append(f" · {clean(e.function)} ", style="bold")
    head.append(clean(short_path(e.file)), style="loc")
    console.print(head)
    facts = Text(f"  {guard_count_text(e)}", style="muted")
    if e.alive is not None:
        facts.append(
            " · still in the cache at exit" if e.alive else " · no longer in the cache at exit", style="muted"
        )
    console.print(Wrapped(facts, prose=True, hang=2))
    rows: list[Text] = []  # printed at once: an entry can have thousands of guards
    folded: Counter[str] = Counter()
    for group in e.groups:
        shown = [g for g in group.guards if full or not (why := internal(g)) or folded.update([why])]
        if not shown:
            continue
        title = Text(f"  {group.category}", style="bold")
        if group.subject:
            title.append(f" {clean(group.subject)}", style="loc")
        summary = group.summary
        tensors = sum(g.kind == "TENSOR_MATCH" for g in group.guards)
        listed = sum(g.kind == "TENSOR_MATCH" for g in shown)
        if group.category != "input tensor" and listed < tensors:  # some only in the folded line
            summary = (
                f"({listed} of its {tensors} tensors guarded below; the rest in the torch-internal line)"
            )
        if summary:
            title.append(f"  {clean(summary)}")
        rows.append(title)
        for g in shown:
            rows.extend(_guard_row(g, full, folded))
    for rel in e.shape_relations if e.origin == "live" else []:
        rows.append(Text(f"    relation {clean(rel)}", style="warn"))
    if folded:
        n = sum(folded.values())
        line = Text(f"  + {n} torch-internal guard{'s' if n != 1 else ''} ", style="muted")
        line.append(
            "(" + "; ".join(f"{why} ×{k}" for why, k in folded.most_common()) + "; --all-text lists each)"
        )
        rows.append(line)
    print_lines(console, rows, title=f"the guards of entry {clean(e.compile_id)}")


def guard_count_text(e: Entry) -> str:
    """One count, and what it counts: torch's own (compilation_metrics) where it has one; what the
    list below holds when that differs from it."""
    listed = e.guard_count
    torch_count = e.torch_guard_count
    if e.origin == "tree":
        leaves = (
            f"the log's guard tree checks them in {listed} lea{'ves' if listed != 1 else 'f'}, listed below"
        )
        if torch_count is None:
            return f"{listed} guard-tree lea{'ves' if listed != 1 else 'f'} (the log has no guard count)"
        return f"{torch_count} guard{'s' if torch_count != 1 else ''} (torch's count); {leaves}"
    if torch_count is None or torch_count == listed:
        return f"{listed} guard{'s' if listed != 1 else ''}"
    return f"{torch_count} guards (torch's count); Dynamo's guard list below holds {listed}"


def _guard_row(g: Guard, full: bool, folded: Counter[str]) -> list[Text]:
    """The guard's line, and the user's line that caused it when known. Module paths are dotted
    (`self.h.0.mlp.weight`) and dynamic-marking checks counted in `folded`, unless `full` asks for
    torch's own text."""
    show = (lambda t: t) if full else dotted
    row = Text(f"    {clean(g.kind):<24} ", style="bold")
    if g.source:
        row.append(f"{clean(show(g.source))} ", style="loc")
    texts = g.text
    if not full:
        kept = [t for t in texts if not dynamic_marking(t)]
        folded[DYNAMIC_MARKING] += len(texts) - len(kept)
        texts = kept
    if g.kind == "TENSOR_MATCH" and not full:
        texts = [tensor_match_text(t) or t for t in texts]
    # Whole, with its value: a wide line wraps on a terminal and is printed whole in a pipe.
    body = clean(" | ".join(show(t.split("  #", 1)[0].strip()) for t in texts))
    if g.kind == "SHAPE_ENV" and not body:
        body = "(no symbolic-shape relations: every size was specialized)"
    if body:
        row.append(body, style="muted")
    if g.line is None:
        return [row]
    cause = Text(" " * 29 + "← ", style="muted")
    cause.append(location(g.file, g.line), style="loc")
    if g.code:
        cause.append(f"  {clean(g.code)}")
    return [row, cause]
