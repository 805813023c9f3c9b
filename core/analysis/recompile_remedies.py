"""What to change when a frame recompiles: the cause of each recompile (its first failing guard)
and a remedy that names a concrete API or code change. The graph-break counterpart is
core/analysis/remedies.py.

Pure and torch-free; fills in the `cause` and `remedy` of the recompiles view's calls.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tcx.core.analysis.tied_sizes import library_keyword, mark_target, tied_sizes
from tcx.core.model.call_records import Call, FailedGuard
from tcx.core.model.shape_facts import CompileShapes, Dim, Specialization, UserLine
from tcx.core.torchtext.json_object import json_object

if TYPE_CHECKING:
    from tcx.core.model import Frame, RunModel

CAUSES = {
    "shape": "shape specialization",
    "dynamic_shape": "branch on a dynamic size",
    "stride": "stride/layout change",
    "dtype": "dtype change",
    "device": "device change",
    "requires_grad": "requires_grad change",
    "rank": "tensor rank change (number of dimensions)",
    "dispatch": "dispatch keys changed (device, requires_grad or a tensor subclass)",
    "global": "Python global value",
    "closure": "closure value",
    "attribute": "attribute value",
    "value": "Python value",
    "int": "integer specialization",
    "length": "container length change",
    "identity": "object identity (a module or tensor recreated)",
    "type": "type change",
    "global_state": "global state (grad mode, autocast, deterministic, torch function mode)",
    "aliasing": "input aliasing changed",
    "backend": "a different backend",
    "recompile_limit": "recompile limit",
    "other": "guard failure",
}


# Causes whose remedy is not a mark on the size (tcx fix reads them to pick what it runs)
DUCK_SIZING = "size specialized through duck sizing"
DUCK_CONFIG = "torch.fx.experimental._config.use_duck_shape"
SPECIALIZED_BY_CODE = "size specialized by your code"


@dataclass
class RemedyContext:
    """What a remedy may rely on: the run, every call, and what torch logged about each compile."""

    model: RunModel
    calls: list[Call]
    limit: dict[str, Any]
    shapes: dict[str, CompileShapes]
    states: dict[str, dict[str, str]] = field(default_factory=dict)  # entry -> its global-state values
    shape_guards: dict[str, list[str]] = field(default_factory=dict)  # entry -> its symbolic-shape guards
    # entry -> the tensors its guards check: {arg, size} (a size's None: a symbolic dimension)
    tensors: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def dynamic_setting(self, compile_id: str | None) -> str | None:
        """ "True", "False" or None: the `dynamic=` the frame was compiled with, read from torch's own
        config in that compile's compilation_metrics (torch.compile(dynamic=True) turns
        assume_static_by_default off, dynamic=False turns automatic_dynamic_shapes off)."""
        comp = self.model.compiles.get(compile_id or "")
        config = json_object((comp.metrics if comp else {}).get("dynamo_config"))
        if config.get("assume_static_by_default") is False:
            return "True"
        if config.get("automatic_dynamic_shapes") is False:
            return "False"
        if config:
            return None
        return _asked(self.model, compile_id)


def explain_call(call: Call, ctx: RemedyContext) -> None:
    """Set `call.cause` and `call.remedy`: why it recompiled (or ran eager), and what to change."""
    if call.outcome == "eager":
        cfg = call.limit or ctx.limit
        if ctx.limit.get("hit") or call.failed_guards:
            call.cause = CAUSES["recompile_limit"]
            call.remedy = _limit_remedy(call, ctx.calls, cfg)
        else:
            call.cause = "not compiled (Dynamo skipped the frame or its compile failed)"
            call.remedy = f"Run `tcx explain` on this target to see why {call.function} was not compiled."
        return
    if call.outcome != "recompile" or not call.failed_guards:
        return
    g = call.failed_guards[0]
    call.cause = CAUSES.get(g.kind, CAUSES["other"])
    if set_on_first_call(g) is not None:
        call.cause = "attribute set on the first call"
    call.expected = expected_reason(call, g, ctx)
    caller = library_caller(call, ctx)
    if caller is not None and call.expected is None:  # its arguments are the library's, not the user's
        call.call_site = _call_site_change(*caller)
        call.remedy = _library_call_remedy(call, g, *caller)
        return
    if g.kind == "shape":
        call.cause, call.remedy = _shape(call, g, ctx)
    else:
        call.remedy = _remedy(call, g, ctx)
    also = second_failures(call, ctx)
    if also:
        call.remedy = f"{call.remedy} {also}"


def library_caller(call: Call, ctx: RemedyContext) -> tuple[Frame, list[Frame]] | None:
    """(the user's line, the library frames between it and the compiled frame) when library code, not the
    user's, calls the compiled frame (generate() calling a compiled forward, a Trainer, a hook); read from
    the stack of the compile the call made. torch's own frames (nn.Module's __call__) do not count."""
    comp = ctx.model.compiles.get(call.compile_id or "")
    stack = comp.stack if comp else []
    if stack and comp and stack[-1].name == comp.co_name:  # the compiled frame itself (a user's callback)
        stack = stack[:-1]
    users = [i for i, f in enumerate(stack) if f.origin == "user"]
    if not users:
        return None
    between = [f for f in stack[users[-1] + 1 :] if f.origin == "library"]
    return (stack[users[-1]], between) if between else None


def _generate_frame(between: list[Frame]) -> Frame | None:
    return next((f for f in between if f.name == "generate" and "transformers" in f.file), None)


def _library_path(file: str) -> str:
    """A library file as its package names it: transformers/generation/utils.py."""
    norm = file.replace("\\", "/")
    for marker in ("site-packages/", "dist-packages/"):
        if marker in norm:
            return norm.rsplit(marker, 1)[1]
    return os.path.basename(file)


def _user_line(user: Frame) -> str:
    where = f"{os.path.basename(user.file)}:{user.line}"
    return f"`{user.code}` ({where})" if user.code else where


def _call_site_change(user: Frame, between: list[Frame]) -> str:
    """The change at the user's call, as tcx fix lists it (untested: a keyword added at the call)."""
    if _generate_frame(between):
        return f'at {_user_line(user)}: model.generate(..., cache_implementation="static")'
    return f"at {_user_line(user)}: change what your call passes, or compile the code you call"


