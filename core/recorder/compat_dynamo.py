"""Compatibility layer for `tcx trace`, `tcx guards` and `tcx bytecode`: what Dynamo did inside a frame.

The only place that touches the private torch APIs behind those views; each installer
feature-detects what it needs and returns a one-line "not available on torch X.Y" reason
instead of failing. Formatting never raises into Dynamo: every probe is wrapped.

- `InstructionTranslatorBase.step` / `.run` — one record per executed instruction: offset,
  opcode, argument, line, the simulated stack *before* it (readable VariableTrackers), the
  guards it installed, how a jump was decided. Inlined calls nest (`depth`).
- `SubgraphTracer.create_node` — the FX nodes each instruction created (Node objects are
  kept until the compile ends, so later renames and dead-code elimination show).
- `InstructionTranslatorBase.log_graph_break` — marks the instruction where the graph broke.
- `GuardsSet.add` — attributes each Dynamo guard to the instruction that installed it.
- `torch._dynamo.convert_frame.register_bytecode_hook` — original and transformed code.
- `torch._dynamo.guards.CheckFunctionManager.__init__` — the guards of each new cache entry
  (`output_graph.guards`, what compilation_metrics counts) with the guard tree's text.
- `torch._dynamo.eval_frame._debug_get_cache_entry_list` — cache entries alive at the end.
"""

from __future__ import annotations

import contextlib
import dis
import functools
import inspect
import io
import re
from typing import Any

from tcx.core.ingest.recording import RecordingWriter
from tcx.core.recorder.compat import current_compile_id, unavailable
from tcx.core.torchtext.locations import guard_location
from tcx.core.torchtext.names import is_generated_global, is_resume

MAX_RECORDS = 50_000  # instructions kept per compile attempt; the rest are counted
MAX_ITEM = 160  # characters of one formatted stack item (a longer one says how many were left out)
MAX_SEQ = 6  # items of a tuple/list shown
_JUMP = re.compile(r"JUMP.*IF|IF.*JUMP")


class _State:
    def __init__(self) -> None:
        self.writer: RecordingWriter | None = None
        self.current: list[dict[str, Any]] = []  # active records (inlining nests step calls)
        self.records: list[dict[str, Any]] = []  # the compile attempt in progress
        self.key: tuple[Any, Any] | None = None
        self.meta: dict[str, Any] = {}
        self.elided = 0
        self.unattributed: list[Any] = []
        self.codes: dict[int, Any] = {}  # id(code) -> code compiled (for the end-of-run cache walk)


STATE = _State()


# ---------------------------------------------------------------------------------------------
# VariableTracker formatting


def _src(vt: Any) -> str | None:
    src = getattr(vt, "source", None)
    if src is None:
        return None
    try:
        name = src.name
        name = name() if callable(name) else name
        return str(name)
    except Exception:
        return None


def _dtype(dt: Any) -> str:
    return str(dt).removeprefix("torch.")


def _shape(value: Any) -> str:
    try:
        return "[" + ", ".join(str(s) for s in value.shape) + "]"
    except Exception:
        return "[?]"


def _short(text: str, limit: int = MAX_ITEM) -> str:
    """`text`, or its first `limit` characters and how many more there were (never a silent cut)."""
    return text if len(text) <= limit else f"{text[:limit]}…(+{len(text) - limit} chars)"


def _qualname(value: Any) -> str:
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    module = getattr(value, "__module__", None)
    if isinstance(name, str):
        if module in ("torch", "torch._C._VariableFunctions") or (module or "").startswith(
            "torch.nn.functional"
        ):
            return f"torch.{name}" if module == "torch" else name
        return name
    return type(value).__name__


def format_vt(vt: Any, depth: int = 0) -> str:
    """A readable VariableTracker; never raises and never realizes a lazy value (no new guards)."""
    try:
        return _short(_format_vt(vt, depth))
    except Exception as exc:
        return f"{type(vt).__name__}<{type(exc).__name__}>"


