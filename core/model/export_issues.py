"""What went wrong in a torch.export call, in the user's terms: the kind of issue, the user's line,
torch's message once, and the fix that fits the kind (torch-free).

Each input gives issues in torch's own words:
- the exception a failed export raised (live runs: type, message, traceback; a strict export's
  Dynamo failure in a log's `compilation_metrics`): one issue, or one per violated constraint;
- draft_export's report (live runs: `ep._report`, torch's FailureReport text; a draft_export log:
  the events the report is made of);
- a log's record of a failure: `guard_on_data_dependent_error`, `make_fx_fail_partial` (where
  torch's trace stopped), the `symbolic_shape_specialization` of a call that failed without an
  exception record (core/model/export_log.py decides which applies).
Every issue is placed at the user's line: the exception's stack, else the guard that torch logged
for the same expression, the data-dependent error's stack, the line that made its symbol, or the
line of the op in the ExportedProgram.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tcx.core.frames import frame_origin, innermost_user_frame, parse_stack_trace
from tcx.core.torchtext.exported_program import negated, python_condition, symbols_in

KINDS = (
    "data-dependent branch",
    "data-dependent guard",
    "specialized dynamic dim",
    "constraint violation",
    "missing fake kernel",
    "mismatched fake kernel",
    "graph break (strict)",
    "export error",
)
# draft_export's failure types (torch/export/_draft_export.py FailureType) for the events its
# report is made of.
DRAFT_TYPES = {
    "guard_added": "GUARD_ADDED",
    "propagate_real_tensors_provenance": "DATA_DEPENDENT_ERROR",
    "missing_fake_kernel": "MISSING_FAKE_KERNEL",
    "mismatched_fake_kernel": "MISMATCHED_FAKE_KERNEL",
}
# A draft_export log cannot say whether its report lists a guard (core/model/export_log.py).
DRAFT_GUARD_CAVEAT = (
    "draft_export's report lists this guard only if the export first failed on a constraint "
    "violation (draft_export then exports again with Dim.AUTO); its log does not say whether it did"
)
_DDE_EXPR = re.compile(r"data-dependent expression (?P<expr>.+?) \((?:unhinted|for more)", re.S)
_SPECIALIZED = re.compile(
    r"You marked (?P<source>.+?) as dynamic but your code specialized it to be a constant "
    r"\((?P<value>[^)]+)\)"
)
_EQUAL = re.compile(r"The values of \w+ = (?P<a>\S+) and \w+ = (?P<b>\S+) must always be equal")
_VIOLATED = re.compile(r"^Constraints violated \((?P<names>.*)\)!.*$", re.M)
_BULLET = re.compile(r"^\s{1,4}- ", re.M)
_SOURCE = re.compile(r"L\[[^\]]+\](?:\[[^\]]+\]|\.\w+\(\))*")
_SUGGESTED = re.compile(r"Suggested fixes:\n(?P<fixes>(?:[ \t]+\S.*\n?)+)")
_HINT = re.compile(r"^\s*Hint: (?P<hint>.+)$", re.M)
_GB_TITLE = re.compile(r"^(?P<title>[^\n]+)\n\s+Explanation:", re.M)
_FAKE_OP = re.compile(r"CustomOpDef\((?P<op>[\w:.]+)\)|operator: (?P<op2>[\w:.]+)|ops\.(?P<op3>\w+\.\w+)")
_BRANCH = re.compile(r"^(?:if|elif|while|assert)\b|\bif\b.*\belse\b")
_BOILERPLATE = re.compile(r"\n*The error above occurred when calling torch\.export\.\w+\..*\Z", re.S)
_EQ_SPEC = re.compile(r"^Eq\((?P<sym>s\d+), (?P<value>-?\d+)\)$")


@dataclass
class ExportIssue:
    kind: str  # one of KINDS
    message: str  # torch's message (or, from a log, what the event says)
    suggestion: str
    file: str | None = None
    line: int | None = None
    function: str | None = None
    code: str = ""
    expr: str | None = None  # the symbolic expression torch could not decide or guarded on
    op: str | None = None  # the custom op, for fake-kernel issues
    result: str | None = None  # what a data-dependent `expr` was specialized to (draft export)
    occurrences: int = 1
    origin: str = "exception"  # exception | draft_export | trace (a log's events)
    torch_type: str | None = None  # the exception class or draft_export's failure type
    caveat: str | None = None  # what the input cannot confirm about this issue

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def as_int(value: Any) -> int | None:
    """An int from a recording or log (anything else, a bool included, is unknown)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_text(value: Any) -> str | None:
    return None if value is None else str(value)