def _library_call_remedy(call: Call, g: FailedGuard, user: Frame, between: list[Frame]) -> str:
    fn = call.wraps or call.function
    gen = _generate_frame(between)
    lib = gen or between[0]
    head = (
        f"`{g.arg}` changed ({g.guard}), but only {lib.name}() ({_library_path(lib.file)}:{lib.line}) "
        f"calls {fn}, from your line {_user_line(user)}: it builds these arguments, so marking them or "
        "passing them differently is not yours to do."
    )
    if gen:
        return (
            f"{head} generate() calls {fn} once for the prompt (prefill) and once per new token "
            "(decode), with a cache that grows every step, so its sizes and the cache's state change by "
            "design. At your generate() call, ask for a static cache: "
            'model.generate(..., cache_implementation="static") (one cache size: decode compiles once), '
            "or compile the decode step rather than forward. Untested here: tcx fix cannot add a keyword "
            "at your call."
        )
    return (
        f"{head} Change what your call passes, or compile the code you call rather than a frame inside the "
        "library (untested here)."
    )


def hidden_size_failures(call: Call, ctx: RemedyContext) -> dict[str, list[tuple[str, int, int, int]]]:
    """Per entry the call missed: the sizes its guards fix that this call also changed, past the one guard
    torch reports (it stops at the first failure): (tensor, dimension, the entry's size, this call's size).
    This call's sizes are those of the entry it compiled (a static size in its guards is the size it saw);
    a dimension symbolic in either entry is left out."""
    now = {t["arg"]: _sizes(t["size"]) for t in ctx.tensors.get(call.compile_id or "", [])}
    out: dict[str, list[tuple[str, int, int, int]]] = {}
    for g in call.failed_guards:
        for t in ctx.tensors.get(g.entry, []):
            old, new = _sizes(t["size"]), now.get(t["arg"])
            if old is None or new is None or len(new) != len(old):
                continue
            for d, (old_v, new_v) in enumerate(zip(old, new, strict=True)):
                if old_v is None or new_v is None or old_v == new_v or (t["arg"], d) == (g.arg, g.dim):
                    continue
                out.setdefault(g.entry, []).append((str(t["arg"]), d, old_v, new_v))
    return out


