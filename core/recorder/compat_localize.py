"""Compatibility layer for `tcx numerics`: where, in a compiled graph, a divergent call stops matching eager.

Two ways in, one probe:
- in the compiled run itself ("auto"): the eager run came first, so each outermost compiled call's
  outputs are compared with eager's as soon as the call returns (core/numerics/compare.py); while a call
  runs, every graph it calls keeps a copy of its inputs and the random-number state. The first call that
  diverges has its graphs probed there and then, so the common case needs no further run;
- in a localization run ("target"): the program compiled once more, the graphs of the named call
  (`function`, `index`) probed as they are called, before their compiled code runs.

A probe replays one graph on its own inputs, in this process:
1. Reference: the graph Dynamo captured (its FX GraphModule) run eagerly, node by node
   (`torch.fx.Interpreter`), under the float64 shadow (core/recorder/compat_shadow.py): every node's
   eager value and its float64 twin.
2. Stage: the same graph compiled by each stage of torch.compile's ladder, `aot_eager` (AOTAutograd),
   `aot_eager_decomp_partition` (its decompositions and partitioner), then the program's own backend
   (Inductor), each run on copies of the same inputs with the same random-number state, judged against
   the reference (core/numerics/judge.py); the first stage that diverges is the stage.
3. Node: the graph with every intermediate value as an extra output, compiled by that stage; the first
   node (in the graph's order) whose value diverges, with the user's line from its `stack_trace`.
4. Pass: torch's `CompilerBisector` (torch._inductor.compiler_bisector, private, feature-detected), run
   in process with tcx's judgement as its pass/fail: the backend, subsystem and numbered application
   (e.g. `post_grad_passes` #8, `post_grad_custom_post_pass`) that makes the difference.
The user's custom Inductor passes (`torch._inductor.config.*custom*pass`) are named with their function
and line. Torch's trace and logs are dropped while a probe compiles (they are tcx's compiles, not the
program's); the random-number state is put back and the program goes on.

Private API touched, feature-detected: `torch._dynamo.output_graph.OutputGraph.call_user_compiler` (the
graph and backend of each compile), `torch._dynamo.lookup_backend`, `torch._inductor.config`,
`torch._inductor.compiler_bisector.CompilerBisector`.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import io
import time
from collections.abc import Callable
from typing import Any

import torch

from tcx.core.frames import innermost_user_frame, parse_stack_trace
from tcx.core.ingest.recording import RecordingWriter
from tcx.core.numerics.judge import Judgement, Tolerance, judge
from tcx.core.recorder.compat import current_compile_id, unavailable

MAX_GRAPHS = 8  # graphs probed in the divergent call
MAX_AUTO_CALLS = 50  # calls whose graphs' inputs the compiled run copies, until one diverges
MAX_NODES = 2000  # intermediate values a graph is compiled with as outputs
DEFAULT_MAX_COMPILES = 40  # compiles the bisector may make per graph
CUSTOM_PASSES = (
    "pre_grad_custom_pass",
    "joint_custom_pre_pass",
    "joint_custom_post_pass",
    "post_grad_custom_pre_pass",
    "post_grad_custom_post_pass",
)
LADDER = ("aot_eager", "aot_eager_decomp_partition")
# Ops that draw random numbers: their compiled values differ from eager's unless Inductor falls back
# to eager's generator (torch._inductor.config.fallback_random).
RANDOM_NAMES = ("dropout", "rand", "bernoulli", "normal", "multinomial", "rrelu", "exponential", "poisson")


class _State:
    def __init__(self) -> None:
        self.writer: RecordingWriter | None = None
        self.target: tuple[str, int] | None = None  # "target": the call to probe
        self.eager_values: str | None = None  # "auto": the eager run's kept values
        self.eager: dict[tuple[str, str | None, int], Any] | None = None
        self.stash: list[tuple[dict[str, Any], list[Any], Any]] | None = None  # "auto": the call in progress
        self.calls_compared = 0
        self.done = False
        self.tolerance = Tolerance()
        self.max_compiles = DEFAULT_MAX_COMPILES
        self.probed: set[str] = set()
        self.current: Callable[[], tuple[str, int] | None] = lambda: None  # the outermost call in progress


STATE = _State()


def install(
    writer: RecordingWriter, spec: dict[str, Any], current: Callable[[], tuple[str, int] | None]
) -> str | None:
    """Probe the graphs of the call `spec` names (function, index), or of the first call whose outputs
    differ from those in `spec["eager_values"]`; `current()` says which outermost compiled call is in
    progress (core/recorder/compat_numerics.py counts them). None when installed, else why not."""
    try:
        import torch._dynamo.output_graph as og
        from torch._dynamo import lookup_backend  # noqa: F401

        original = og.OutputGraph.call_user_compiler
    except (ImportError, AttributeError) as exc:
        return unavailable("localizing a divergence (OutputGraph.call_user_compiler)", exc)
    STATE.writer = writer
    STATE.current = current
    if spec.get("function") is not None:
        STATE.target = (str(spec["function"]), int(spec["index"]))
    STATE.eager_values = spec.get("eager_values")
    tol = spec.get("tolerance") or {}
    STATE.tolerance = Tolerance(tol.get("multiplier"), tol.get("rtol"), tol.get("atol"))
    STATE.max_compiles = int(spec.get("max_compiles") or DEFAULT_MAX_COMPILES)

    @functools.wraps(original)
    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        try:
            saved = copy.deepcopy(gm)  # the backend may change the graph it is given
        except Exception:
            saved = None
        compiled = original(self, gm, example_inputs)
        cid, _ = current_compile_id()
        if saved is None or cid is None or not callable(compiled):
            return compiled
        graph = {"compile_id": cid, "gm": saved, "compiler_fn": getattr(self, "compiler_fn", None)}

        @functools.wraps(compiled)
        def tcx_numerics_graph(*args: Any) -> Any:  # Dynamo calls a graph with its inputs, unboxed
            if _wanted(cid):
                STATE.probed.add(cid)
                _probe_safely(graph, list(args), _rng_state())
            elif _stashing(cid):
                STATE.stash.append((graph, _clones(list(args)), _rng_state()))
            return compiled(*args)

        return tcx_numerics_graph

    og.OutputGraph.call_user_compiler = call_user_compiler
    return None


def _wanted(cid: str) -> bool:
    return (
        STATE.target is not None
        and STATE.current() == STATE.target
        and cid not in STATE.probed
        and len(STATE.probed) < MAX_GRAPHS
    )


def _stashing(cid: str) -> bool:
    """In the call in progress ("auto"), this graph's first call: keep its inputs until the call is judged."""
    stash = STATE.stash
    return stash is not None and len(stash) < MAX_GRAPHS and all(g["compile_id"] != cid for g, _, _ in stash)