def as_sources(value: Any) -> dict[str, str]:
    """`symbol_to_sources` as torch writes it (symbol -> source); anything else is none."""
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def as_frame(value: Any) -> dict[str, Any] | None:
    """A frame {file, line, function, code} from a recording or log, its fields typed."""
    if not isinstance(value, dict) or not value.get("file"):
        return None
    return {
        "file": str(value["file"]),
        "line": as_int(value.get("line")),
        "function": as_text(value.get("function")),
        "code": str(value.get("code") or ""),
    }


@dataclass
class Context:
    """What the rest of the export says, for placing an issue and naming its symbols."""

    guards: list[dict[str, Any]] = field(default_factory=list)  # guard_added: expr, sources, file, line, code
    unbacked: dict[str, dict[str, Any]] = field(default_factory=dict)  # u0 -> where it was made
    call_site: dict[str, Any] | None = None  # the program's line that called the export
    specializations: list[dict[str, Any]] = field(default_factory=list)  # Specialization.to_json()
    symbol_sources: dict[str, str] = field(default_factory=dict)  # s77 -> L['x'].size()[0]
    data_dependent: list[tuple[str, dict[str, Any] | None]] = field(default_factory=list)  # expr, where
    partial: dict[str, Any] | None = None  # the last line torch traced before a failure
    program_symbols: set[str] | None = None  # symbols in the ExportedProgram's inputs (None: no program)
    op_lines: dict[str, dict[str, Any]] = field(default_factory=dict)  # op -> its line in the program


def from_exception(
    exc_type: str,
    message: str,
    frames: list[dict[str, Any]],
    ctx: Context,
    op_schema: dict[str, str] | None,
    *,
    origin: str = "exception",
) -> list[ExportIssue]:
    """The issues of the exception a failed export raised, each at the user's line: one per
    constraint torch says was violated, else one."""
    short = exc_type.rsplit(".", 1)[-1]
    text = _BOILERPLATE.sub("", message).strip()
    if ("Constraints violated" in text or short == "ConstraintViolationError") and (
        violations := _violations(text)
    ):
        return [_violation_issue(short, *violation, ctx, origin) for violation in violations]
    where = _user_location(text, frames, ctx)
    code = str((where or {}).get("code") or "")
    kind, expr, op = "export error", None, None
    if "Could not guard on data-dependent expression" in text or short == "GuardOnDataDependentSymNode":
        m = _DDE_EXPR.search(text)
        expr = m["expr"].strip() if m else None
        kind = "data-dependent branch" if _BRANCH.search(code.strip()) else "data-dependent guard"
    elif short == "Unsupported" and "Data-dependent branching" in text:
        kind = "data-dependent branch"
    elif "Constraints violated" in text or short == "ConstraintViolationError":
        kind = "constraint violation"
    elif "fake" in text.lower() and ("impl" in text.lower() or "kernel" in text.lower()):
        kind = "missing fake kernel"
        op = (op_schema or {}).get("op") or _fake_op(text)
    elif short == "Unsupported":
        kind = "graph break (strict)"
    issue = ExportIssue(kind, text, "", origin=origin, torch_type=short, expr=expr, op=op)
    place(issue, where, ctx)
    issue.suggestion = suggest(issue, ctx, message=text, schema=(op_schema or {}).get("schema"))
    return [issue]


def _violations(text: str) -> list[tuple[str, str, str]]:
    """(header, bullet, suggested fixes) for each constraint a ConstraintViolationError lists:
    `Constraints violated (...)!` then `  - You marked L['x'].size()[0] as dynamic but ...`, each
    bullet followed by its `User stack:` when strict."""
    head = _VIOLATED.search(text)
    if head is None:
        return []
    body = text[head.end() :]
    fixes = _SUGGESTED.search(body)
    if fixes:
        body = body[: fixes.start()]
    starts = [m.start() for m in _BULLET.finditer(body)]
    bullets = [body[a:b].strip() for a, b in zip(starts, [*starts[1:], len(body)], strict=True)]
    suggested = fixes.group(0).strip() if fixes else ""
    return [(head.group(0).strip(), b, suggested) for b in bullets if b]