def _sizes(text: Any) -> list[int | None] | None:
    """A TENSOR_MATCH guard's size as parsed (`[1, None]`: None a symbolic dimension), or None."""
    items = str(text or "").strip().removeprefix("[").removesuffix("]").split(",")
    try:
        return [None if i.strip() == "None" else int(i) for i in items if i.strip()]
    except ValueError:
        return None


def second_failures(call: Call, ctx: RemedyContext) -> str:
    """What fixing the reported guard alone leaves failing: the entries this call missed that it would
    still miss on another size ("" when none). Tensors an nn.Module registered change together (one
    reallocation), so they count as one cause, and as the reported guard's when it is one of them."""
    parts = []
    for entry, sizes in hidden_size_failures(call, ctx).items():
        reported = next(g for g in call.failed_guards if g.entry == entry)
        groups: dict[str, list[tuple[str, int, int, int]]] = {}
        for size in sizes:
            groups.setdefault(_module_tensor(size[0]) or size[0], []).append(size)
        groups.pop(_module_tensor(reported.arg) or reported.arg or "?", None)
        named = []
        for group in groups.values():
            a, d, o, n = group[0]
            more = (
                f" (and {len(group) - 1} more registered tensor(s) of the module)" if len(group) > 1 else ""
            )
            named.append(f"`{a}` dimension {d} ({o} there, {n} now){more}")
        if named:
            parts.append(
                f"entry {entry} also fixes {'; '.join(named)}: with `{reported.arg}` fixed alone this call "
                f"would still miss entry {entry}, so both fixes are needed"
            )
    return ("Besides, " + "; ".join(parts) + ".") if parts else ""


def _asked(model: RunModel, compile_id: str | None) -> str | None:
    """The `dynamic=` of the program's torch.compile call for this frame (recorded by tcx), when
    the frame's name says which call it was."""
    comp = model.compiles.get(compile_id or "")
    name = comp.co_name if comp else None
    asked = [c.asked for c in model.status.torch_compile_calls if c.target == name]
    values = {str(a.get("dynamic")) for a in asked if a.get("dynamic") is not None}
    return values.pop() if len(values) == 1 else None


def _where(g: FailedGuard) -> str:
    if g.file and g.line:
        return f" (guard from {g.file}:{g.line}{': ' + g.code if g.code else ''})"
    return ""


def _at(line: UserLine | None) -> str:
    if line is None or line.line is None:
        return "torch's own code (no user line)"
    where = f"{os.path.basename(line.file)}:{line.line}" if line.file else f"line {line.line}"
    return f"`{line.code}` ({where})" if line.code else where


def _promoted(call: Call, g: FailedGuard) -> bool:
    return any(p.arg == g.arg and p.dim == g.dim for p in call.promotions)


def _seen(call: Call, g: FailedGuard, calls: list[Call]) -> str:
    seen = set(_dim_values(calls, call.function, g.arg, g.dim))
    for c in calls:  # an attribute (a buffer) is not an argument: its sizes are in the failing guards
        if c.function == call.function:
            for f in c.failed_guards:  # size guards only: a stride guard's values are strides
                if (f.kind, f.arg, f.dim) == ("shape", g.arg, g.dim):
                    seen |= {int(v) for v in (f.expected, f.actual) if v is not None and v.isdigit()}
    return f" (seen: {', '.join(map(str, sorted(seen)))})" if len(seen) > 1 else ""


def _module_tensor(arg: str | None) -> str | None:
    """ "buffer" or "parameter" for a tensor an nn.Module registered (torch keeps its sizes static)."""
    if arg and "._buffers[" in arg:
        return "buffer"
    if arg and "._parameters[" in arg:
        return "parameter"
    return None


