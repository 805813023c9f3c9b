"""Compatibility layer: torch.export under the recorder — each export, draft export and AOTInductor
package call the program makes, and what came of it (private torch APIs live here only).

The `export` capture wraps `torch.export.export`, `torch.export.draft_export` and
`torch._inductor.aoti_compile_and_package` (patched when the program imports `torch._inductor`,
which costs seconds, so never before) and writes `export` events around each call:

    event=start  index, api (export | draft_export | aoti_compile_and_package), name (the
                 module's class), strict, dynamic_shapes (repr), call_site (file, line,
                 function, code of the program's line that called it)
    event=end    index, api, ok, seconds; on failure exc_type, message (torch's text), frames
                 (the traceback, tcx's frames left out), op_schema (the schema of a custom op
                 the message names); for draft_export draft_failures (its report:
                 type, expr, op, reason, result, occurrences, xfail, user_stack,
                 symbol_to_sources); for AOTInductor package_path

While a wrapped export runs, torch's detailed structured trace (`dtrace_structured`: the events
`TORCH_DTRACE` turns on — `export`, `guard_added` with its user stack and sources,
`expression_created`, `exported_program`, `propagate_real_tensors_provenance`) is on, as
draft_export turns it on itself; it only adds log records, and the previous setting comes back
when the call returns. Inductor's provenance tracking (kernel <-> FX node maps) is turned on for
AOTInductor compiles, as the codegen capture does. The program gets every result and exception
unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.util
import inspect
import re
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch

from tcx.core.frames import is_recorder_frame
from tcx.core.ingest.recording import RecordingWriter
from tcx.core.recorder.compat import unavailable

MESSAGE_CHARS = 12_000
REPR_CHARS = 600
# The op torch names when a custom op has no fake kernel ("...registered for <CustomOpDef(ns::op)>",
# "...fake tensors (ns.op.default)").
_OP_IN_MESSAGE = re.compile(r"CustomOpDef\((?P<op>[\w.:]+)\)|\b(?P<dotted>\w+\.\w+\.\w+)\b")


class _Exports:
    """The capture's state: the writer and the number of calls seen in this run."""

    def __init__(self, writer: RecordingWriter, log_internal: Any) -> None:
        self.writer = writer
        self.log_internal = log_internal
        self.count = 0

    def restart(self) -> None:
        self.count = 0

    def wrap(self, original: Callable[..., Any], api: str) -> Callable[..., Any]:
        try:
            signature: inspect.Signature | None = inspect.signature(original)
        except (TypeError, ValueError):
            signature = None

        if getattr(original, "_tcx_export", False):  # installed once ("export" and "export=MODE")
            return original

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            index = self.count
            self.count += 1
            self._write(
                event="start",
                index=index,
                api=api,
                call_site=_call_site(),
                **_describe(signature, args, kwargs, api),
            )
            previous = getattr(self.log_internal, "GET_DTRACE_STRUCTURED", False)
            self.log_internal.GET_DTRACE_STRUCTURED = True
            started = time.perf_counter()
            try:
                result = original(*args, **kwargs)
            except BaseException as exc:
                self.log_internal.GET_DTRACE_STRUCTURED = previous
                self._write(
                    event="end", index=index, api=api, ok=False, seconds=_since(started), **_failure(exc)
                )
                raise
            self.log_internal.GET_DTRACE_STRUCTURED = previous
            self._write(
                event="end", index=index, api=api, ok=True, seconds=_since(started), **_success(api, result)
            )
            return result

        wrapper._tcx_export = True  # type: ignore[attr-defined]
        return wrapper

    def _write(self, **fields: Any) -> None:
        with contextlib.suppress(Exception):  # recording must never change what the program sees
            self.writer.write("export", **fields)


