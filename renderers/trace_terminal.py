"""`tcx trace` for people: per compile, each source line followed by the instructions Dynamo ran for it."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from tcx.core.torchtext.guards import shape_guard_text
from tcx.core.views.trace import TraceCompile, TraceView
from tcx.renderers.code_block import Wrapped
from tcx.renderers.header import location, view_header
from tcx.renderers.safe import clean
from tcx.renderers.source import source_lines

# Inlining deeper than this is drawn at this depth (a recording may say any depth).
MAX_DRAWN_DEPTH = 16


def render_trace(view: TraceView, console: Console, *, limit: int | None = None) -> None:
    """`limit`: instructions shown per compile (None: 400; 0: all)."""
    limit = 400 if limit is None else limit
    view_header("trace", view.model, console, function=view.selection.function)
    if view.unavailable:
        console.print(Text(f"per-instruction trace unavailable: {clean(view.unavailable)}", style="warn"))
        return
    n = len(view.compiles)
    scope = f" (of {view.total_compiles})" if n != view.total_compiles else ""
    console.print(Text(f"{n} compile{'s' if n != 1 else ''} traced{scope}", style="title"))
    if not view.compiles:
        console.print(Text("No compile matches the filter.", style="muted"))
    for comp in view.compiles:
        console.print()
        _render_compile(comp, view, console, limit)


def _render_compile(comp: TraceCompile, view: TraceView, console: Console, limit: int) -> None:
    frame = comp.frame
    head = Text(f"compile {clean(frame.compile_id)}", style="title")
    head.append(f" attempt {frame.attempt}" if frame.attempt or comp.restarted else "", style="title")
    head.append(f" · {clean(frame.function)} ", style="bold")
    head.append(location(frame.file, frame.firstlineno), style="loc")
    console.print(Wrapped(head, prose=True))
    facts = [f"{len(comp.instructions) + frame.elided} instructions", f"{len(comp.graph_nodes)} graph nodes"]
    if comp.compiled_at:
        facts.append(f"graph compiled at {_offset(comp.compiled_at)} {comp.compiled_at['opname']}")
    if comp.graph_break:
        facts.append(f"graph break at {_offset(comp.graph_break)} {comp.graph_break['opname']}")
    if comp.restarted:
        facts.append(f"restarted: traced again as the next attempt, because {comp.restart_reason}")
    if comp.error and not comp.compiled_at:
        facts.append(f"ended with {comp.error}")
    console.print(
        Wrapped(Text("  " + " · ".join(clean(f) for f in facts), style="muted"), prose=True, hang=2)
    )
    shown = comp.instructions if limit <= 0 else comp.instructions[:limit]
    where: tuple[Any, ...] | None = None
    for ins in shown:
        indent = "  " * _drawn_depth(ins.get("depth"))
        key = (ins.get("function"), ins.get("file"), ins.get("line"))
        if key != where:
            if (where is None or key[:2] != where[:2]) and ins.get("depth"):
                inlined = Text(f"  {indent}↳ inlined {clean(ins.get('function'))} ", style="muted")
                inlined.append(location(ins.get("file"), ins.get("line")), style="loc")
                console.print(Wrapped(inlined, hang=len(indent) + 4))
            where = key
            console.print(Wrapped(_source_row(indent, ins, view), hang=len(indent) + 9))
        row, stack_column = _ins_row(indent, ins)
        console.print(Wrapped(row, hang=stack_column))
        for extra in _annotations(indent, ins):
            console.print(Wrapped(extra, hang=len(indent) + 13))
    hidden = len(comp.instructions) - len(shown) + comp.frame.elided
    if hidden > 0:
        console.print(
            Text(f"  … {hidden} more instruction{'s' if hidden != 1 else ''} not shown", style="warn").append(
                " (--limit 0 shows all; --compile ID or TARGET:function narrows it down)", style="muted"
            )
        )


def _source_row(indent: str, ins: dict[str, Any], view: TraceView) -> Text:
    line = ins.get("line")
    code = ""
    lines = source_lines(ins.get("file") or "", view.model.sources) if ins.get("file") else None
    if lines and isinstance(line, int) and 1 <= line <= len(lines):
        code = lines[line - 1].strip()
    row = Text(f"  {indent}{line if line is not None else '?':>4} │ ", style="loc")
    row.append(clean(code) or "(source not available)", style="bold" if code else "muted")
    return row


def _offset(ins: dict[str, Any]) -> object:
    """An instruction's bytecode offset; `?` where the recording has none (the schema allows null)."""
    offset = ins.get("offset")
    return "?" if offset is None else offset


def _drawn_depth(depth: object) -> int:
    return max(0, min(depth, MAX_DRAWN_DEPTH)) if isinstance(depth, int) else 0


def _ins_row(indent: str, ins: dict[str, Any]) -> tuple[Text, int]:
    """The instruction's row (its argument whole), and the column its stack starts at (a stack
    wider than the line wraps under it)."""
    arg = ins.get("argrepr") or ("" if ins.get("argval") is None else str(ins.get("argval")))
    row = Text(f"  {indent}     {_offset(ins):>4} ")
    row.append(f"{clean(ins.get('opname')):<24}", style="bold")
    row.append(f" {clean(arg):<14} ")
    stack_column = row.cell_len
    row.append("[" + ", ".join(clean(s) for s in ins.get("stack") or []) + "]", style="muted")
    return row, stack_column


def _annotations(indent: str, ins: dict[str, Any]) -> list[Text]:
    pad = f"  {indent}" + " " * 11
    out = []
    for node in ins.get("node_details") or []:
        t = Text(pad + "+ ", style="good")
        t.append(f"{clean(node.get('op'))} ", style="muted")
        t.append(clean(node.get("name")), style="good")
        if node.get("op") not in ("placeholder", "output"):
            t.append(f" = {clean(node.get('target'))}", style="muted")
        if node.get("created_as"):
            t.append(f"  (created as {clean(node['created_as'])})", style="muted")
        if node.get("erased"):
            t.append("  erased (dead code)", style="warn")
        if node.get("subgraph"):
            t.append("  [subgraph]", style="muted")
        out.append(t)
    if ins.get("guards"):
        out.append(Text(pad + "guard " + ", ".join(clean(g) for g in ins["guards"]), style="muted"))
    if ins.get("folded") is not None:
        out.append(
            Text(pad + f"= folded at trace time: {clean(ins['folded'])} (no graph node)", style="warn")
        )
    decided = ins.get("decided")
    if decided:
        way = f"jumps to {decided.get('target')}" if decided.get("jumped") else "falls through"
        t = Text(pad + "◆ branch decided at trace time: ", style="warn")
        t.append(f"{clean(decided.get('condition'))} → {way}")
        out.append(t)
        for g in decided.get("guards") or []:
            out.append(Text(pad + "  guard that keeps it: " + clean(g), style="muted"))
    elif ins.get("shape_guards"):
        for g in ins["shape_guards"]:
            out.append(Text(pad + "guard " + clean(shape_guard_text(g)), style="muted"))
    if ins.get("graph_break"):
        gb = ins["graph_break"]
        t = Text(pad + "✂ graph break: ", style="bad")
        t.append(clean(gb.get("gb_type") or ""))
        if gb.get("reason") and gb.get("reason") != gb.get("gb_type"):
            t.append(f" ({clean(gb['reason'])})", style="muted")
        out.append(t)
    if ins.get("compiled"):
        out.append(Text(pad + "■ graph compiled here", style="good"))
    if ins.get("error") and not ins.get("graph_break"):
        out.append(Text(pad + "! " + clean(ins["error"]), style="warn"))
    return out
