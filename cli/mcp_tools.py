"""The tools `tcx mcp` serves, generated from the view registry (core/views/registry.py).

- One tool per view (`explain`, `recompiles`, `guards`, …): `target` (a recording, a TORCH_TRACE
  log file or directory, `FILE:func`; a program only when the server runs with --allow-run), the
  selectors every view takes (`function`, `compile`, `kernel`, `rank`) and the view's options that
  shape its JSON; it returns the view's JSON document, the one `tcx VIEW --format json` prints,
  built by the same code (cli/common.load and .selection, then the registry's builder and
  serializer).
- `list_compiles`: the compile ids of a run with their function, graphs, breaks and kernels.
- `show_source`: lines of a file as the recording's snapshot holds them (never read from disk).
- `record` (only with --allow-run): run a program once with every view's captures and save the
  recording under a root, for the other tools to read.

Every path a tool is given must lie under one of the server's roots: one policy (`Policy`), applied
to the real path (links followed, `..` resolved) of the file TARGET resolution would open, split
off its `:func` exactly as resolution splits it (core/run/targets.split_target); the tool then
reads that real path, not the text it was given. Bad arguments, a refused path and any error of
the view come back as a tool error (`ToolError`), never as a crash.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tcx.core.errors import TcxError, UsageError
from tcx.core.views.registry import VIEWS, Option, View

# Views whose registry entry composes several builds (a budget check, two runs): not tools.
COMPOSED = ("check", "diff")
SOURCE_CONTEXT = 5  # lines either side of `line` that show_source returns by default


class ToolError(Exception):
    """A tool call that cannot be answered: its message goes back to the client as the result."""


@dataclass(frozen=True)
class Policy:
    """What the server may touch: paths under `roots`, and programs only with `allow_run`."""

    roots: tuple[str, ...]  # real paths
    allow_run: bool

    def check_path(self, path: str, what: str) -> str:
        """`path`'s real path (every link followed) when it lies under a root; else a ToolError."""
        from tcx.core.run.targets import shown

        if "\0" in path:
            raise ToolError(f"{what} {shown(path)} holds a NUL byte: no file has such a name.")
        real = os.path.realpath(path)
        if not any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in self.roots):
            raise ToolError(
                f"{what} {shown(path)} is outside the folders this server may read "
                f"({', '.join(self.roots)}); start `tcx mcp --root DIR` to allow another folder."
            )
        return real


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    schema: dict[str, Any]
    call: Callable[[dict[str, Any], Policy], dict[str, Any]]


def tools(policy: Policy) -> list[Tool]:
    out = [view_tool(v, policy) for v in VIEWS if v.name not in COMPOSED]
    out.append(
        Tool("list_compiles", LIST_COMPILES_HELP, _schema(_selector_properties(policy)), list_compiles)
    )
    out.append(Tool("show_source", SHOW_SOURCE_HELP, _schema(SOURCE_PROPERTIES), show_source))
    if policy.allow_run:
        out.append(
            Tool("record", RECORD_HELP, _schema(RECORD_PROPERTIES, required=("target", "save")), record)
        )
    return out


def call(tool: Tool, arguments: dict[str, Any] | None, policy: Policy) -> dict[str, Any]:
    """Check the arguments against the tool's schema, then run it; every failure is a ToolError."""
    from jsonschema import Draft202012Validator

    args = arguments or {}
    errors = sorted(Draft202012Validator(tool.schema).iter_errors(args), key=lambda e: list(e.path))
    if errors:
        where = "/".join(map(str, errors[0].path)) or "arguments"
        raise ToolError(f"invalid arguments for {tool.name}: {where}: {errors[0].message[:300]}")
    try:
        return tool.call(whole_numbers(args, tool.schema), policy)
    except TcxError as exc:
        raise ToolError(exc.message + (f" {exc.hint}" if exc.hint else "")) from None


