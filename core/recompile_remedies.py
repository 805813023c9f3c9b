"""What to change when a frame recompiles: the cause of each recompile (its first failing guard)
and a remedy that names a concrete API or code change. The graph-break counterpart is
core/remedies.py.

Pure and torch-free; fills in the `cause` and `remedy` of the recompiles view's calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tcx.core.analysis import RunModel
    from tcx.core.recompiles import Call, FailedGuard

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


def explain_call(call: Call, calls: list[Call], model: RunModel, limit: dict[str, Any]) -> None:
    """Set `call.cause` and `call.remedy`: why it recompiled (or ran eager), and what to change."""
    if call.outcome == "eager":
        cfg = call.limit or limit
        if limit.get("hit") or call.failed_guards:
            call.cause = CAUSES["recompile_limit"]
            call.remedy = _limit_remedy(call, calls, cfg)
        else:
            call.cause = "not compiled (Dynamo skipped the frame or its compile failed)"
            call.remedy = f"Run `tcx explain` on this target to see why {call.function} was not compiled."
        return
    if call.outcome != "recompile" or not call.failed_guards:
        return
    g = call.failed_guards[0]
    call.cause = CAUSES.get(g.kind, CAUSES["other"])
    call.remedy = _remedy(call, g, calls, model)


def _where(g: FailedGuard) -> str:
    if g.file and g.line:
        return f" (guard from {g.file}:{g.line}{': ' + g.code if g.code else ''})"
    return ""


def _asked_static(model: RunModel) -> bool:
    return any(str(c.get("used", {}).get("dynamic")) == "False" for c in model.compile_calls)


def _promoted(call: Call, g: FailedGuard) -> bool:
    return any(p.arg == g.arg and p.dim == g.dim for p in call.promotions)


def _remedy(call: Call, g: FailedGuard, calls: list[Call], model: RunModel) -> str:
    fn = call.function
    if g.kind == "shape":
        seen = sorted({s for s in _dim_values(calls, fn, g.arg, g.dim)})
        values = f" (seen: {', '.join(map(str, seen))})" if len(seen) > 1 else ""
        if _asked_static(model):
            lead = " The program compiles with dynamic=False, so every new size compiles again: drop it, or"
        elif _promoted(call, g):
            lead = (
                " Dynamo then made it symbolic (automatic dynamic), so this recompile happens once; "
                "to avoid even that one,"
            )
        else:
            lead = ""
        return (
            f"Dimension {g.dim} of `{g.arg}` changes between calls{values}.{lead or ' To fix it,'} mark it "
            f"dynamic before the first call: torch._dynamo.mark_dynamic({g.arg}, {g.dim}) (or "
            f"maybe_mark_dynamic({g.arg}, {g.dim}) if it may stay static), or compile with dynamic=True."
        )
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
        return (
            f"The Python int `{g.arg}` is specialized ({g.arg} == {g.expected}, now {g.actual}){_where(g)}. "
            "Pass it as a tensor, or let Dynamo make it symbolic: dynamic=True (or drop dynamic=False), "
            "torch._dynamo.mark_dynamic does not apply to ints."
        )
    if g.kind == "identity":
        return (
            f"`{g.arg}` is a new object on this call (recreated module or tensor): create it once and "
            "keep it alive, reusing it across calls."
        )
    if g.kind == "global_state":
        return (
            "Global state (grad mode, autocast, deterministic algorithms) differs from when the entry was "
            "compiled: call the compiled function under one consistent mode, or accept one entry per mode."
        )
    if g.kind == "type":
        return f"`{g.arg}` changed type between calls: pass the same type every time."
    return "See the failing guard; keep what it checks constant across calls."


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