def _shape(call: Call, g: FailedGuard, ctx: RemedyContext) -> tuple[str, str]:
    """(cause, remedy) for a size that differs from the one an entry was compiled for."""
    dim = Dim(g.arg or "?", g.dim)
    entry = ctx.shapes.get(g.entry) or CompileShapes()
    dynamic = ctx.dynamic_setting(g.entry)
    fn = call.wraps or call.function
    owner = _module_tensor(g.arg)
    if owner:
        return f"{owner} reallocated with a new size", _reallocated(call, g, owner, ctx)
    spec = entry.specialization_of(dim)
    if spec is not None:
        return _specialized(call, g, dim, spec, ctx)
    branch = _branch_on_exact_size(call, g)
    if branch is not None:
        return "branch on the exact size", _exact_size_remedy(call, g, branch)
    values = _seen(call, g, ctx.calls)
    user = _user_argument(call, g.arg, ctx)
    if user:
        call.user_names[g.arg or "?"], call.user_call = user
    yours = f" (`{user[0]}` in your call at {user[1]})" if user else ""
    head = f"Dimension {g.dim} of `{g.arg}`{yours} changes between calls{values}."
    if dim in ctx.model.marked_dynamic(g.entry):
        return CAUSES["shape"], (
            f"{head} The program marks it dynamic (mark_dynamic), yet entry {g.entry} compiled it as "
            f"{g.expected} and torch logged no symbol for it; run with TORCH_LOGS=dynamic to see why."
        )
    if dynamic == "True":
        if g.expected in ("0", "1"):
            return "size 0/1 specialization", (
                f"{head} {fn} is compiled with dynamic=True, but the size was {g.expected} on the first "
                "call, and torch specializes sizes 0 and 1 (they behave differently: broadcasting, empty "
                f"tensors). Keep it symbolic with torch._dynamo.decorators.mark_unbacked({g.arg}, {g.dim}) "
                f"before the first call, or make the first call with a size above 1."
            )
        return CAUSES["shape"], (
            f"{head} {fn} is compiled with dynamic=True, yet torch logged no symbol for this size in "
            f"entry {g.entry}; run with TORCH_LOGS=dynamic to see where it was specialized."
        )
    tied = tied_sizes(
        dim, [*ctx.shape_guards.get(call.compile_id or "", []), *ctx.shape_guards.get(g.entry, [])]
    )
    call.tied = [(d.arg, d.dim) for d in tied if d.dim is not None]
    for d in tied:
        named = _user_argument(call, d.arg, ctx)
        if named:
            call.user_names[d.arg], call.user_call = named
    if tied and dynamic != "False":
        return CAUSES["shape"], _tied_remedy(call, g, head, [dim, *tied])
    arg = mark_target(g.arg or "?", call.user_names)
    mark = (
        f"torch._dynamo.mark_dynamic({arg}, {g.dim}) (or maybe_mark_dynamic({arg}, {g.dim}) if it may "
        "stay static)"
    )
    if dynamic == "False":
        lead = f" {fn} is compiled with dynamic=False, so every new size compiles again: drop it, or"
    elif _promoted(call, g):
        lead = (
            " Dynamo then made it symbolic (automatic dynamic), so this recompile happens once; "
            "to avoid even that one,"
        )
    else:
        lead = " To fix it,"
    if library_keyword(g.arg or "", call.file):
        # the library's code receives it through its wrapper's **kwargs: it may specialize the size
        return CAUSES["shape"], (
            f"{head}{lead} compile with dynamic=True (torch then keeps a size fixed where the library's "
            f"code needs it), or mark it dynamic before the first call: {mark}; a mark is strict, and "
            "torch raises ConstraintViolationError if any frame the tensor reaches specializes the size."
        )
    return CAUSES["shape"], (
        f"{head}{lead} mark it dynamic before the first call: {mark}, or compile with dynamic=True."
    )


def _tied_remedy(call: Call, g: FailedGuard, head: str, dims: list[Dim]) -> str:
    """A size that a guard ties to other arguments' sizes: dynamic=True first, or every tied size marked
    together; never the one size alone (the others stay static and torch raises ConstraintViolationError)."""
    fn = call.wraps or call.function
    others = ", ".join(f"`{d.arg}` dimension {d.dim}" for d in dims[1:])
    names = [mark_target(d.arg, call.user_names) for d in dims]
    marks = "; ".join(f"torch._dynamo.mark_dynamic({n}, {d.dim})" for n, d in zip(names, dims, strict=True))
    once = (
        " Dynamo then made them symbolic (automatic dynamic), so this recompile happens once."
        if _promoted(call, g)
        else ""
    )
    return (
        f"{head} A guard of entry {call.compile_id} ties it to {others} (the entry requires them equal)."
        f"{once} Compile {fn} with dynamic=True, or mark every tied size before the first call: {marks}. "
        f"Marking `{g.arg}` alone leaves {others} static, and torch raises ConstraintViolationError where "
        "the code requires the sizes to be equal."
    )