def whole_numbers(args: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The arguments with each value of an "integer" property (or array item) as a Python int.

    JSON has one number type, and JSON Schema counts 3.0 as an integer, so a valid `line: 3.0`
    reaches the tool as a float, which Python cannot index with."""
    props = schema.get("properties", {})
    out = dict(args)
    for key, value in args.items():
        spec = props.get(key, {})
        if spec.get("type") == "integer" and isinstance(value, float):
            out[key] = int(value)
        elif spec.get("type") == "array" and spec.get("items", {}).get("type") == "integer":
            out[key] = [int(v) if isinstance(v, float) else v for v in value]
    return out


# --------------------------------------------------------------------------- schemas

TARGET_HELP = (
    "A tcx recording (.tcx, saved by `tcx ... --save` or `run.save()`), or a TORCH_TRACE log file or "
    "directory; FILE:func selects one function's compiles."
)
RUN_TARGET_HELP = " With --allow-run, also a program: script.py or script.py:func (run under the recorder)."


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ("target",)) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def _selector_properties(policy: Policy) -> dict[str, Any]:
    props: dict[str, Any] = {
        "target": {
            "type": "string",
            "description": TARGET_HELP + (RUN_TARGET_HELP if policy.allow_run else ""),
        },
        "function": {"type": "string", "description": "Only this function's compiles (as TARGET:func)."},
        "compile": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Only these compile ids, e.g. ['0/1'] or a range ['3/0-3/4'].",
        },
        "kernel": {
            "type": "string",
            "description": "Only the compiles that generated this kernel (name or part).",
        },
        "rank": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "Only these ranks of a multi-rank log.",
        },
    }
    if policy.allow_run:
        props["call"] = {
            "type": "array",
            "items": {"type": "string"},
            "description": "For script.py:func: call it with these inputs, one spec per call "
            "(e.g. 128x32,32x64).",
        }
        props["timeout"] = {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Stop the program after this long.",
        }
    return props


def _option_schema(opt: Option) -> dict[str, Any]:
    if opt.is_flag:
        return {"type": "boolean", "description": opt.help}
    item: dict[str, Any] = {"type": {int: "integer", float: "number"}.get(opt.type, "string")}
    if opt.choices:
        item["enum"] = list(opt.choices)
    if opt.multiple:
        return {"type": "array", "items": item, "description": opt.help}
    return {**item, "description": opt.help}


def json_options(view: View) -> list[Option]:
    """The options that shape a view's JSON document (its builder's and serializer's)."""
    return [o for o in view.options if {"build", "json"} & set(o.to)]


def run_options(view: View, policy: Policy) -> list[Option]:
    """The options of a view whose program TARGET its own runner runs (`numerics`: --rtol, --max-runs)."""
    return [o for o in view.options if "cli" in o.to] if view.runner and policy.allow_run else []


def view_tool(view: View, policy: Policy) -> Tool:
    props = _selector_properties(policy)
    props.update({o.dest: _option_schema(o) for o in (*json_options(view), *run_options(view, policy))})
    description = (
        f"{view.help} Returns tcx's JSON document ({view.schema}), as `tcx {view.name} --format json`."
    )

    def run(args: dict[str, Any], policy: Policy) -> dict[str, Any]:
        from tcx.cli import common
        from tcx.core.run.targets import ProgramTarget

        params = _params(args, view)
        runner = view.live_runner()
        if runner is not None and isinstance(check_target(params["target"], policy), ProgramTarget):
            extra = {o.dest: args.get(o.dest) for o in run_options(view, policy)}
            loaded = runner({**params, **extra, "no_save": True})  # the server writes no .tcx/last.tcx
            selection = common.selection(loaded)
        else:
            loaded, selection = _load(params, policy, view.fresh_compile, view.captures)
        result = view.builder()(loaded.model, selection, **view.options_for("build", params))
        return view.serializer()(result, **view.options_for("json", params))

    return Tool(view.name, description, _schema(props), run)


# --------------------------------------------------------------------------- loading


def _params(args: dict[str, Any], view: View | None = None) -> dict[str, Any]:
    """The tool's arguments as the CLI's parameters (cli/common.load reads these)."""
    target = args["target"]
    if args.get("function"):
        target = f"{target}:{args['function']}"
    params: dict[str, Any] = {
        "target": target,
        "compiles": tuple(args.get("compile") or ()),
        "kernel": args.get("kernel"),
        "ranks": tuple(args.get("rank") or ()),
        "calls": tuple(args.get("call") or ()),
        "timeout": args.get("timeout"),
    }
    for opt in json_options(view) if view else ():
        default: Any = False if opt.is_flag else () if opt.multiple else None
        value = args.get(opt.dest, default)
        params[opt.dest] = tuple(value) if opt.multiple else value
    return params


def _load(
    params: dict[str, Any], policy: Policy, fresh_compile: bool = False, captures: tuple[str, ...] = ()
) -> tuple[Any, Any]:
    """The run TARGET names (a file, or a program when allowed) and its selection, as the CLI loads it:
    from the checked real path, never from the text again."""
    from tcx.cli import common
    from tcx.core.run.targets import ProgramTarget

    target = check_target(params["target"], policy)
    params = {**params, "target": target.label}
    if isinstance(target, ProgramTarget):
        params["no_save"] = True  # the server writes no .tcx/last.tcx, only what `record` saves
    loaded = common.load(params, fresh_compile, capture=captures)
    return loaded, common.selection(loaded)


def check_target(text: str, policy: Policy, *, run: bool | None = None) -> Any:
    """TARGET resolved from the real path of its file, which must lie under a root; a program only
    when the server may run programs. The file part is split off exactly as resolution splits it,
    so the path checked is the path read (`link.tcx:a.b` checks where link.tcx leads)."""
    from tcx.core.run.targets import ProgramTarget, resolve_target, shown, split_target

    if "\0" in text:
        raise ToolError(f"target {shown(text)} holds a NUL byte: no file has such a name.")
    try:
        path, function = split_target(text)
    except OSError as exc:  # a name longer than the OS allows
        raise ToolError(f"target {shown(text)} cannot be used: {exc.strerror or exc}.") from None
    real = policy.check_path(path, "target")
    if function is not None and not path.endswith(".py") and not os.path.exists(real):
        target = resolve_target(text)  # a module (`pkg.mod:func`): no file to check; refused below
    else:
        target = resolve_target(real if function is None else f"{real}:{function}")
    if isinstance(target, ProgramTarget):
        if not (policy.allow_run if run is None else run):
            raise ToolError(
                f"{text!r} is a program, and this server does not run programs (an agent should not "
                "execute code by reading a log). Give a recording or a TORCH_TRACE log, or start "
                "`tcx mcp --allow-run`."
            )
        if target.script is None:
            raise ToolError(
                f"{text!r} names a module: tcx mcp runs only scripts under its roots "
                "(script.py or script.py:func)."
            )
        policy.check_path(target.script, "program")
    return target


# --------------------------------------------------------------------------- the other tools

LIST_COMPILES_HELP = (
    "The compile ids of a run (frame/compile, e.g. 0/1), each with its function, file, graphs, graph "
    "breaks, kernels, compile time and whether it failed: where to look before asking a view for one compile."
)


def list_compiles(args: dict[str, Any], policy: Policy) -> dict[str, Any]:
    from tcx.core.views.envelope import envelope
    from tcx.core.views.index import index_rows

    params = _params(args)
    loaded, selection = _load(params, policy)
    model = loaded.model
    rows = []
    for row in index_rows(model, selection, "explain", params["target"]):
        comp = model.compiles.get(row.compile_id)
        file, line = (comp.co_filename, comp.co_firstlineno) if comp else (None, None)
        rows.append({**row.to_json(), "file": file, "line": line})
    return {**envelope("tcx.compiles/1", model, selection), "compile_count": len(rows), "compiles": rows}


SHOW_SOURCE_HELP = (
    "Lines of a source file as the recording's snapshot holds them (taken when the run was recorded; "
    "never read from disk): `line` with `context` lines either side, or the whole file."
)
SOURCE_PROPERTIES: dict[str, Any] = {
    "target": {"type": "string", "description": "A tcx recording (.tcx)."},
    "file": {
        "type": "string",
        "description": "The file, as the recording names it (a unique ending is enough).",
    },
    "line": {"type": "integer", "minimum": 1, "description": "The line to show (default: the whole file)."},
    "context": {
        "type": "integer",
        "minimum": 0,
        "maximum": 1000,
        "description": "Lines either side (default 5).",
    },
}


def show_source(args: dict[str, Any], policy: Policy) -> dict[str, Any]:
    from tcx.core import pysource
    from tcx.core.run.inputs import model_of
    from tcx.core.run.targets import FileTarget

    target = check_target(args["target"], policy, run=False)
    if not isinstance(target, FileTarget):
        raise UsageError(f"{args['target']!r} is not a recording; show_source reads a recording's snapshot.")
    model = model_of(target)
    texts, hashes = model.sources.texts, model.sources.sha256
    file = _snapshot_file(args["file"], sorted({*texts, *hashes}))
    if file not in texts:
        raise ToolError(f"{file!r} is in the recording by its sha256 only (over 1 MB when recorded).")
    lines = pysource.line_texts(texts[file])
    first, last = 1, len(lines)
    if args.get("line") is not None:
        line, context = args["line"], args.get("context", SOURCE_CONTEXT)
        if line > len(lines):
            raise ToolError(f"{file!r} has {len(lines)} lines in the snapshot; line {line} is past its end.")
        first, last = max(1, line - context), min(len(lines), line + context)
    return {
        "schema": "tcx.source/1",
        "target": model.target,
        "file": file,
        "sha256": hashes.get(file),
        "line_count": len(lines),
        "lines": [{"line": n, "text": lines[n - 1]} for n in range(first, last + 1)],
    }


def _snapshot_file(asked: str, files: list[str]) -> str:
    if asked in files:
        return asked
    ending = "/" + asked.lstrip("/")
    matches = [f for f in files if f.endswith(ending)]
    if len(matches) == 1:
        return matches[0]
    if not files:
        raise ToolError(
            "this input holds no source snapshot (a TORCH_TRACE log has none; a recording has the "
            "user's files)."
        )
    which = "matches several files" if matches else "is not in the recording's snapshot"
    raise ToolError(f"{asked!r} {which}; it holds: {', '.join(matches or files)}.")


RECORD_HELP = (
    "Run a program (script.py or script.py:func, under a root) once under the recorder with every view's "
    "captures, as `tcx report` does, and save the recording to `save` (under a root); returns the explain "
    "document with `saved_to`. The other tools then read the saved recording without running it again."
)
RECORD_PROPERTIES: dict[str, Any] = {
    "target": {"type": "string", "description": "script.py or script.py:func."},
    "save": {"type": "string", "description": "Where to save the recording (.tcx; .tcx.gz compresses)."},
    "call": {
        "type": "array",
        "items": {"type": "string"},
        "description": "For script.py:func: one input spec per call.",
    },
    "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Stop the program after this long."},
}


def record(args: dict[str, Any], policy: Policy) -> dict[str, Any]:
    from tcx.cli import common
    from tcx.core.run.targets import ProgramTarget
    from tcx.core.views.explain import explain, to_json
    from tcx.core.views.registry import all_captures

    target = check_target(args["target"], policy)
    if not isinstance(target, ProgramTarget):
        raise UsageError(
            f"{args['target']!r} is not a program; the view tools read recordings and logs as they are."
        )
    save = policy.check_path(args["save"], "save")  # written as a new file, never through a link
    params = {**_params(args), "target": target.label, "save": save, "no_save": True}
    loaded = common.load(params, True, capture=all_captures())  # every stage compiled, as `tcx report`
    return {**to_json(explain(loaded.model, common.selection(loaded))), "saved_to": loaded.saved_to}
