"""Run the target inside the recorder child: a script as __main__, a module, or one function."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import runpy
import sys
import traceback
import types
from pathlib import Path
from typing import Any

import torch

from tcx.core.frames import is_recorder_frame, is_tcx_code, parse_stack_trace
from tcx.core.ingest.recording import RecordingWriter
from tcx.core.recorder import compat

EXAMPLES_HOOK = "tcx_calls"
# Exceptions Python raises for a mistake in the code that raises them (not for the data it was
# given): raised in one of tcx's own lines, they are tcx's failure, not the program's.
_CODE_ERRORS = (AttributeError, NameError, KeyError, IndexError, TypeError, AssertionError)
# Dynamo's InternalTorchDynamoError and Unsupported end with the frames it was tracing
_DYNAMO_USER_CODE = re.compile(r"from user code:\n(?P<stack>(?:.*\n?)*)", re.M)


class TargetUsageError(Exception):
    """The target cannot be used as asked (missing function, no inputs): exit code 2."""


def traceback_frames(exc: BaseException) -> list[dict[str, Any]]:
    """The traceback's frames, outermost first, without the recorder's own: where the program
    called what failed, and where it was raised (views name the user's frames of it)."""
    return [
        {"file": fs.filename, "line": fs.lineno, "name": fs.name, "code": (fs.line or "")[:300]}
        for fs in traceback.extract_tb(exc.__traceback__)
        if not is_recorder_frame(fs.filename)
    ][-200:]


def user_traceback(exc: BaseException) -> str:
    """The traceback without the recorder's own frames on top."""
    frames = [fs for fs in traceback.extract_tb(exc.__traceback__) if not is_recorder_frame(fs.filename)]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines)