def _violation_issue(
    short: str, header: str, bullet: str, fixes: str, ctx: Context, origin: str
) -> ExportIssue:
    """One violated constraint, at the user's line: its own user stack (strict export prints one),
    else the line of the guard that pinned or related its dimension."""
    text = "\n".join(part for part in (header, bullet, fixes) if part)
    spec = _SPECIALIZED.search(bullet)
    equal = _EQUAL.search(bullet)
    guard: dict[str, Any] | None
    if spec:
        kind = "specialized dynamic dim"
        guard = _pinning(ctx, spec["source"], spec["value"])
    else:
        kind = "constraint violation"
        sources = [equal["a"], equal["b"]] if equal else _SOURCE.findall(bullet.split("User stack", 1)[0])
        guard = _relating(ctx, sources)
    stack = [f for f in parse_stack_trace(bullet) if frame_origin(f["file"]) == "user"]
    issue = ExportIssue(kind, text, "", origin=origin, torch_type=short, expr=(guard or {}).get("expr"))
    place(issue, stack[-1] if stack else guard, ctx)
    issue.suggestion = suggest(issue, ctx, message=text)
    return issue


def _pinning(ctx: Context, source: str, value: str) -> dict[str, Any] | None:
    """The guard that pinned `source` to `value` (torch's `symbolic_shape_specialization` names the
    symbol and its sources), else the last guard pinning any dimension to that value."""
    for spec in ctx.specializations:
        if source in spec.get("sources", []) and str(spec.get("value")) == value and spec.get("guard"):
            return dict(spec["guard"])
    named = [s for s, src in ctx.symbol_sources.items() if src == source]
    for guard in reversed(ctx.guards):
        m = _EQ_SPEC.match(str(guard.get("expr")))
        if m and m["value"] == value and (not named or m["sym"] in named) and guard.get("line") is not None:
            return dict(guard)
    return None


def _relating(ctx: Context, sources: list[str]) -> dict[str, Any] | None:
    """The guard over the symbols of `sources` (e.g. `Eq(s77, s17)` for two dims torch found equal)."""
    wanted = set(sources)
    for guard in ctx.guards:
        named = {**ctx.symbol_sources, **(guard.get("sources") or {})}
        mentioned = {named[s] for s in symbols_in(str(guard.get("expr"))) if s in named}
        if wanted and wanted <= mentioned:
            return dict(guard)
    return None


def from_draft(failure: dict[str, Any], ctx: Context) -> ExportIssue:
    """One failure of draft_export's report."""
    # draft_export reports a guard only when the export first failed on a constraint violation (it
    # then exports again with Dim.AUTO): GUARD_ADDED is what CONSTRAINT_VIOLATION_ERROR used to be.
    ftype = str(failure.get("type"))
    stack = [f for f in map(as_frame, failure.get("user_stack") or []) if f]
    where = innermost_user_frame(stack) if stack else None
    expr = as_text(failure.get("expr"))
    kind = {
        "MISSING_FAKE_KERNEL": "missing fake kernel",
        "MISMATCHED_FAKE_KERNEL": "mismatched fake kernel",
    }.get(ftype) or (_guard_kind(expr or "", ctx) if ftype == "GUARD_ADDED" else "data-dependent guard")
    if kind == "data-dependent guard" and _BRANCH.search(str((where or {}).get("code") or "").strip()):
        kind = "data-dependent branch"
    issue = ExportIssue(
        kind,
        str(failure.get("message") or _draft_message(failure)),
        "",
        expr=expr,
        op=as_text(failure.get("op")),
        occurrences=as_int(failure.get("occurrences")) or 1,
        result=as_text(failure.get("result")),
        origin="draft_export",
        torch_type=ftype,
    )
    place(issue, where, ctx)
    op_schema = failure.get("op_schema")
    schema: dict[str, Any] = op_schema if isinstance(op_schema, dict) else {}
    issue.suggestion = suggest(
        issue, ctx, sources=as_sources(failure.get("symbol_to_sources")), schema=as_text(schema.get("schema"))
    )
    return issue