def _format_vt(vt: Any, depth: int) -> str:
    from torch._dynamo.variables.lazy import LazyVariableTracker

    if isinstance(vt, LazyVariableTracker):
        if vt.is_realized():
            return _format_vt(vt.unwrap(), depth)
        src = _src(vt)
        try:
            kind = vt.peek_type().__name__
        except Exception:
            kind = "?"
        return f"lazy {kind} {src}" if src else f"lazy {kind}"
    cls = type(vt).__name__
    kind = cls.removesuffix("Variable") or cls
    src = _src(vt)
    at = f" @{src}" if src else ""
    if cls in ("TensorVariable", "NumpyNdarrayVariable") or (
        hasattr(vt, "proxy") and cls.endswith("TensorVariable")
    ):
        node = vt.proxy.node
        ev = node.meta.get("example_value")
        meta = "" if ev is None else f" {_dtype(getattr(ev, 'dtype', '?'))}{_shape(ev)}"
        return f"T(%{node.name}{meta}){at}"
    if cls == "SymNodeVariable":
        node = vt.proxy.node
        return f"Sym({vt.sym_num} %{node.name})"
    if cls == "ConstantVariable":
        return repr(vt.value)
    if cls == "NullVariable":
        return "NULL"
    if cls in ("SizeVariable", "TupleVariable", "ListVariable", "TorchSizeVariable"):
        items = list(getattr(vt, "items", []))
        if depth > 1:
            return f"{kind}(…{len(items)})"
        shown = ", ".join(_format_vt(i, depth + 1) for i in items[:MAX_SEQ])
        more = f", …+{len(items) - MAX_SEQ}" if len(items) > MAX_SEQ else ""
        open_, close = ("[", "]") if cls == "ListVariable" else ("(", ")")
        prefix = "Size" if cls in ("SizeVariable", "TorchSizeVariable") else ""
        return f"{prefix}{open_}{shown}{more}{close}"
    if cls in ("TorchInGraphFunctionVariable", "TorchVariable"):
        return f"fn {_qualname(vt.value)}"
    if cls in ("UserFunctionVariable", "SkipFunctionVariable", "NestedUserFunctionVariable"):
        fn = getattr(vt, "fn", None) or getattr(vt, "value", None)
        return f"fn {_qualname(fn)}{at}" if fn is not None else f"{kind}{at}"
    if cls == "BuiltinVariable":
        return f"builtin {getattr(vt.fn, '__name__', '?')}"
    if cls == "PythonModuleVariable":
        return f"module {getattr(vt.value, '__name__', '?')}"
    if cls in ("NNModuleVariable", "UnspecializedNNModuleVariable", "UnspecializedBuiltinNNModuleVariable"):
        value = getattr(vt, "value", None)
        name = type(value).__name__ if value is not None else getattr(vt, "module_type", type(None)).__name__
        return f"module {name}{at}"
    if cls == "GetAttrVariable":
        return f"attr .{getattr(vt, 'name', '?')}{at}"
    if cls in ("UserMethodVariable",):
        return f"method {_qualname(getattr(vt, 'fn', None))}{at}"
    return f"{kind}{at}"


# ---------------------------------------------------------------------------------------------
# Per-instruction capture


def _argval(inst: Any) -> Any:
    value = inst.argval
    if value is None or isinstance(value, (int, float, bool, str)):
        return value
    return _short(repr(value) if not hasattr(value, "co_name") else f"<code {value.co_name}>", 60)


def _argrepr(inst: Any) -> str:
    text = str(getattr(inst, "argrepr", "") or "")
    if not text and inst.opname == "BINARY_OP":  # Dynamo's instructions leave it empty: `@`, `+`, ...
        with contextlib.suppress(Exception):
            text = dis._nb_ops[inst.arg][1]  # type: ignore[attr-defined]
    return _short(text, 60)