def install(writer: RecordingWriter, mode: str | None = None) -> str | None:
    """Wrap the export entry points. `mode` (the `export=MODE` form) is read by the program runner
    when tcx exports `script.py:Module` itself (core/recorder/program.py)."""
    try:
        import torch._logging._internal as log_internal
        import torch.export as export_module

        original_export = export_module.export
        _ = log_internal.GET_DTRACE_STRUCTURED
    except (ImportError, AttributeError) as exc:
        return unavailable("recording torch.export calls", exc)
    if getattr(original_export, "_tcx_export", False):
        return None  # installed already (as "export" and "export=MODE")
    state = _Exports(writer, log_internal)
    export_module.export = state.wrap(original_export, "export")
    if hasattr(export_module, "draft_export"):
        export_module.draft_export = state.wrap(export_module.draft_export, "draft_export")
    _when_imported("torch._inductor", functools.partial(_patch_inductor, state))
    from tcx.core.recorder.captures import at_start

    at_start(state.restart)
    return None


def _patch_inductor(state: _Exports, inductor: Any) -> None:
    original = getattr(inductor, "aoti_compile_and_package", None)
    if original is not None:
        inductor.aoti_compile_and_package = state.wrap(original, "aoti_compile_and_package")
    try:
        import torch._inductor.config as inductor_config

        inductor_config.trace.provenance_tracking_level = 1
    except (ImportError, AttributeError):
        pass  # the export view says no provenance was recorded


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Runs `patch(module)` right after `name` is first imported (then steps aside)."""

    def __init__(self, name: str, patch: Callable[[Any], None]) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        exec_module = getattr(loader, "exec_module", None)
        if spec is None or exec_module is None:
            return spec
        patch = self.patch

        def exec_and_patch(module: Any) -> None:
            exec_module(module)
            with contextlib.suppress(Exception):  # an unpatched entry point is not recorded
                patch(module)

        loader.exec_module = exec_and_patch  # type: ignore[union-attr]
        return spec


def _when_imported(name: str, patch: Callable[[Any], None]) -> None:
    module = sys.modules.get(name)
    if module is not None:
        patch(module)
    else:
        sys.meta_path.insert(0, _PatchOnImport(name, patch))


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 4)


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # a repr that raises is not the program's problem here
        text = f"<unprintable {type(value).__name__}: {exc}>"
    return text if len(text) <= REPR_CHARS else text[:REPR_CHARS] + " …"


def _describe(signature: inspect.Signature | None, args: tuple, kwargs: dict, api: str) -> dict[str, Any]:
    bound: dict[str, Any] = {}
    if signature is not None:
        try:
            b = signature.bind_partial(*args, **kwargs)
            b.apply_defaults()
            bound = dict(b.arguments)
        except TypeError:
            bound = {}
    if api == "aoti_compile_and_package":
        path = bound.get("package_path")
        return {"name": None, "strict": None, "dynamic_shapes": None, "package_path": _short(path)}
    module = bound.get("mod", args[0] if args else None)
    strict = bound.get("strict")
    shapes = bound.get("dynamic_shapes")
    return {
        "name": type(module).__name__ if module is not None else None,
        "strict": strict if isinstance(strict, bool) else None,
        "dynamic_shapes": None if shapes is None else _short(shapes),
    }


def _call_site() -> dict[str, Any] | None:
    """The program's line that called the export (the first frame above tcx's wrapper)."""
    frame = sys._getframe(2)
    while frame is not None and (
        is_recorder_frame(frame.f_code.co_filename) or frame.f_code.co_filename.startswith("<")
    ):
        frame = frame.f_back
    if frame is None:
        return None
    summary = traceback.FrameSummary(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
    return {
        "file": summary.filename,
        "line": summary.lineno,
        "function": summary.name,
        "code": (summary.line or "").strip(),
    }


def _failure(exc: BaseException) -> dict[str, Any]:
    message = str(exc)
    frames = [
        {"file": fs.filename, "line": fs.lineno, "function": fs.name, "code": (fs.line or "").strip()}
        for fs in traceback.extract_tb(exc.__traceback__)
        if not is_recorder_frame(fs.filename)
    ]
    return {
        "exc_type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": message if len(message) <= MESSAGE_CHARS else message[:MESSAGE_CHARS] + " […]",
        "frames": frames,
        "op_schema": _op_schema(message),
    }


def _op_schema(message: str) -> dict[str, str] | None:
    """The schema of the custom op a message names, for a `register_fake` stub with its arguments."""
    if "fake" not in message.lower():
        return None
    for m in _OP_IN_MESSAGE.finditer(message):
        found = _schema_of(m.group("op") or m.group("dotted") or "")
        if found is not None:
            return found
    return None


def _schema_of(op: str) -> dict[str, str] | None:
    """`ns::op` or `ns.op.overload` -> its name and schema, from torch's op registry."""
    parts = op.replace("::", ".").split(".")
    if len(parts) < 2:
        return None
    try:
        packet = getattr(getattr(torch.ops, parts[0]), parts[1])
        overload = getattr(packet, parts[2] if len(parts) > 2 else "default")
        return {"op": f"{parts[0]}::{parts[1]}", "schema": str(overload._schema)}
    except (AttributeError, RuntimeError):
        return None