def _guard_kind(expr: str, ctx: Context) -> str:
    """A guard draft_export reports: a dimension specialized to a constant when none of its symbols
    is left in the ExportedProgram's inputs, else a relation between dimensions."""
    symbols = [s for s in symbols_in(expr) if s.startswith("s")]
    if _EQ_SPEC.match(expr) or (ctx.program_symbols is not None and not set(symbols) & ctx.program_symbols):
        return "specialized dynamic dim"
    return "constraint violation"


def from_trace(
    name: str, body: dict[str, Any], where: dict[str, Any] | None, ctx: Context
) -> ExportIssue | None:
    """An event of draft_export's log that its report turns into a failure (None for any other):
    what torch/export/_draft_export.py keeps and reports."""
    if name == "guard_added":
        expr = str(body.get("expr"))
        sources = as_sources(body.get("symbol_to_sources"))
        if body.get("prefix") != "eval" or not sources:
            return None  # draft_export reports guards on the inputs' dims, not runtime asserts
        named = ", ".join(f"{k} = {v}" for k, v in sources.items())
        issue = ExportIssue(
            _guard_kind(expr, ctx),
            f"When exporting, the guard {expr} was added ({named}).",
            "",
            expr=expr,
            caveat=DRAFT_GUARD_CAVEAT,
        )
    elif name == "propagate_real_tensors_provenance":
        expr, result = str(body.get("expr")), str(body.get("result"))
        code = str((where or {}).get("code") or "").strip()
        issue = ExportIssue(
            "data-dependent branch" if _BRANCH.search(code) else "data-dependent guard",
            f"When exporting, torch could not decide whether {expr} always holds; it was specialized to "
            f"{result} (the value on the example inputs) and asserts were inserted into the graph.",
            "",
            expr=expr,
            result=result,
        )
    elif name == "missing_fake_kernel":
        op = str(body.get("op"))
        issue = ExportIssue(
            "missing fake kernel", f"torch.ops.{op} is missing a fake kernel implementation.", "", op=op
        )
    elif name == "mismatched_fake_kernel":
        op = str(body.get("op"))
        issue = ExportIssue(
            "mismatched fake kernel",
            f"torch.ops.{op} has a fake kernel, but it does not behave like the real kernel: "
            f"{body.get('reason')}",
            "",
            op=op,
        )
    else:
        return None
    issue.origin, issue.torch_type = "trace", DRAFT_TYPES[name]
    place(issue, where, ctx)
    issue.suggestion = suggest(issue, ctx, sources=as_sources(body.get("symbol_to_sources")))
    return issue


def from_data_dependent(expr: str, where: dict[str, Any] | None, ctx: Context) -> ExportIssue:
    """A log's `guard_on_data_dependent_error`: torch logs it as it makes the exception it raises
    (symbolic_shapes `_make_data_dependent_error`)."""
    code = str((where or {}).get("code") or "").strip()
    issue = ExportIssue(
        "data-dependent branch" if _BRANCH.search(code) else "data-dependent guard",
        f"Could not guard on data-dependent expression {expr} (torch's guard_on_data_dependent_error: "
        "its value depends on what a tensor holds, which export does not know).",
        "",
        expr=expr,
        origin="trace",
        torch_type="GuardOnDataDependentSymNode",
    )
    place(issue, where, ctx)
    issue.suggestion = suggest(issue, ctx)
    return issue


def from_partial_graph(partial: dict[str, Any], ctx: Context) -> ExportIssue:
    """A log's `make_fx_fail_partial`: torch's non-strict trace failed; its graph ends at the last
    line it traced."""
    node = str(partial.get("node") or "")
    issue = ExportIssue(
        "export error",
        "torch's trace of the module failed; the last line it traced is this one"
        + (f" (its last node: `{node}`)" if node else "")
        + ". The log records the partial graph (make_fx_fail_partial), not the error.",
        "",
        origin="trace",
        caveat="the line is the last one torch traced before the failure",
    )
    place(issue, partial, ctx)
    issue.suggestion = suggest(issue, ctx)
    return issue