def install_instruction_capture(writer: RecordingWriter) -> str | None:
    """Wrap step/run/create_node/log_graph_break/GuardsSet.add; None when installed."""
    try:
        import torch._dynamo.output_graph as og
        import torch._dynamo.symbolic_convert as sc
        import torch._guards as tg

        base = sc.InstructionTranslatorBase
        orig_step, orig_run, orig_log = base.step, base.run, base.log_graph_break
        orig_create = og.SubgraphTracer.create_node
        orig_add = tg.GuardsSet.add
        from torch._dynamo.variables.lazy import LazyVariableTracker  # noqa: F401 - feature check
    except (ImportError, AttributeError) as exc:
        return unavailable("the per-instruction trace (simulated stack, FX nodes)", exc)
    STATE.writer = writer
    try:
        add_takes_skip = "skip" in inspect.signature(orig_add).parameters
    except (TypeError, ValueError):
        add_takes_skip = False

    @functools.wraps(orig_step)
    def step(self: Any) -> Any:
        try:
            rec = _begin(self)
        except Exception:
            rec = None
        if rec is None:
            return orig_step(self)
        STATE.current.append(rec)
        shape_env = _shape_env(self)
        before = len(shape_env.guards) if shape_env is not None else 0
        try:
            return orig_step(self)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                rec["exc"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
            raise
        finally:
            STATE.current.pop()
            with contextlib.suppress(Exception):
                _end(self, rec, shape_env, before)

    @functools.wraps(orig_run)
    def run(self: Any) -> Any:
        try:
            return orig_run(self)
        finally:
            if getattr(self, "parent", None) is None:  # the frame's own translator, not an inlined one
                with contextlib.suppress(Exception):
                    flush_instructions()

    @functools.wraps(orig_create)
    def create_node(self: Any, *args: Any, **kwargs: Any) -> Any:
        node = orig_create(self, *args, **kwargs)
        with contextlib.suppress(Exception):
            entry = (node, node.name, getattr(self, "parent", None) is not None)
            if STATE.current:
                STATE.current[-1]["_nodes"].append(entry)
            else:
                STATE.unattributed.append(entry)
        return node

    @functools.wraps(orig_log)
    def log_graph_break(self: Any, code_options: Any, reason: str, exc: Any) -> Any:
        with contextlib.suppress(Exception):
            if STATE.current and STATE.current[-1].get("graph_break") is None:
                STATE.current[-1]["graph_break"] = {
                    "reason": str(reason).splitlines()[0][:300] if reason else "",
                    "gb_type": getattr(exc, "gb_type", None) or type(exc).__name__,
                }
        return orig_log(self, code_options, reason, exc)

    @functools.wraps(orig_add)
    def add(self: Any, guard: Any, *args: Any, **kwargs: Any) -> Any:
        if STATE.current:
            with contextlib.suppress(Exception):
                if guard not in self.inner:
                    STATE.current[-1]["guards"].append(_guard_label(guard))
        if add_takes_skip:  # keep torch's guard stack pointing at Dynamo, not at this wrapper
            kwargs["skip"] = kwargs.get("skip", 0) + 1
        return orig_add(self, guard, *args, **kwargs)

    base.step, base.run, base.log_graph_break = step, run, log_graph_break
    og.SubgraphTracer.create_node = create_node
    tg.GuardsSet.add = add
    from tcx.core.recorder.captures import at_end

    at_end(flush_instructions)
    return None


def _shape_env(tx: Any) -> Any:
    try:
        return tx.output.shape_env
    except Exception:
        return None


def _begin(tx: Any) -> dict[str, Any] | None:
    ip = tx.instruction_pointer
    if ip is None:
        return None
    inst = tx.instructions[ip]
    compile_id, attempt = current_compile_id()
    key = (compile_id, attempt)
    if key != STATE.key:
        flush_instructions()
        STATE.key = key
        root = tx
        while getattr(root, "parent", None) is not None:
            root = root.parent
        STATE.meta = {
            "function": root.f_code.co_name,
            "file": root.f_code.co_filename,
            "firstlineno": root.f_code.co_firstlineno,
        }
    lineno = getattr(inst, "starts_line", None)
    if not isinstance(lineno, int) or isinstance(lineno, bool):
        lineno = getattr(getattr(inst, "positions", None), "lineno", None) or getattr(tx, "lineno", None)
    rec = {
        "depth": len(STATE.current),
        "function": tx.f_code.co_name,
        "file": tx.f_code.co_filename,
        "line": lineno,
        "offset": inst.offset,
        "opname": inst.opname,
        "argval": _argval(inst),
        "argrepr": _argrepr(inst),
        "stack": [format_vt(v) for v in tx.stack],
        "guards": [],
        "_nodes": [],
    }
    if len(STATE.records) < MAX_RECORDS:
        STATE.records.append(rec)
    else:
        STATE.elided += 1
    return rec


def _end(tx: Any, rec: dict[str, Any], shape_env: Any, before: int) -> None:
    if shape_env is not None:
        added = shape_env.guards[before:]
        if added:
            rec["shape_guards"] = [_shape_guard(g) for g in added]
    if _JUMP.search(rec["opname"]) and rec.get("graph_break") is None and rec.get("exc") is None:
        ip = tx.instruction_pointer
        if ip is not None and ip < len(tx.instructions):
            jumped = rec["argval"] == tx.instructions[ip].offset
            rec["branch"] = {"condition": rec["stack"][-1] if rec["stack"] else None, "jumped": jumped}


def _shape_guard(g: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"expr": str(getattr(g, "expr", g))}
    sloc = getattr(g, "sloc", None)
    if sloc is not None:
        out["where"] = _short(str(sloc), 200)
    return out


def _guard_label(guard: Any) -> str:
    name = getattr(guard, "name", "") or ""
    try:
        kind = guard.create_fn_name()
    except Exception:
        kind = "?"
    return f"{kind} {name}".strip()


def flush_instructions() -> None:
    """Write the compile attempt in progress (node names are final once its graph is compiled)."""
    if STATE.writer is None or (not STATE.records and not STATE.unattributed):
        return
    records, STATE.records = STATE.records, []
    for rec in records:
        rec["nodes"] = [_node(n, created, sub) for n, created, sub in rec.pop("_nodes", [])]
    unattributed = [_node(n, created, sub)["name"] for n, created, sub in STATE.unattributed]
    STATE.unattributed = []
    compile_id, attempt = STATE.key or (None, None)
    STATE.writer.write(
        "trace_instructions",
        compile_id=compile_id,
        attempt=attempt,
        **STATE.meta,
        instructions=records,
        elided=STATE.elided,
        unattributed_nodes=unattributed,
    )
    STATE.elided = 0
    STATE.key = None


def _node(node: Any, created: str, subgraph: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": node.name, "op": node.op, "target": _target(node.target)}
    if created != node.name:
        out["created_as"] = created
    if getattr(node, "_erased", False):
        out["erased"] = True
    if subgraph:
        out["subgraph"] = True
    return out


def _target(target: Any) -> str:
    if isinstance(target, str):
        return target
    return _short(_qualname(target), 60)


# ---------------------------------------------------------------------------------------------
# Bytecode


def install_bytecode_capture(writer: RecordingWriter) -> str | None:
    """Original + transformed code of every compiled frame, decompiled where depyf can."""
    try:
        from torch._dynamo.convert_frame import register_bytecode_hook
    except (ImportError, AttributeError) as exc:
        return unavailable("the transformed-bytecode capture", exc)

    def hook(code: Any, new_code: Any) -> None:
        try:
            _record_bytecode(writer, code, new_code)
        except Exception as exc:  # recording must never change what Dynamo does
            writer.write(
                "bytecode", error=f"{type(exc).__name__}: {exc}", function=getattr(code, "co_name", "?")
            )
        return None

    register_bytecode_hook(hook)
    return None


def _record_bytecode(writer: RecordingWriter, code: Any, new_code: Any) -> None:
    STATE.codes[id(code)] = code
    compile_id, attempt = current_compile_id()
    resumed = is_resume(code.co_name)
    transformed, how = decompile(new_code)
    original, original_how = decompile(code) if resumed else (None, None)
    writer.write(
        "bytecode",
        compile_id=compile_id,
        attempt=attempt,
        function=code.co_name,
        file=code.co_filename,
        firstlineno=code.co_firstlineno,
        original=_dis_rows(code),
        transformed=_dis_rows(new_code),
        transformed_source=transformed,
        transformed_how=how,
        original_source=original,
        original_how=original_how,
        calls=[n for n in new_code.co_names if is_generated_global(n)],
    )


def _dis_rows(code: Any) -> list[dict[str, Any]]:
    rows = []
    for ins in dis.get_instructions(code):
        line = getattr(ins, "starts_line", None)
        if not isinstance(line, int) or isinstance(line, bool):
            line = getattr(ins, "line_number", None) if getattr(ins, "starts_line", None) else None
        rows.append(
            {
                "offset": ins.offset,
                "opname": ins.opname,
                "argrepr": _short(str(ins.argrepr or ""), 80),
                "line": line,
                "target": bool(ins.is_jump_target),
            }
        )
    return rows


def decompile(code: Any) -> tuple[str, str]:
    """Python source for a code object: depyf when it succeeds, else annotated `dis` (never raises)."""
    sink = io.StringIO()
    try:
        import depyf

        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            return str(depyf.decompile(code)), "depyf"
    except ImportError:
        why = "depyf is not installed"
    except Exception as exc:
        why = f"depyf failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
    try:
        text = dis.Bytecode(code).dis()
    except Exception as exc:
        text = f"(dis failed: {type(exc).__name__})"
    return f"# {why}; disassembly of {code.co_name}\n{text}", "dis"


# ---------------------------------------------------------------------------------------------
# Guards


def install_guard_capture(writer: RecordingWriter) -> str | None:
    """The guards of every new cache entry, and the entries alive at the end of the run."""
    try:
        import torch._dynamo.guards as dg
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        orig_init = dg.CheckFunctionManager.__init__
    except (ImportError, AttributeError) as exc:
        return unavailable("the guard capture", exc)

    @functools.wraps(orig_init)
    def init(self: Any, f_code: Any, output_graph: Any = None, *args: Any, **kwargs: Any) -> None:
        orig_init(self, f_code, output_graph, *args, **kwargs)
        try:
            if output_graph is not None and getattr(output_graph, "guards", None) is not None:
                STATE.codes[id(f_code)] = f_code
                _record_guards(writer, self, f_code, output_graph)
        except Exception as exc:
            writer.write(
                "guards", error=f"{type(exc).__name__}: {exc}", function=getattr(f_code, "co_name", "?")
            )

    dg.CheckFunctionManager.__init__ = init

    def walk_entries() -> None:
        for code in list(STATE.codes.values()):
            try:
                ids = [str(e.compile_id) for e in _debug_get_cache_entry_list(code)]
            except Exception:
                continue
            writer.write(
                "cache_entries",
                function=code.co_name,
                file=code.co_filename,
                firstlineno=code.co_firstlineno,
                compile_ids=ids,
            )

    from tcx.core.recorder.captures import at_end, at_start

    at_end(walk_entries)
    at_start(STATE.codes.clear)  # an in-process recording walks only the code it compiled
    return None


def _record_guards(writer: RecordingWriter, cfm: Any, f_code: Any, output_graph: Any) -> None:
    compile_id, attempt = current_compile_id()
    tree = _tree_texts(getattr(cfm, "guard_manager", None))
    guards = []
    for g in sorted(output_graph.guards):
        guards.append(_describe_guard(g, tree))
    shape = []
    env = getattr(output_graph, "shape_env", None)
    for sg in getattr(env, "guards", None) or []:
        shape.append(_shape_guard(sg))
    writer.write(
        "guards",
        compile_id=compile_id,
        attempt=attempt,
        function=f_code.co_name,
        file=f_code.co_filename,
        firstlineno=f_code.co_firstlineno,
        guards=guards,
        shape_env_guards=shape,
        epilogue=tree.get(("__epilogue__", ""), []),
        tree=_short(str(getattr(cfm, "guard_manager", "")), 200_000),
    )


def _tree_texts(wrapper: Any) -> dict[tuple[str, str], list[str]]:
    """(source, leaf guard type) -> verbose code parts, from the C++ guard tree."""
    out: dict[tuple[str, str], list[str]] = {}
    root = getattr(wrapper, "root", None)
    if root is None:
        return out

    def walk(mgr: Any, source: str, depth: int) -> None:
        if depth > 50:
            return
        for leaf in mgr.get_leaf_guards():
            out.setdefault((source, type(leaf).__name__), []).extend(leaf.verbose_code_parts())
        for child in mgr.get_child_managers():
            try:
                child_source = child.get_source()
            except Exception:
                child_source = "?"
            walk(child, child_source, depth + 1)

    with contextlib.suppress(Exception):
        walk(root, "", 0)
    with contextlib.suppress(Exception):
        for lam in root.get_epilogue_lambda_guards():
            out.setdefault(("__epilogue__", ""), []).extend(lam.verbose_code_parts())
    return out


_GLOBAL_STATE_LEAF = {
    "GRAD_MODE": "GLOBAL_STATE",
    "DETERMINISTIC_ALGORITHMS": "GLOBAL_STATE",
    "GLOBAL_STATE": "GLOBAL_STATE",
    "TORCH_FUNCTION_STATE": "TORCH_FUNCTION_MODE_STACK",
    "AUTOGRAD_SAVED_TENSORS_HOOKS": "LAMBDA_GUARD",
}


def _describe_guard(g: Any, tree: dict[tuple[str, str], list[str]]) -> dict[str, Any]:
    kind = g.create_fn_name()
    name = g.name or ""
    origin = getattr(getattr(g, "source", None), "name", None)
    types_ = list(g.guard_types or [kind])
    text: list[str] = []
    if kind == "SHAPE_ENV":
        text = list(tree.get(("__epilogue__", ""), [])) or list(g.code_list or [])
    elif name:
        for t in [*types_, kind]:
            text += [p for p in tree.get((name, t), []) if p not in text]
        if not text:
            text = list(g.code_list or [])
    else:
        leaf = _GLOBAL_STATE_LEAF.get(kind, kind)
        text = list(tree.get(("", leaf), [])) or list(g.code_list or [])
    out: dict[str, Any] = {
        "kind": kind,
        "source": name,
        "origin": str(origin) if origin else None,
        "text": [_short(t, 600) for t in text[:8]] + ([f"(+{len(text) - 8} more)"] if len(text) > 8 else []),
    }
    user = g.user_stack[-1] if getattr(g, "user_stack", None) else None
    if user is not None:
        out.update(file=user.filename, line=user.lineno, code=(user.line or "").strip())
    else:
        for t in text:
            loc = guard_location(t)
            if loc:
                out.update(file=loc.file, line=loc.line, code=loc.code)
                break
    return out