def begin_call() -> None:
    """An outermost compiled call starts ("auto"): keep its graphs' inputs until it is judged."""
    if STATE.eager_values and not STATE.done and STATE.calls_compared < MAX_AUTO_CALLS:
        STATE.stash = []


def end_call(record: dict[str, Any] | None) -> None:
    """The call returned and its outputs were kept ("auto"): judge them against eager's; when they
    diverge, probe the graphs it ran."""
    stash, STATE.stash = STATE.stash, None
    if stash is None or record is None:
        return
    STATE.calls_compared += 1
    eager = _eager_record(record)
    if eager is None:
        return
    from tcx.core.numerics.compare import _check

    if _check(record, eager, STATE.tolerance).within:
        return
    STATE.done = True
    now = _rng_state()
    try:
        for graph, inputs, rng in stash:
            _probe_safely(graph, inputs, rng, index=int(record["index"]), function=record.get("function"))
    finally:
        _set_rng(now)


def _eager_record(record: dict[str, Any]) -> dict[str, Any] | None:
    if STATE.eager is None:
        try:
            doc = torch.load(str(STATE.eager_values), weights_only=True)
        except Exception:
            STATE.done = True  # no eager values: nothing to judge against here
            return None
        STATE.eager = {(r["kind"], r.get("function"), int(r["index"])): r for r in doc.get("records") or []}
    return STATE.eager.get((record["kind"], record.get("function"), int(record["index"])))


def _probe_safely(
    graph: dict[str, Any],
    inputs: list[Any],
    rng: Any,
    *,
    index: int | None = None,
    function: str | None = None,
) -> None:
    from tcx.core.recorder.handlers import quiet

    started = time.monotonic()
    target = STATE.target or (function, index)
    event: dict[str, Any] = {"compile_id": graph["compile_id"], "function": target[0], "index": target[1]}
    try:
        with quiet(), torch.set_grad_enabled(bool(rng.get("grad", True))):
            event.update(_probe(graph, inputs, rng))
    except Exception as exc:  # a probe that fails says so; the program goes on
        event["error"] = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        _set_rng(rng)
    event["seconds"] = round(time.monotonic() - started, 3)
    if STATE.writer is not None:
        STATE.writer.write("numerics_probe", **event)


# ---------------------------------------------------------------------------- one graph