def from_specialization(spec: dict[str, Any], ctx: Context) -> ExportIssue:
    """A dimension the call specialized, when the call failed with no exception in the log."""
    value = str(spec.get("value"))
    sources = ", ".join(spec.get("sources") or []) or str(spec.get("symbol"))
    guard = spec.get("guard") or {}
    issue = ExportIssue(
        "specialized dynamic dim",
        f"The code specialized {sources} to be a constant ({value}); the export then ended without an "
        "ExportedProgram (torch raises a constraint violation when a dimension marked dynamic is "
        "specialized).",
        "",
        expr=guard.get("expr") or f"Eq({spec.get('symbol')}, {value})",
        origin="trace",
        caveat="the log records the specialization, not the exception the export raised",
    )
    place(issue, guard or spec.get("where"), ctx)
    issue.suggestion = suggest(issue, ctx)
    return issue


def from_unrecorded_failure(ctx: Context) -> ExportIssue:
    """A call that ended without an ExportedProgram and whose failure torch did not log."""
    issue = ExportIssue(
        "export error",
        "The export ended without an ExportedProgram (another call began after it), and torch logged "
        "no exception for it.",
        "",
        origin="trace",
        caveat="placed at the program's call: the log does not say which line failed",
    )
    place(issue, ctx.call_site, ctx)
    issue.suggestion = suggest(issue, ctx)
    return issue


def place(issue: ExportIssue, where: dict[str, Any] | None, ctx: Context) -> None:
    """Put `issue` at the user's line: `where` when it is the user's, else what the rest of the
    export says about the same expression, its symbols or its op."""
    where = as_frame(where)
    if not (where and where.get("line") is not None and frame_origin(where["file"]) == "user"):
        where = _elsewhere(issue, ctx) or where
    if where:
        issue.file, issue.line, issue.function = where["file"], where["line"], where["function"]
        issue.code = where["code"].strip()


def _elsewhere(issue: ExportIssue, ctx: Context) -> dict[str, Any] | None:
    expr = issue.expr or ""
    candidates: list[dict[str, Any] | None] = []
    if expr:
        candidates += [g for g in ctx.guards if g.get("expr") == expr]
        candidates += [w for e, w in ctx.data_dependent if e == expr]
        candidates += [ctx.unbacked.get(s) for s in symbols_in(expr)]
        candidates += [s.get("guard") for s in ctx.specializations if s.get("symbol") in symbols_in(expr)]
    if issue.op:
        candidates.append(ctx.op_lines.get(issue.op.removeprefix("torch.ops.")))
    for candidate in candidates:
        frame = as_frame(candidate)
        if frame and frame.get("line") is not None and frame_origin(frame["file"]) == "user":
            return frame
    return None


def _user_location(text: str, frames: list[dict[str, Any]], ctx: Context) -> dict[str, Any] | None:
    """The user's line: a stack in torch's message ("The following call raised this error", "from
    user code", "User stack"), else the innermost user frame of the traceback below the program's
    export call (non-strict export runs the module's Python, so its frames are there)."""
    in_message = [f for f in parse_stack_trace(text) if frame_origin(f["file"]) == "user"]
    if in_message:
        return in_message[-1]
    site = ctx.call_site or {}
    below = frames
    for i, f in enumerate(frames):
        if f.get("file") == site.get("file") and f.get("line") == site.get("line"):
            below = frames[i + 1 :]
    user = [f for f in below if frame_origin(str(f.get("file"))) == "user"]
    return user[-1] if user else None


def _fake_op(text: str) -> str | None:
    m = _FAKE_OP.search(text)
    return next((g for g in m.groups() if g), None) if m else None


def _draft_message(failure: dict[str, Any]) -> str:
    if failure.get("op"):
        return f"torch.ops.{failure['op']}: {failure.get('type')} {failure.get('reason') or ''}".strip()
    return f"{failure.get('type')}: {failure.get('expr')}"


