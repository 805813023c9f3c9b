"""What went wrong in a torch.export call, in the user's terms: the kind of issue, the user's line,
torch's message once, and the fix that fits the kind (torch-free).

Three inputs give issues, each in torch's own words:
- the exception a failed export raised (live runs: type, message, traceback);
- draft_export's report (live runs: `ep._report`, torch's FailureReport text);
- the structured trace of a log, read by the rules `tlparse --export` applies: a `guard_added`
  with prefix `eval`, a `propagate_real_tensors_provenance`, a `missing_fake_kernel`, a
  `mismatched_fake_kernel` — one issue each.
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
    "guard evaluated",
    "missing fake kernel",
    "mismatched fake kernel",
    "graph break (strict)",
    "export error",
)
# tlparse's failure types for the trace events it reports (`tlparse --export`).
TLPARSE_TYPES = {
    "guard_added": "Guard Evaluated",
    "propagate_real_tensors_provenance": "Data Dependent Error",
    "missing_fake_kernel": "Missing Fake Kernel",
    "mismatched_fake_kernel": "Mismatched Fake Kernel",
}
_DDE_EXPR = re.compile(r"data-dependent expression (?P<expr>.+?) \((?:unhinted|for more)", re.S)
_SPECIALIZED = re.compile(
    r"You marked (?P<source>.+?) as dynamic but your code specialized it to be a constant "
    r"\((?P<value>[^)]+)\)"
)
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
    origin: str = "exception"  # exception | draft_export | trace
    torch_type: str | None = None  # the exception class, draft's FailureType, or tlparse's type

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


def from_exception(
    exc_type: str, message: str, frames: list[dict[str, Any]], ctx: Context, op_schema: dict[str, str] | None
) -> ExportIssue:
    """The issue a failed export raised, at the user's line."""
    short = exc_type.rsplit(".", 1)[-1]
    text = _BOILERPLATE.sub("", message).strip()
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
        kind = "specialized dynamic dim" if _SPECIALIZED.search(text) else "constraint violation"
        spec = _SPECIALIZED.search(text)
        guard = _specializing_guard(ctx, spec["value"] if spec else None)
        if guard is not None:
            expr = guard["expr"]
            if where is None or frame_origin(str(where.get("file"))) != "user":
                where = guard
    elif "fake" in text.lower() and ("impl" in text.lower() or "kernel" in text.lower()):
        kind = "missing fake kernel"
        op = (op_schema or {}).get("op") or _fake_op(text)
    elif short == "Unsupported":
        kind = "graph break (strict)"
    issue = ExportIssue(kind, text, "", origin="exception", torch_type=short, expr=expr, op=op)
    _place(issue, where)
    issue.suggestion = suggest(issue, ctx, message=text, schema=(op_schema or {}).get("schema"))
    return issue


def from_draft(failure: dict[str, Any], ctx: Context) -> ExportIssue:
    """One failure of draft_export's report."""
    # draft_export reports a guard only when a dimension marked dynamic was specialized (it then
    # exports again with Dim.AUTO): GUARD_ADDED is what CONSTRAINT_VIOLATION_ERROR used to be.
    kind = {
        "MISSING_FAKE_KERNEL": "missing fake kernel",
        "MISMATCHED_FAKE_KERNEL": "mismatched fake kernel",
        "GUARD_ADDED": "specialized dynamic dim",
    }.get(str(failure.get("type")), "data-dependent guard")
    stack = [f for f in map(as_frame, failure.get("user_stack") or []) if f]
    where = innermost_user_frame(stack) if stack else None
    expr = as_text(failure.get("expr"))
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
        torch_type=str(failure.get("type")),
    )
    _place(issue, where)
    op_schema = failure.get("op_schema")
    schema: dict[str, Any] = op_schema if isinstance(op_schema, dict) else {}
    issue.suggestion = suggest(
        issue, ctx, sources=as_sources(failure.get("symbol_to_sources")), schema=as_text(schema.get("schema"))
    )
    return issue


def from_trace(
    name: str, body: dict[str, Any], where: dict[str, Any] | None, ctx: Context
) -> ExportIssue | None:
    """A trace event `tlparse --export` lists as an issue (None for any other event)."""
    if name == "guard_added":
        if body.get("prefix") != "eval":
            return None
        expr = str(body.get("expr"))
        sources = as_sources(body.get("symbol_to_sources"))
        named = ", ".join(f"{k} = {v}" for k, v in sources.items())
        kind = "specialized dynamic dim" if _EQ_SPEC.match(expr) and sources else "guard evaluated"
        issue = ExportIssue(
            kind,
            f"When exporting, the guard {expr} was evaluated" + (f" ({named})" if named else "") + ".",
            "",
            expr=expr,
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
    issue.origin, issue.torch_type = "trace", TLPARSE_TYPES[name]
    _place(issue, where)
    issue.suggestion = suggest(issue, ctx, sources=as_sources(body.get("symbol_to_sources")))
    return issue


def _place(issue: ExportIssue, where: dict[str, Any] | None) -> None:
    where = as_frame(where)
    if where:
        issue.file, issue.line, issue.function = where["file"], where["line"], where["function"]
        issue.code = where["code"].strip()


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


def _specializing_guard(ctx: Context, value: str | None) -> dict[str, Any] | None:
    """The last guard that pinned a dynamic dimension to a constant (`Eq(s77, 4)`), with its line."""
    for guard in reversed(ctx.guards):
        m = _EQ_SPEC.match(str(guard.get("expr")))
        if m and (value is None or m["value"] == value) and guard.get("line") is not None:
            return dict(guard)
    return None


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
    if issue.kind == "data-dependent branch":
        text = (
            f"`{code or 'this condition'}` branches on a value computed from tensor data, which export "
            "cannot trace: express both branches with torch.cond(pred, true_fn, false_fn, (operands,))"
        )
        if cond and origins:  # the value came from an earlier line (an .item()): it can be checked
            text += (
                f"; or, if the condition holds for every input you will export for, say so before the "
                f"branch with torch._check({cond}) ({origins})"
            )
        return text + "."
    if issue.kind == "data-dependent guard":
        check = f"torch._check({cond})" if cond else "torch._check(...)"
        text = f"tell export what holds for the data-dependent value{at}: {check}"
        symbols = symbols_in(cond or "")
        if cond and symbols and re.search(r"(>= 0|< 0|>= 1|< 1)$", cond):
            text += f" (for a size, torch._check_is_size({symbols[0]}))"
        return text + (f" ({origins})" if origins else "") + "."
    if issue.kind in ("specialized dynamic dim", "guard evaluated"):
        named = _dims_named(issue.expr or "", sources or {}, ctx)
        spec = _SPECIALIZED.search(message)
        what = named or (spec["source"] if spec else "a dynamic dimension")
        if issue.kind == "guard evaluated":
            return (
                f"the code{at} added the guard {issue.expr} on {what}: if some inputs break it, make the "
                "line shape-generic; if it always holds, narrow the Dim's min/max to say so (or use "
                "Dim.AUTO)."
            )
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
        return (
            "the dynamic_shapes you gave and the code disagree: "
            + (
                f"torch suggests {fixes}"
                if fixes
                else "narrow the Dim's min/max to the values the code accepts"
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
        source = sources.get(sym) or next(
            (g["sources"][sym] for g in ctx.guards if sym in (g.get("sources") or {})), None
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