def _probe(graph: dict[str, Any], inputs: list[Any], rng: Any) -> dict[str, Any]:
    gm = graph["gm"]
    nodes, eager_out = _reference(gm, inputs, rng)
    backend_name, program_backend = _program_backend(graph.get("compiler_fn"))
    ladder: list[tuple[str, Callable[..., Any]]] = [(name, _lookup(name)) for name in LADDER]
    if backend_name in LADDER:
        ladder = ladder[: LADDER.index(backend_name) + 1]
    elif backend_name != "eager":
        ladder.append((backend_name, program_backend))
    stages, failing = [], None
    for name, backend in ladder:
        outs = _compiled_outputs(backend, gm, inputs, rng)
        judged = [
            judge(label, c, e, r, STATE.tolerance) for (label, e, r), c in zip(eager_out, outs, strict=True)
        ]
        stages.append(_stage_json(name, judged))
        if not all(j.within for j in judged):
            failing = (name, backend)
            break
    result: dict[str, Any] = {
        "backend": backend_name,
        "stages": stages,
        "stage": failing[0] if failing else None,
        "custom_passes": _custom_passes(),
        "graph_nodes": len(nodes),
    }
    if failing:
        result["node"] = _first_node(failing[1], gm, inputs, rng, nodes)
        result["bisect"] = _bisect(gm, inputs, rng, eager_out, backend_name, program_backend)
    return result