def _success(api: str, result: Any) -> dict[str, Any]:
    if api == "aoti_compile_and_package":
        return {"package_path": result if isinstance(result, str) else _short(result)}
    if api == "draft_export":
        return {"draft_failures": _draft_failures(result)}
    return {}


def _draft_failures(ep: Any) -> list[dict[str, Any]] | None:
    """draft_export's own report (`ep._report`), its stacks' file ids resolved."""
    report = getattr(ep, "_report", None)
    failures = getattr(report, "failures", None)
    if failures is None:
        return None
    files = getattr(report, "str_to_filename", {}) or {}
    out = []
    for failure in failures:
        data = getattr(failure, "data", {}) or {}
        sources = data.get("symbol_to_sources") or {}
        out.append(
            {
                "type": str(getattr(failure, "failure_type", "?")),
                "message": _report_text(failure, files),
                "xfail": bool(getattr(failure, "xfail", False)),
                "expr": _text(data.get("expr")),
                "op": _text(data.get("op")),
                "op_schema": _schema_of(str(data["op"])) if data.get("op") else None,
                "reason": _text(data.get("reason")),
                "result": _text(data.get("result")),
                "occurrences": data.get("occurrences") if isinstance(data.get("occurrences"), int) else None,
                # file ids torch interned before draft_export started are not in its report's table:
                # the view resolves them with the run's `str` events
                "user_stack": [_frame(f, files) for f in data.get("user_stack") or [] if isinstance(f, dict)],
                "symbol_to_sources": {str(k): str(v) for k, v in sources.items()},
                "new_dynamic_shapes": None
                if data.get("new_dynamic_shapes") is None
                else _short(data.get("new_dynamic_shapes")),
            }
        )
    return out


def _report_text(failure: Any, files: dict[int, str]) -> str | None:
    """torch's own text for one failure of the report (`FailureReport.print`)."""
    try:
        text = str(failure.print(files)).strip()
    except Exception:  # a report that cannot print itself: the view composes a message
        return None
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + " […]"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _frame(frame: dict[str, Any], files: dict[int, str]) -> dict[str, Any]:
    name = frame.get("filename")
    return {
        "file": files.get(name) if isinstance(name, int) else str(name),
        "file_id": name if isinstance(name, int) else None,
        "line": frame.get("line"),
        "function": frame.get("name"),
        "code": frame.get("loc") or "",
    }


def export_examples(target: Any, name: str, call: Any, mode: str, namespace: dict[str, Any]) -> None:
    """`tcx export script.py:Module` / `:func`: export it with one example input (`call`: a tuple of
    arguments or a dict of keyword arguments), as asked (`mode`: "export", "strict", "draft" or
    "draft-strict"); `tcx_dynamic_shapes` in the script (a value, or a function returning one) is
    passed as `dynamic_shapes`. The call goes through the wrapped entry points, so it is recorded
    like a program's own."""
    if isinstance(call, dict):
        args, kwargs = (), call
    elif isinstance(call, (tuple, list)):
        args, kwargs = tuple(call), {}
    else:
        args, kwargs = (call,), {}
    module = _as_module(target, name)
    shapes = namespace.get("tcx_dynamic_shapes")
    if callable(shapes):
        shapes = shapes()
    api = torch.export.draft_export if mode.startswith("draft") else torch.export.export
    api(module, args, kwargs or None, dynamic_shapes=shapes, strict=mode.endswith("strict"))


def _as_module(target: Any, name: str) -> torch.nn.Module:
    if isinstance(target, torch.nn.Module):
        return target
    if isinstance(target, type) and issubclass(target, torch.nn.Module):
        return target()
    function = target

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    return type(name, (torch.nn.Module,), {"forward": forward})()