_EXACT = re.compile(r"(?:Ne|Eq)\((?P<symbol>\w+), (?P<value>-?\d+)\)")


def _user_argument(call: Call, arg: str | None, ctx: RemedyContext) -> tuple[str, str] | None:
    """(the user's own expression, file:line) for an argument of the compiled frame, read from the line that
    called it: `compiled(input_ids=ids)` passes `kwargs['input_ids']` (a wrapper's **kwargs) as `ids`.
    None where that line does not name it by keyword once, or names it as the frame does."""
    m = re.match(r"^kwargs\['(\w+)'\](.*)$", arg or "") or re.match(r"^(\w+)(.*)$", arg or "")
    comp = ctx.model.compiles.get(call.compile_id or "")
    stack = comp.stack if comp else []
    if stack and comp and stack[-1].name == comp.co_name:  # the compiled frame itself
        stack = stack[:-1]
    users = [f for f in stack if f.origin == "user"]
    if not m or not users or users[-1].line is None:
        return None
    text = _source_line(ctx.model, users[-1].file, users[-1].line)
    try:
        tree = ast.parse(text.strip())
    except (SyntaxError, ValueError):
        return None
    values = [
        kw.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg == m.group(1)
    ]
    expr = ast.unparse(values[0]) if len(values) == 1 else None
    if expr is None or expr + m.group(2) == arg:
        return None
    return expr + m.group(2), f"{os.path.basename(users[-1].file)}:{users[-1].line}"


def _source_line(model: RunModel, file: str, line: int) -> str:
    """A line of the program as the run recorded it (or, for a live run, as it ran from disk)."""
    text = model.sources.texts.get(file)
    if text is None and model.sources.live:
        try:
            with open(file, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, ValueError):
            return ""
    lines = (text or "").splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else ""


def _branch_on_exact_size(call: Call, g: FailedGuard) -> dict[str, Any] | None:
    """The guard of the new entry's symbol that compares it with the failed entry's size (`Ne(s77, 8)` at
    `if x.shape[0] == 8:`): the code branches on that exact size, so a mark on it makes torch raise."""
    for p in call.promotions:
        if (p.arg, p.dim) != (g.arg, g.dim):
            continue
        for guard in p.guards:
            m = _EXACT.fullmatch(str(guard.get("expr", "")).strip())
            if m and m["symbol"] == p.symbol and m["value"] == g.expected:
                return guard
    return None


def _exact_size_remedy(call: Call, g: FailedGuard, guard: dict[str, Any]) -> str:
    fn = call.wraps or call.function
    line = f"line {guard['line']}" if guard.get("line") else "a line of the compiled code"
    code = f" (`{guard['code']}`)" if guard.get("code") else ""
    return (
        f"Dimension {g.dim} of `{g.arg}` was {g.expected} in entry {g.entry} and is {g.actual} now. Dynamo "
        f"made it symbolic on this recompile (automatic dynamic), and the code branches on its exact value "
        f"at {line}{code}: torch guards the new entry with {guard['expr']}, so entry {g.entry} keeps size "
        f"{g.expected} and the new one serves every other size. The recompile happens once; marking the size "
        f"dynamic makes torch raise ConstraintViolationError (the code specializes it), and dynamic=True "
        f"still compiles one entry per side of the branch. To compile {fn} once, make the branch not depend "
        "on the exact size (torch.where, or torch.cond on a size predicate)."
    )


def _reallocated(call: Call, g: FailedGuard, owner: str, ctx: RemedyContext) -> str:
    name = g.arg or "?"
    cache = re.search(r"cache|\['[kv]'\]|\['[kv]_cache'\]", name, re.I)
    what = "the KV cache" if cache else f"the {owner}"
    return (
        f"`{name}` is a registered {owner} of an nn.Module, and torch keeps the sizes of a module's "
        "parameters and buffers static (torch._dynamo.config.force_parameter_static_shapes = True): "
        f"dynamic=True and mark_dynamic do not make them symbolic. Its dimension {g.dim} was {g.expected} "
        f"when entry {g.entry} was compiled and is {g.actual} now{_seen(call, g, ctx.calls)}: the program "
        f"allocated it again with a new size. Allocate {what} once at its largest size (e.g. the longest "
        "sequence the program will handle) and reuse it, indexing by position, so every call sees one size."
    )