def suggest(
    issue: ExportIssue,
    ctx: Context,
    *,
    message: str = "",
    schema: str | None = None,
    sources: dict[str, str] | None = None,
) -> str:
    """The fix that fits the issue's kind, with its expression and line."""
    at = f" at line {issue.line}" if issue.line else ""
    code = _code(issue.code)
    cond = python_condition(issue.expr) if issue.expr else None
    if cond and issue.result == "False":  # export assumed it does not hold: that is what to check
        cond = negated(cond)
    origins = _symbol_origins(issue.expr or "", ctx, issue.line)
    names = _user_names(issue.expr or "", ctx)
    if cond and names:  # the user's own names for torch's symbols: `torch._check(k > 2)`, not `u0 > 2`
        cond = re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", lambda m: names[m.group()], cond)
        origins = origins.replace(" is `", " from `")
        for sym, name in names.items():
            origins = re.sub(rf"\b{re.escape(sym)} from", f"{name} from", origins)
    if issue.kind == "data-dependent branch":
        text = (
            f"`{code or 'this condition'}` branches on a value computed from tensor data, which export "
            "cannot trace: express both branches with torch.cond(pred, true_fn, false_fn, (operands,))"
        )
        if cond and origins:  # the value came from an earlier line (an .item()): it can be checked
            text += (
                f"; or, if `{cond}` holds for every input you will export for, say so before the "
                f"branch with torch._check({cond}) ({origins})"
            )
        return text + "."
    if issue.kind == "data-dependent guard":
        check = f"torch._check({cond})" if cond else "torch._check(...)"
        text = f"tell export what holds for the data-dependent value{at}: {check}"
        symbols = [names.get(sym, sym) for sym in symbols_in(issue.expr or "")]
        if cond and symbols and re.search(r"(>= 0|< 0|>= 1|< 1)$", cond):
            text += f" (for a size, torch._check_is_size({symbols[0]}))"
        return text + (f" ({origins})" if origins else "") + "."
    if issue.kind == "specialized dynamic dim":
        named = _dims_named(issue.expr or "", sources or {}, ctx)
        spec = _SPECIALIZED.search(message)  # torch's name for the input (strict: Dynamo's own)
        what = (spec["source"] if spec and spec["source"] not in named else named) or "a dynamic dimension"
        pinned = _pinning_guard(issue.expr or "", ctx)
        value = spec["value"] if spec else (pinned or {}).get("value", "a constant")
        guard = issue.expr if _EQ_SPEC.match(issue.expr or "") else (pinned or {}).get("expr", issue.expr)
        fixes = _suggested_fixes(message)
        return (
            f"the code{at} (`{code}`) specializes {what} to {value} (guard {guard or '?'}): make that "
            "line shape-generic if the dimension really varies; otherwise mark it Dim.STATIC, or Dim.AUTO "
            "to let export keep it static without an error"
            + (f". torch suggests: {fixes}" if fixes else "")
            + "."
        )
    if issue.kind == "constraint violation":
        fixes = _suggested_fixes(message)
        named = _dims_named(issue.expr or "", sources or {}, ctx)
        required = f"the code{at} (`{code}`) requires {issue.expr}" + (f" ({named})" if named else "")
        return (
            (f"{required}, which the dynamic_shapes you gave do not say: " if issue.expr and code else "")
            + (
                f"torch suggests {fixes}"
                if fixes
                else "state the relation in dynamic_shapes (the same Dim, or a derived one), or narrow the "
                "Dim's min/max to the values the code accepts"
            )
            + "."
        )
    if issue.kind == "missing fake kernel":
        return fake_kernel_stub(issue.op, schema)
    if issue.kind == "mismatched fake kernel":
        return (
            f"fix the fake kernel registered for {issue.op}: its outputs' shapes, dtypes and strides must be "
            "what the real kernel returns for the same inputs."
        )
    if issue.kind == "graph break (strict)":
        hints = [m["hint"].strip() for m in _HINT.finditer(message)]
        title = _GB_TITLE.search(message)
        return (
            "strict export traces with Dynamo, which cannot trace this"
            + (f" ({title['title'].strip()})" if title else "")
            + ": export with strict=False (torch's default), which runs the Python"
            + (f"; torch: {hints[0].rstrip('.')}" if hints else "")
            + "."
        )
    return (
        "run torch.export.draft_export on the same inputs: it lists every issue of the export, not only "
        "the first."
    )


