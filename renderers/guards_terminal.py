"""`tcx guards` for people: per cache entry, its guards grouped by what they protect."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from tcx.core.ingest.lazy_items import stream
from tcx.core.torchtext.guards import tensor_match_text
from tcx.core.views.guards import Entry, Guard, GuardsView
from tcx.renderers.code_block import print_lines
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
    what = "guards" if e.origin == "live" else "guard-tree leaves (from the log)"
    facts = Text(f"  {e.guard_count} {what}", style="muted")
    if e.torch_guard_count is not None:
        facts.append(f" · torch counted {e.torch_guard_count}", style="muted")
    if e.alive is not None:
        facts.append(
            " · still in the cache at exit" if e.alive else " · no longer in the cache at exit", style="muted"
        )
    console.print(facts)
    rows: list[Text] = []  # printed at once: an entry can have thousands of guards
    for group in e.groups:
        title = Text(f"  {group.category}", style="bold")
        if group.subject:
            title.append(f" {clean(group.subject)}", style="loc")
        if group.summary:
            title.append(f"  {clean(group.summary)}")
        rows.append(title)
        for g in group.guards:
            rows.extend(_guard_row(g, full))
    for rel in e.shape_relations if e.origin == "live" else []:
        rows.append(Text(f"    relation {clean(rel)}", style="warn"))
    print_lines(console, rows, title=f"the guards of entry {clean(e.compile_id)}")


def _guard_row(g: Guard, full: bool) -> list[Text]:
    """The guard's line, and the user's line that caused it when known."""
    row = Text(f"    {clean(g.kind):<24} ", style="bold")
    if g.source:
        row.append(f"{clean(g.source)} ", style="loc")
    texts = g.text
    if g.kind == "TENSOR_MATCH" and not full:
        texts = [tensor_match_text(t) or t for t in texts]
    # Whole, with its value: a wide line wraps on a terminal and is printed whole in a pipe.
    body = clean(" | ".join(t.split("  #", 1)[0].strip() for t in texts))
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