def _specialized(
    call: Call, g: FailedGuard, dim: Dim, spec: Specialization, ctx: RemedyContext
) -> tuple[str, str]:
    """The entry had a symbol for the size and torch replaced it by a constant: say who forced it."""
    fn = call.wraps or call.function
    dynamic = ctx.dynamic_setting(g.entry)
    how = f"{fn} is compiled with dynamic=True, so " if dynamic == "True" else ""
    forced = f"{_at(spec.at)} added the guard {spec.guard}" if spec.guard else f"{_at(spec.at)} forced it"
    tail = (
        f"torch specialized {spec.symbol} to {spec.value} ({spec.reason}): entry {g.entry} only serves "
        f"{dim.text} == {spec.value}, and {g.actual} compiled again."
    )
    partners = _coincidental(dim, spec, ctx.shapes.get(call.compile_id or ""))
    if partners:
        named = ", ".join(f"`{d.text}`" for d in partners)
        shared = ", ".join(f"`{d.text}`" for d in spec.others(dim) if d not in partners)
        also = f"; {shared} hold it too" if shared else ""
        statics = [d for d in partners if d.dim is not None]
        keep_apart = (
            f"; or keep that size out of the shared symbol: torch._dynamo.mark_static({statics[0].arg}, "
            f"{statics[0].dim}) before the first call if it is a constant"
            if statics
            else ""
        )
        return DUCK_SIZING, (
            f"{how}`{g.arg}` dimension {g.dim} had a symbol in entry {g.entry}, but on that call it was "
            f"{spec.value}, the same as {named}, so torch gave them one symbol, {spec.symbol} (duck "
            f"sizing: equal sizes share a symbol{also}); then {forced}, and {tail} Fix: turn duck sizing "
            f"off: {DUCK_CONFIG} = False (a config tcx fix can run){keep_apart}. Marking `{g.arg}` dynamic "
            "does not help: torch raises ConstraintViolationError at the line that specializes it."
        )
    return SPECIALIZED_BY_CODE, (
        f"{how}`{g.arg}` dimension {g.dim} had a symbol ({spec.symbol}) in entry {g.entry}, then {forced}, "
        f"and {tail} Make that line work for any size (e.g. -1 in view/reshape, sizes read from the "
        f"tensor itself); torch._dynamo.mark_dynamic({g.arg}, {g.dim}) makes torch raise at the line that "
        "specializes it instead of compiling a static entry."
    )


def _coincidental(dim: Dim, spec: Specialization, recompiled: CompileShapes | None) -> list[Dim]:
    """The sources that shared the size's symbol by coincidence: where the recompile logged a value
    for both, theirs differ (the prompt length moved, the other size did not); without it, every
    other source that shared the symbol."""
    others = spec.others(dim)
    if recompiled is None or dim not in recompiled.symbols:
        return others
    mine = recompiled.symbols[dim][1]
    apart = []
    for d in others:
        spec_d = recompiled.specialization_of(d)
        value = recompiled.symbols[d][1] if d in recompiled.symbols else spec_d.value if spec_d else None
        if value is not None and value != mine:
            apart.append(d)
    return apart or others