def fake_kernel_stub(op: str | None, schema: str | None) -> str:
    """A `torch.library.register_fake` stub for a custom op: with its arguments when the schema is known."""
    name = (op or "namespace::op").replace(".default", "")
    if "::" not in name and name.count(".") >= 1:
        namespace, _, rest = name.partition(".")
        name = f"{namespace}::{rest.split('.')[0]}"
    params, first_tensor = _schema_params(schema)
    body = (
        f"torch.empty_like({first_tensor})"
        if first_tensor
        else "...  # empty tensors shaped like the real outputs"
    )
    return (
        "register a fake kernel (it computes only the outputs' shapes, dtypes and devices from the "
        "inputs'):\n"
        f'    @torch.library.register_fake("{name}")\n'
        f"    def _({', '.join(params) or '*args, **kwargs'}):\n"
        f"        return {body}"
    )


def _schema_params(schema: str | None) -> tuple[list[str], str | None]:
    """Argument names of `ns::op(Tensor x, int n=1) -> Tensor`, and the first Tensor argument when the
    op returns one Tensor (its fake output can be `empty_like` that argument)."""
    if not schema or "(" not in schema:
        return [], None
    inner = schema[schema.index("(") + 1 : schema.rindex(")")] if ")" in schema else ""
    returns = schema.rsplit("->", 1)[-1].strip()
    params, first = [], None
    for arg in filter(None, (a.strip() for a in inner.split(","))):
        if arg == "*":
            params.append("*")
            continue
        kind, _, rest = arg.rpartition(" ")
        pname = rest.split("=")[0]
        params.append(pname)
        if first is None and kind.startswith("Tensor"):
            first = pname
    return params, first if returns == "Tensor" else None


def _suggested_fixes(message: str) -> str:
    m = _SUGGESTED.search(message)
    return "; ".join(line.strip() for line in m["fixes"].splitlines() if line.strip()) if m else ""


def _dims_named(expr: str, sources: dict[str, str], ctx: Context) -> str:
    names = []
    for sym in symbols_in(expr):
        source = (
            sources.get(sym)
            or next((g["sources"][sym] for g in ctx.guards if sym in (g.get("sources") or {})), None)
            or ctx.symbol_sources.get(sym)
        )
        if source:
            names.append(f"{source} ({sym})")
    return ", ".join(names)


def _symbol_origins(expr: str, ctx: Context, line: int | None) -> str:
    """Where the data-dependent symbols of `expr` were made, when that is another line than the
    issue's (`u0` is `k = n.item()` at line 17); empty when the condition made them itself."""
    parts = []
    for sym in symbols_in(expr):
        made = ctx.unbacked.get(sym)
        if made and made.get("line") and made.get("line") != line:
            parts.append(f"{sym} is `{_code(str(made.get('code') or ''))}`, line {made['line']}")
    return "; ".join(parts)


def _user_names(expr: str, ctx: Context) -> dict[str, str]:
    """torch's data-dependent symbols of `expr` -> the name the user's code gave each (`u0` -> `k` for
    `k = n.item()`); empty unless every symbol was assigned to a plain name."""
    names = {}
    for sym in symbols_in(expr):
        made = ctx.unbacked.get(sym) or {}
        m = re.match(r"\s*([A-Za-z_]\w*)\s*=[^=]", _code(str(made.get("code") or "")))
        if m is None:
            return {}
        names[sym] = m.group(1)
    return names


def _pinning_guard(expr: str, ctx: Context) -> dict[str, str] | None:
    """The `Eq(sN, value)` guard that pinned a symbol of `expr` (draft_export names the first guard
    of the line, e.g. `Eq(Mod(3*s77, 4), 0)`, not the one that made it a constant)."""
    for sym in symbols_in(expr):
        for guard in reversed(ctx.guards):
            m = _EQ_SPEC.match(str(guard.get("expr")))
            if m and m["sym"] == sym:
                return {"expr": str(guard["expr"]), "value": m["value"]}
    return None


def _code(code: str) -> str:
    """A source line without its trailing comment."""
    return code.split("  #", 1)[0].strip()
