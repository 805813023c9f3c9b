"""`tcx export` for people: each export ok or failed, every issue at the user's line with torch's
message and the fix, the guards export added, the signature; AOTInductor kernels and provenance."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from tcx.core.model.aoti_provenance import AotiCompile
from tcx.core.model.export_issues import ExportIssue
from tcx.core.model.exports import ExportRun
from tcx.core.views.export import ExportView
from tcx.renderers.code_block import Wrapped
from tcx.renderers.header import location, short_path, view_header
from tcx.renderers.safe import clean
from tcx.renderers.source import excerpt

MESSAGE_LINES = 6  # torch's message, shown up to its first blank line; the JSON has all of it
GUARDS_SHOWN = 12
API_TEXT = {
    "export": "torch.export.export",
    "draft_export": "torch.export.draft_export",
    "aoti_compile_and_package": "torch._inductor.aoti_compile_and_package",
}


def render_export(view: ExportView, console: Console, *, guards: bool = True) -> None:
    view_header("export", view.model, console, function=view.selection.function)
    render_program_end(view, console)
    console.print()
    if view.unavailable:
        console.print(Text(f"not available: {clean(view.unavailable)}", style="bad"))
        return
    counts = Text()
    for label, value, bad in (
        ("exports", view.export_count, False),
        ("failed", view.failed_export_count, True),
        ("issues", view.export_issue_count, True),
        ("AOTInductor compiles", len(view.aoti), False),
    ):
        counts.append(f"{label} ", style="muted")
        counts.append(str(value), style="bad" if bad and value else "count")
        counts.append("  ")
    console.print(counts)
    if not view.exports and not view.aoti:
        found = "in this log" if view.model.source_kind == "trace" else "was recorded"
        console.print(Text(f"No torch.export call {found}.", style="muted"))
        render_notes(view, console)
        return
    for run in view.exports:
        console.print()
        render_run(run, view, console, guards=guards)
    for compile_ in view.aoti:
        console.print()
        render_aoti(compile_, console)
    render_notes(view, console)


def render_notes(view: ExportView, console: Console) -> None:
    for note in view.notes:
        console.print()
        console.print(Text(f"note: {clean(note)}", style="muted"))


def render_program_end(view: ExportView, console: Console) -> None:
    """How the program ended, when not normally: an export failure it did not catch is named, not
    repeated (its message is shown once, with the issue)."""
    st = view.model.status.program
    if not st.failed:
        return
    exc = str(st.exc_type or "")
    failed = [e for e in view.exports if e.ok is False and (e.exc_type or "").rsplit(".", 1)[-1] == exc]
    if failed:
        text = f"the program stopped on the failure of export {failed[-1].label} ({exc}, below)"
    else:
        first = str(st.message or st.signal or "").strip().splitlines()
        text = f"the program did not finish normally ({st.status}{': ' + first[0] if first else ''})"
    console.print(Text(clean(text) + "; everything recorded until then is shown", style="bad"))


def render_run(run: ExportRun, view: ExportView, console: Console, *, guards: bool = True) -> None:
    mark, style = {True: ("✓", "good"), False: ("✗", "bad"), None: ("?", "warn")}[run.ok]
    title = Text(f"{mark} ", style=style)
    title.append(clean(run.label), style="title")
    title.append(f"  {API_TEXT.get(run.api, clean(run.api))}", style="muted")
    if run.strict is not None:
        title.append(" (strict)" if run.strict else " (non-strict)", style="muted")
    outcome = {True: "ok", False: "failed", None: "outcome not in the log"}[run.ok]
    title.append(f" · {outcome}", style=style)
    if run.exc_type and run.logged_as:
        title.append(f" ({clean(run.exc_type.rsplit('.', 1)[-1])})", style=style)
    if run.seconds is not None:
        title.append(f" in {run.seconds:.2f} s", style="muted")
    if run.call_site and run.call_site.get("file"):
        title.append(
            f" · called at {location(run.call_site.get('file'), run.call_site.get('line'))}", style="muted"
        )
    if run.logged_as:
        title.append(f" · from a {clean(run.logged_as)} log".replace(" log log", " log"), style="muted")
    console.print(title)
    if run.package_path:
        console.print(Text(f"  package {clean(run.package_path)}", style="muted"))
    for number, issue in enumerate(run.issues, start=1):
        render_issue(number, issue, view, console)
    if run.log_lacks:
        console.print()
        for lack in run.log_lacks:
            _labelled(console, "not logged", lack, style="muted")
    if guards and run.guards_added:
        render_guards(run, console)
    for spec in run.specializations:
        line = Text("  specialized ", style="warn")
        line.append(f"{clean(', '.join(spec.sources) or spec.symbol)} = {clean(spec.value)}")
        if spec.guard and spec.guard.line:
            line.append(
                f"  by {clean(spec.guard.expr)} at {location(spec.guard.file, spec.guard.line)}",
                style="muted",
            )
            line.append(f"  {clean(spec.guard.code)}")
        console.print(line)
    render_signature(run, console)


def render_issue(number: int, issue: ExportIssue, view: ExportView, console: Console) -> None:
    console.print()
    head = Text(f"  #{number} ", style="muted")
    head.append(clean(issue.kind), style="gbtype")
    if issue.torch_type:
        head.append(f"  {clean(issue.torch_type)}", style="muted")
    if issue.occurrences > 1:
        head.append(f"  ×{issue.occurrences}", style="muted")
    console.print(head)
    if issue.line is not None:
        where = Text(f"     at {location(issue.file, issue.line)}", style="loc")
        if issue.function:
            where.append(f" in {clean(issue.function)}", style="muted")
        console.print(where)
        console.print(excerpt(issue.file, issue.line, view.model.sources, issue.code))
    elif issue.op:
        console.print(Text(f"     op {clean(issue.op)} (torch names the op, not a line)", style="muted"))
    _labelled(console, "torch", _first_paragraph(issue.message))
    if issue.caveat:
        _labelled(console, "note", issue.caveat, style="muted")
    _labelled(console, "fix", issue.suggestion, style="good")


def _labelled(console: Console, label: str, text: str, style: str = "") -> None:
    lines = clean(text).splitlines() or [""]
    out = Text(f"{label:>10}  ", style="muted")
    out.append(lines[0], style=style)
    console.print(out)
    for rest in lines[1:]:
        console.print(Text(f"{'':>10}  {rest}", style=style))


def _first_paragraph(message: str) -> str:
    lines: list[str] = []
    for line in message.strip().splitlines():
        if not line.strip() and lines:
            break
        lines.append(line.rstrip())
    if len(lines) > MESSAGE_LINES:
        lines = [*lines[:MESSAGE_LINES], "… (the whole message is in --format json)"]
    return "\n".join(lines)


def render_guards(run: ExportRun, console: Console) -> None:
    shown = [g for g in run.guards_added if g.line is not None] or run.guards_added
    console.print(Text(f"  guards added ({len(run.guards_added)})", style="title"))
    for g in shown[:GUARDS_SHOWN]:
        line = Text(f"    {clean(g.expr)}", style="")
        if g.prefix:
            line.append(f"  [{clean(g.prefix)}]", style="muted")
        if g.line is not None:
            line.append(f"  {location(g.file, g.line)}", style="loc")
            line.append(f"  {clean(g.code.split('  #', 1)[0].strip())}", style="muted")
        console.print(line)
    if len(shown) > GUARDS_SHOWN:
        console.print(
            Text(f"    … {len(shown) - GUARDS_SHOWN} more (--format json lists every guard)", style="muted")
        )


def render_signature(run: ExportRun, console: Console) -> None:
    sig = run.signature_json()
    if sig is None:
        return
    console.print(Text("  signature", style="title"))
    for key in ("inputs", "parameters", "buffers", "constants", "outputs"):
        for entry in sig[key]:
            line = Text(f"    {key[:-1]:<10} ", style="muted")
            line.append(clean(entry["name"]))
            if entry["dtype"]:
                line.append(
                    f": {clean(entry['dtype'])}[{clean(', '.join(entry['shape'] or []))}]", style="count"
                )
            extra = [clean(entry["kind"]) if key in ("inputs", "outputs") else ""]
            if entry["target"]:
                extra.append(clean(entry["target"]))
            if entry["persistent"] is False:
                extra.append("not persistent")
            if any(extra):
                line.append("  " + " · ".join(e for e in extra if e), style="muted")
            console.print(Wrapped(line, prose=True, hang=15))  # a continuation under the name, not at 0
    for dim in sig["dynamic_dims"]:
        console.print(
            Text(
                f"    dynamic    {clean(dim['input'])} dim {dim['dim']} = {clean(dim['symbol'])} "
                f"in [{clean(dim['min'])}, {clean(dim['max'])}]",
                style="muted",
            )
        )


def render_aoti(compile_: AotiCompile, console: Console) -> None:
    title = Text("AOTInductor compile", style="title")
    title.append(
        f"  {compile_.kernel_count} kernel(s), {compile_.extern_count} extern call(s)"
        f" · wrapper {compile_.wrapper_lines} lines, kernels {compile_.kernel_code_lines} lines",
        style="muted",
    )
    console.print(title)
    for label, path in (("wrapper", compile_.wrapper_file), ("kernels", compile_.kernel_file)):
        if path:
            console.print(Text(f"  {label:<8} {clean(short_path(path))}", style="muted"))
    if not compile_.provenance:
        console.print(
            Text(
                "  no kernel provenance in this input (Inductor's provenance tracking was off)", style="muted"
            )
        )
        return
    for kernel in compile_.kernels:
        line = Text(f"  {clean(kernel.name)}", style="gbtype" if kernel.kind == "kernel" else "muted")
        line.append(f"  ← {clean(', '.join(kernel.post_grad_nodes))}", style="")
        if kernel.pre_grad_nodes:
            line.append(f"  ← {clean(', '.join(kernel.pre_grad_nodes))}", style="muted")
        console.print(line)
        for ul in kernel.user_lines[:4]:
            console.print(
                Text(
                    f"      {location(ul.get('file'), ul.get('line'))}  {clean(ul.get('code', ''))}",
                    style="loc",
                )
            )