def _remedy(call: Call, g: FailedGuard, ctx: RemedyContext) -> str:
    if g.kind == "dynamic_shape":
        return (
            f"A Python branch on `{g.arg}.size({g.dim})`{_where(g)} compiles one entry per "
            "side; that is fine for a two-way branch. For one graph, make it branchless (torch.where) "
            "or use torch.cond."
        )
    if g.kind in ("dtype", "device"):
        return (
            f"`{g.arg}` arrives as {g.expected} and as {g.actual}: convert at the call site "
            f"({g.arg}.to(...)) so one entry serves, or accept one entry per {g.kind}."
        )
    if g.kind == "rank":
        return (
            f"`{g.arg}` arrives with {g.expected} and with {g.actual} dimensions: the number of dimensions "
            "is never dynamic, so each rank gets its own entry. Reshape at the call site so one rank "
            "arrives, or accept one entry per rank."
        )
    if g.kind == "length":
        return (
            f"`{g.arg}` changed (the entry has {g.arg} == {g.expected}){_where(g)}; Dynamo specializes on "
            "the length of lists, tuples and dicts. Pass the items as one tensor (torch.stack), or keep "
            "the length constant."
        )
    if g.kind in ("requires_grad", "dispatch"):
        return (
            f"`{g.arg}` sometimes requires grad and sometimes not: training and evaluation get separate "
            "entries (fine if only two); run evaluation under torch.no_grad() or pass "
            f"{g.arg}.detach() if it never needs gradients."
        )
    if g.kind in ("global", "closure", "attribute", "value"):
        what = {"global": "global", "closure": "closure variable", "attribute": "attribute"}.get(
            g.kind, "value"
        )
        return (
            f"The {what} `{g.arg}` changed ({g.expected} -> {g.actual}){_where(g)}; Dynamo bakes Python "
            "values into "
            "the graph. Pass it as a tensor argument (torch.tensor(value)) or keep it constant."
        )
    if g.kind == "int":
        return _int_remedy(g, ctx)
    if g.kind == "identity":
        return (
            f"`{g.arg}` is a new object on this call (recreated module or tensor): create it once and "
            "keep it alive, reusing it across calls."
        )
    if g.kind == "global_state":
        return _state_remedy(call, g, ctx)
    if g.kind == "type":
        return f"`{g.arg}` changed type between calls: pass the same type every time."
    first_call = set_on_first_call(g)
    if first_call is not None:
        return _first_call_remedy(g, first_call, ctx)
    if call.from_trace:  # no per-call capture: torch's log names the guard, not the values it read
        return (
            f"See the failing guard{_where(g)}: torch's log names it but not the values it read on this "
            f"call, and this recording has no per-call capture; {_recompiles_command(ctx)} records every "
            "call's values and says what to change."
        )
    return f"See the failing guard{_where(g)}; keep what it checks constant across calls."


_IS_NONE = re.compile(r"(?P<source>self(?:\.\w+)+) is None")


def set_on_first_call(g: FailedGuard) -> tuple[str, ...] | None:
    """The attribute path under the compiled module (`config.problem_type`) of a guard `self.<path> is None`
    that failed because the value is set now: state the code sets on its first call (transformers sets
    `config.problem_type` on the first call with labels). None for any other guard."""
    m = _IS_NONE.fullmatch(g.guard.strip())
    if m is None or g.actual == "None":  # None: not captured (a log); `is None` failed, so it is set now
        return None
    return tuple(m["source"].split(".")[1:])


def _first_call_remedy(g: FailedGuard, path: tuple[str, ...], ctx: RemedyContext) -> str:
    from tcx.core.analysis.empty_run import compile_calls

    attr = ".".join(path)
    modules = [c for c in compile_calls(ctx.model) if c.target[:1].isupper()]  # a class: a module compiled
    where = f" (the {modules[0].target} compiled at {modules[0].where})" if len(modules) == 1 else ""
    now, value, unknown = f"is {g.actual} now", g.actual, ""
    if g.actual is None:  # torch's log names the guard, not the value it read
        now, value = "is set now", "<the value your first call sets>"
        command = _recompiles_command(ctx)
        unknown = f" The value is in the per-call capture this recording lacks: {command} shows it."
    return (
        f"`self.{attr}` was None when entry {g.entry} was compiled and {now}: the code sets it "
        f"on the first call{_where(g)}, so the second call fails the guard. Set it before compiling, at your "
        f"call site: `model.{attr} = {value}`{where}, or make one call before torch.compile (a warm-up), "
        f"so every compiled call sees the value.{unknown}"
    )


def _recompiles_command(ctx: RemedyContext) -> str:
    """The command that records every call's values (the per-call capture) for this run's program."""
    target = str(ctx.model.target or "")
    program = os.path.relpath(target) if target.endswith(".py") and os.path.isabs(target) else target
    return f"`tcx recompiles {program if program.endswith('.py') else 'PROGRAM'}`"