def tcx_fault(exc: BaseException) -> str | None:
    """Where tcx's own code failed, when `exc` (or what caused it) is tcx's failure, not the
    program's: an exception of tcx's own, a mistake Python raised in a line of tcx's code (an
    AttributeError in a hook), or Dynamo failing while it traced tcx's code as the program's.
    torch re-raises a hook's failure as its own (InternalTorchDynamoError, BackendCompilerFailed),
    so the chain of causes is followed. None when the program (or torch) raised it."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        frames = traceback.extract_tb(current.__traceback__)
        innermost = frames[-1] if frames else None
        # (not this runner: calling the program's function with the user's --call inputs raises here)
        ours = innermost is not None and is_tcx_code(innermost.filename) and innermost.filename != __file__
        if ours and isinstance(current, (compat.TcxHookError, *_CODE_ERRORS)):
            return f"raised at {_where(innermost)}"  # type: ignore[arg-type]
        traced = _DYNAMO_USER_CODE.search(str(current))
        if traced:
            stack = parse_stack_trace(traced.group("stack"))
            if stack and is_tcx_code(stack[-1]["file"]):
                f = stack[-1]
                return f"Dynamo traced tcx's own code at {f['file']}:{f['line']} in {f['function']}"
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return None


def _where(fs: traceback.FrameSummary) -> str:
    code = f": {fs.line.strip()}" if fs.line else ""
    return f"{fs.filename}:{fs.lineno} in {fs.name}{code}"


def drop_recorder_frames(event: dict[str, Any]) -> dict[str, Any]:
    stack = event.get("user_stack")
    if stack:
        event["user_stack"] = [f for f in stack if not is_recorder_frame(f["file"])]
    return event


def run_program(spec: dict[str, Any], writer: RecordingWriter) -> dict[str, Any]:
    script, module, function = spec.get("script"), spec.get("module"), spec.get("function")
    argv = [script or module or "", *spec.get("args", [])]
    sys.argv = argv
    if script:
        sys.path.insert(0, os.path.dirname(script))
    else:
        sys.path.insert(0, os.getcwd())
    try:
        if function and (spec.get("calls") is not None or _module_has_examples(spec)):
            namespace = _load_namespace(script, module)
            _call_function(
                namespace, function, spec.get("calls"), writer, spec.get("backward"), _export_mode(spec)
            )
        elif function and module:
            raise TargetUsageError(
                f"tcx has no inputs to call {module}:{function} with: pass --call SPEC "
                f"(e.g. --call 8x16) or define {EXAMPLES_HOOK}() in {module}."
            )
        elif script:
            runpy.run_path(script, run_name="__main__")
        else:
            if _find_spec(module or "") is None:
                raise TargetUsageError(
                    f"no module named {module!r} (looked in the current directory and sys.path)."
                )
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except TargetUsageError as exc:
        return {"status": "usage", "message": str(exc)}
    except SystemExit as exc:
        code = exc.code
        if code is None or code == 0:
            return {"status": "ok", "exit_code": 0}
        return {
            "status": "exit",
            "exit_code": code if isinstance(code, int) else 1,
            "message": "" if isinstance(code, int) else str(code),
        }
    except SyntaxError as exc:
        return {
            "status": "syntax",
            "exit_code": 1,  # what `python script.py` exits with
            "exc_type": "SyntaxError",
            "message": str(exc),
            "file": exc.filename,
            "line": exc.lineno,
            "traceback": user_traceback(exc),
        }
    except BaseException as exc:
        fault = tcx_fault(exc)
        if fault is not None:
            return {
                "status": "tcx_error",
                "exc_type": type(exc).__name__,
                "message": str(exc)[:4000],
                "where": fault,
                "traceback": "".join(traceback.format_exception(exc))[-20000:],
            }
        return {
            "status": "exception",
            # What `python script.py` exits with: 1, or 130 when Ctrl-C ended it (shell convention).
            "exit_code": 130 if isinstance(exc, KeyboardInterrupt) else 1,
            "exc_type": type(exc).__name__,
            "message": str(exc)[:4000],
            "traceback": user_traceback(exc),
            "frames": traceback_frames(exc),
        }
    return {"status": "ok", "exit_code": 0}


def _export_mode(spec: dict[str, Any]) -> str | None:
    """MODE of an `export=MODE` capture: tcx exports the target function or module itself."""
    for name in spec.get("capture") or []:
        base, _, mode = str(name).partition("=")
        if base == "export" and mode:
            return mode
    return None


def _find_spec(module: str) -> object | None:
    try:
        return importlib.util.find_spec(module)
    except (ModuleNotFoundError, ValueError):
        return None


def _module_has_examples(spec: dict[str, Any]) -> bool:
    """Whether the target defines `tcx_calls` — checked without running it (a source scan)."""
    script = spec.get("script")
    if script:
        try:
            tree = ast.parse(Path(script).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            return False
        return any(
            isinstance(node, (ast.FunctionDef, ast.Assign)) and _defines(node, EXAMPLES_HOOK)
            for node in tree.body
        )
    return True  # a module is imported (not run as __main__) either way; checked after import


def _defines(node: ast.AST, name: str) -> bool:
    if isinstance(node, ast.FunctionDef):
        return node.name == name
    return any(isinstance(t, ast.Name) and t.id == name for t in getattr(node, "targets", []))


def _load_namespace(script: str | None, module: str | None) -> dict[str, Any]:
    if script:
        name = os.path.splitext(os.path.basename(script))[0]
        namespace = runpy.run_path(script, run_name=f"__tcx_target_{name}__")
        return namespace
    try:
        mod: types.ModuleType = importlib.import_module(module or "")
    except ModuleNotFoundError as exc:
        if exc.name and (module or "").startswith(exc.name):
            raise TargetUsageError(
                f"no module named {module!r} (looked in the current directory and sys.path)."
            ) from None
        raise
    return vars(mod)


def _call_function(
    namespace: dict[str, Any],
    function: str,
    calls: list[list[dict]] | None,
    writer: RecordingWriter,
    backward: bool | None,
    export: str | None = None,
) -> None:
    fn = namespace.get(function)
    if fn is None or not callable(fn):
        callables = sorted(
            k
            for k, v in namespace.items()
            if callable(v)
            and not k.startswith("_")
            and getattr(v, "__module__", None) == namespace.get("__name__")
        )
        known = ", ".join(callables) or "none"
        raise TargetUsageError(f"no function {function!r} in the target (functions defined there: {known}).")
    examples = _examples(namespace, calls, function)
    if export is not None:  # `tcx export script.py:Module`: exported, not compiled
        from tcx.core.recorder.compat_export import export_examples

        if not examples:
            raise TargetUsageError(f"no example inputs to export {function!r} with.")
        args, kwargs = _split(examples[0])
        writer.write(
            "call",
            index=0,
            function=function,
            args=[_describe(a) for a in args],
            kwargs={k: _describe(v) for k, v in kwargs.items()},
        )
        export_examples(fn, function, examples[0], export, namespace)
        return
    if compat.original_callable(fn) is None:
        fn = torch.compile(fn)
    for index, call in enumerate(examples):
        args, kwargs = _split(call)
        writer.write(
            "call",
            index=index,
            function=function,
            args=[_describe(a) for a in args],
            kwargs={k: _describe(v) for k, v in kwargs.items()},
        )
        out = fn(*args, **kwargs)
        if backward is not False:
            _maybe_backward(out)


def _examples(namespace: dict[str, Any], calls: list[list[dict]] | None, function: str) -> list[Any]:
    if calls is not None:
        torch.manual_seed(0)
        return [tuple(_build(arg) for arg in call) for call in calls]
    hook = namespace.get(EXAMPLES_HOOK)
    if hook is None:
        raise TargetUsageError(
            f"tcx has no inputs to call {function!r} with: pass --call SPEC or define {EXAMPLES_HOOK}()."
        )
    examples = hook() if callable(hook) else hook
    return list(examples)


def _split(call: Any) -> tuple[tuple, dict]:
    if isinstance(call, dict):
        return (), call
    if isinstance(call, (tuple, list)):
        return tuple(call), {}
    return (call,), {}


def _build(arg: dict) -> Any:
    if "literal" in arg:
        return ast.literal_eval(arg["literal"])
    dtype = getattr(torch, arg["dtype"])
    shape = tuple(arg["tensor"])
    if dtype.is_floating_point:
        t = torch.randn(shape, dtype=dtype)
    elif dtype == torch.bool:
        t = torch.rand(shape) > 0.5
    else:
        t = torch.randint(0, 10, shape, dtype=dtype)
    return t.requires_grad_(bool(arg.get("grad")))


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        dims = "x".join(map(str, value.shape)) or "scalar"
        grad = ":grad" if value.requires_grad else ""
        return f"{dims}:{str(value.dtype).removeprefix('torch.')}{grad}"
    return repr(value)[:60]


def _maybe_backward(out: Any) -> None:
    tensors = [t for t in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(t, torch.Tensor)]
    loss = [t.float().sum() for t in tensors if t.requires_grad]
    if loss:
        torch.stack(loss).sum().backward()