def _reference(gm: Any, inputs: list[Any], rng: Any) -> tuple[dict[str, Any], list[Any]]:
    """Each node's eager value and float64 twin, and the graph's outputs (label, eager, float64)."""
    from tcx.core.recorder.compat_shadow import make_mode

    mode = make_mode()
    values: dict[str, tuple[torch.Tensor, torch.Tensor | None]] = {}

    class Collect(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            result = super().run_node(n)
            if isinstance(result, torch.Tensor) and n.op not in ("placeholder", "get_attr"):
                with mode.paused_for_tcx():
                    values[n.name] = (result.detach().clone(), _twin(mode, result))
            return result

    _set_rng(rng)
    with mode:
        out = Collect(copy.deepcopy(gm)).run(*_clones(inputs))
    with mode.paused_for_tcx():
        flat = [t for t in _flat(out)]
        outputs = [(f"output {i}", t.detach().clone(), _twin(mode, t)) for i, t in enumerate(flat)]
    return values, outputs


def _twin(mode: Any, t: torch.Tensor) -> torch.Tensor | None:
    shadow = mode.shadow(t)
    return shadow.detach().clone() if shadow is not None and mode.computed(t) else None


def _compiled_outputs(
    backend: Callable[..., Any], gm: Any, inputs: list[Any], rng: Any
) -> list[torch.Tensor]:
    compiled = backend(copy.deepcopy(gm), _clones(inputs))
    _set_rng(rng)
    out = compiled(*_clones(inputs))
    return [t.detach() for t in _flat(out)]


def _first_node(
    backend: Callable[..., Any], gm: Any, inputs: list[Any], rng: Any, values: dict[str, Any]
) -> dict[str, Any]:
    """The first node whose value the stage computes differently: the graph is compiled with every
    intermediate value as an extra output (at most MAX_NODES of them)."""
    probe = copy.deepcopy(gm)
    wanted = [n for n in probe.graph.nodes if n.name in values][:MAX_NODES]
    output = next(n for n in probe.graph.nodes if n.op == "output")
    original = output.args[0]
    first = list(original) if isinstance(original, (tuple, list)) else [original]
    output.args = ((*first, *wanted),)
    probe.recompile()
    outs = _compiled_outputs(backend, probe, inputs, rng)
    outs = outs[len(outs) - len(wanted) :]
    checked = 0
    for node, value in zip(wanted, outs, strict=True):
        eager, twin = values[node.name]
        if not isinstance(value, torch.Tensor):
            continue
        checked += 1
        verdict = judge(node.name, value, eager, twin, STATE.tolerance)
        if not verdict.within:
            return {**_node_json(node), "judgement": verdict.to_json(), "checked": checked}
    return {
        "name": None,
        "checked": checked,
        "why": "no intermediate value diverges when every one is kept as an output",
    }


def _node_json(node: Any) -> dict[str, Any]:
    frames = parse_stack_trace(node.meta.get("stack_trace") or "")
    frame = innermost_user_frame(frames) if frames else None
    value = node.meta.get("example_value")
    return {
        "name": node.name,
        "op": _op_name(node),
        "file": frame["file"] if frame else None,
        "line": frame["line"] if frame else None,
        "code": frame["code"] if frame else None,
        "dtype": str(value.dtype).removeprefix("torch.") if isinstance(value, torch.Tensor) else None,
        "random": any(word in _op_name(node).lower() for word in RANDOM_NAMES),
    }


def _op_name(node: Any) -> str:
    target = node.target
    if node.op == "call_method":
        return f"Tensor.{target}"
    if node.op == "call_module":
        return str(target)
    name = getattr(target, "__name__", None) or str(target)
    module = getattr(target, "__module__", None) or ""
    if module.startswith("torch._C._nn") or module == "torch.nn.functional":
        return f"torch.nn.functional.{name}"
    if module.startswith("torch") or "built-in method" in str(target):
        return f"torch.{name}" if not module.startswith("torch._ops") else str(target)
    return f"{module}.{name}" if module else name


# ---------------------------------------------------------------------------- torch's bisector


class _Budget(Exception):
    """The bisector asked for more compiles than allowed."""


def _bisect(
    gm: Any, inputs: list[Any], rng: Any, eager_out: list[Any], backend_name: str, program_backend: Any
) -> dict[str, Any]:
    try:
        from torch._inductor.compiler_bisector import CompilerBisector

        do_bisect = CompilerBisector.do_bisect
    except (ImportError, AttributeError) as exc:
        return {"unavailable": unavailable("torch's CompilerBisector", exc)}
    import torch._inductor.config as inductor_config

    calls: list[dict[str, Any]] = []

    def passes() -> bool:
        if len(calls) >= STATE.max_compiles:
            raise _Budget
        backend = CompilerBisector.get_backend() or "inductor"
        step = {"backend": backend, "subsystem": CompilerBisector.get_subsystem()}
        calls.append(step)
        if backend == "eager":  # the graph run as captured: the reference itself
            step["within"] = True
            return True
        changes = CompilerBisector.get_config_change("inductor") if backend == "inductor" else None
        chosen = program_backend if backend == backend_name and program_backend else _lookup(backend)
        with inductor_config.patch(changes or {}):
            outs = _compiled_outputs(chosen, gm, inputs, rng)
        step["within"] = all(
            judge(label, c, e, r, STATE.tolerance).within
            for (label, e, r), c in zip(eager_out, outs, strict=True)
        )
        return bool(step["within"])

    log = io.StringIO()
    out: dict[str, Any] = {}
    try:
        with contextlib.redirect_stdout(log):
            result = do_bisect(passes)
        if result is None:
            out["result"] = None
        else:
            out["result"] = {
                "backend": result.backend,
                "subsystem": result.subsystem,
                "bisect_number": result.bisect_number,
                "debug_info": None if result.debug_info is None else str(result.debug_info)[:500],
            }
    except _Budget:
        out["stopped"] = f"stopped after {STATE.max_compiles} compiles"
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        CompilerBisector.bisection_enabled = False
    out["compiles"] = len(calls)
    out["log"] = log.getvalue()[-4000:]
    return out


# ---------------------------------------------------------------------------- helpers


def _program_backend(compiler_fn: Any) -> tuple[str, Any]:
    """The program's backend: its name (Inductor's wrapper says "inductor") and the callable itself."""
    inner = compiler_fn
    for _ in range(5):  # Dynamo wraps backends (debug wrappers keep the original as compiler_fn)
        name = getattr(inner, "compiler_name", None)
        if isinstance(name, str):
            return name, compiler_fn
        inner = getattr(inner, "compiler_fn", None) or getattr(inner, "_torchdynamo_orig_backend", None)
        if inner is None:
            break
    name = getattr(compiler_fn, "__name__", None) or type(compiler_fn).__name__
    return str(name), compiler_fn


def _lookup(name: str) -> Callable[..., Any]:
    from torch._dynamo import lookup_backend

    backend: Callable[..., Any] = lookup_backend(name)
    return backend


def _custom_passes() -> dict[str, dict[str, Any]]:
    """The user's custom Inductor passes, set in torch._inductor.config: name -> function, file, line."""
    try:
        import torch._inductor.config as inductor_config
    except ImportError:
        return {}
    out = {}
    for name in CUSTOM_PASSES:
        value = getattr(inductor_config, name, None)
        if value is None:
            continue
        fn = value if inspect.isfunction(value) or inspect.ismethod(value) else type(value)
        try:
            file, line = inspect.getsourcefile(fn), inspect.getsourcelines(fn)[1]
        except (OSError, TypeError):
            file, line = None, None
        out[name] = {"function": getattr(fn, "__qualname__", repr(value))[:200], "file": file, "line": line}
    return out


def _stage_json(name: str, judged: list[Judgement]) -> dict[str, Any]:
    worst = max(judged, key=lambda j: (not j.within, j.max_abs or 0.0), default=None)
    return {
        "backend": name,
        "within": all(j.within for j in judged),
        "worst": worst.to_json() if worst else None,
    }


def _flat(out: Any) -> list[torch.Tensor]:
    from torch.utils._pytree import tree_flatten

    return [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


def _clones(inputs: list[Any]) -> list[Any]:
    return [
        x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x
        for x in inputs
    ]


def _rng_state() -> dict[str, Any]:
    """The random-number state (and grad mode) a graph was called with: each replay starts from it."""
    state: dict[str, Any] = {"cpu": torch.get_rng_state(), "grad": torch.is_grad_enabled()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])