def _state_changes(call: Call, g: FailedGuard, ctx: RemedyContext) -> list[str]:
    old, new = ctx.states.get(g.entry, {}), ctx.states.get(call.compile_id or "", {})
    return [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]


def expected_reason(call: Call, g: FailedGuard, ctx: RemedyContext) -> str | None:
    """Why a recompile is expected, not a problem: only grad mode differs from the entry it missed
    (training and evaluation under torch.no_grad() each get one entry of the frame). tcx cost lists it
    as expected and tcx fix does not try to remove it."""
    if g.kind == "global_state" and _state_changes(call, g, ctx) == ["grad_mode"]:
        return "grad mode: training and evaluation each get one cache entry of the frame"
    return None


def _state_remedy(call: Call, g: FailedGuard, ctx: RemedyContext) -> str:
    old, new = ctx.states.get(g.entry, {}), ctx.states.get(call.compile_id or "", {})
    changed = _state_changes(call, g, ctx)
    if changed == ["grad_mode"]:
        return (
            f"Only grad mode differs from entry {g.entry} (grad_mode {old['grad_mode']} there, "
            f"{new.get('grad_mode')} here): training and evaluation under torch.no_grad() each get one "
            "entry of the same frame. Two entries are expected and each serves its mode; nothing to fix "
            "unless more modes appear."
        )
    what = ", ".join(f"{k} {old.get(k)} → {new.get(k)}" for k in changed) or "grad mode, autocast, ..."
    return (
        f"Global state differs from when entry {g.entry} was compiled ({what}): call the compiled function "
        "under one consistent mode, or accept one entry per mode."
    )


def _int_remedy(g: FailedGuard, ctx: RemedyContext) -> str:
    head = f"The Python int `{g.arg}` is specialized ({g.arg} == {g.expected}, now {g.actual}){_where(g)}."
    spec = (ctx.shapes.get(g.entry) or CompileShapes()).specialization_of(Dim(g.arg or "?", None))
    if spec is not None:
        forced = f"{_at(spec.at)} added the guard {spec.guard}" if spec.guard else f"{_at(spec.at)} forced it"
        return (
            f"{head} It had a symbol ({spec.symbol}) in entry {g.entry}; then {forced} and torch specialized "
            f"it to {spec.value} ({spec.reason}). Make that line work for any value, or pass it as a tensor."
        )
    comp = ctx.model.compiles.get(g.entry)
    if json_object((comp.metrics if comp else {}).get("dynamo_config")).get("specialize_int") is True:
        return (
            f"{head} torch._dynamo.config.specialize_int = True in this run specializes every int input: "
            "set it to False (the default), or pass the value as a tensor."
        )
    if ctx.dynamic_setting(g.entry) == "True":
        return (
            f"{head} The frame is compiled with dynamic=True, yet torch logged no symbol for it in entry "
            f"{g.entry}; pass it as a tensor, or run with TORCH_LOGS=dynamic to see why."
        )
    return (
        f"{head} Pass it as a tensor, or let Dynamo make it symbolic: dynamic=True (or drop dynamic=False); "
        "torch._dynamo.mark_dynamic does not apply to ints."
    )


def _limit_remedy(call: Call, calls: list[Call], cfg: dict[str, Any]) -> str:
    causes = [c.cause for c in calls if c.function == call.function and c.outcome == "recompile" and c.cause]
    top = max(set(causes), key=causes.count) if causes else None
    cfg_name = cfg.get("config") or "torch._dynamo.config.recompile_limit"
    value = cfg.get("limit")
    first = (
        f"fix the cause of the recompiles ({top}) — see the remedy on those calls"
        if top
        else "fix the recompiles"
    )
    return (
        f"{call.function} runs in eager Python from now on: {first}; "
        "torch.compiler.set_stance('eager_on_recompile') makes later misses run eager on purpose without "
        f"compiling; raising {cfg_name} (now {value}) is the last resort."
    )


def _dim_values(calls: list[Call], fn: str, arg: str | None, dim: int | None) -> list[int]:
    out = []
    for c in calls:
        if c.function != fn or not c.args or dim is None:
            continue
        for a in c.args:
            if a.get("name") == arg and a.get("kind") == "tensor" and dim < len(a.get("shape", [])):
                out.append(a["shape"][dim])
    return out
