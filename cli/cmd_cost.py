"""`tcx cost TARGET`: what each graph break, recompile, skipped frame and kernel costs per call.

A program runs twice: first with compilation off (`torch.compiler.set_stance("force_eager")`: the
eager time of the same calls; each call runs once per process, so a training step applies once),
then as it runs, every call of its compiled callables timed and the steady ones profiled. The eager
run's timings are written into the second run's recording, so `tcx cost run.tcx` re-renders both.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

import click

from tcx.cli.views import view_command
from tcx.core.views.registry import get

VIEW = get("cost")
DEFAULT_PROFILE_CALLS = 5
RUN_OPTIONS = {"profile_calls": "--profile-calls", "warmup": "--warmup", "no_eager": "--no-eager"}


@view_command(
    VIEW,
    click.option(
        "--profile-calls",
        type=click.IntRange(0, 1000),
        default=None,
        metavar="N",
        help=f"Profile up to N steady calls (default {DEFAULT_PROFILE_CALLS}); the others are only timed.",
    ),
    click.option(
        "--warmup",
        type=click.IntRange(0, 100000),
        default=None,
        metavar="N",
        help="Also leave out the first N calls of each function (calls that compiled always are).",
    ),
    click.option(
        "--no-eager",
        is_flag=True,
        help="Skip the second run with compilation off (no eager time, no speedup).",
    ),
    click.option(
        "--trace",
        "trace_path",
        type=click.Path(dir_okay=False, writable=True),
        default=None,
        metavar="FILE",
        help="Write one profiled call as a Chrome/Perfetto trace (regions, eager stretches and kernels "
        "labelled) to FILE.",
    ),
)
def command(**params: Any) -> None:
    from tcx.cli import common
    from tcx.core.run.targets import FileTarget, resolve_target
    from tcx.core.views.cost import build_cost

    target = resolve_target(params["target"])
    if isinstance(target, FileTarget):
        given = [flag for key, flag in RUN_OPTIONS.items() if params.get(key)]
        if given:
            click.echo(
                f"tcx: note: {', '.join(given)} ignored: nothing is run for a recording or log.", err=True
            )
        loaded = common.load(params, VIEW.fresh_compile)
    else:
        loaded = cost_run(params, eager=not params.get("no_eager"))
    view = build_cost(loaded.model, common.selection(loaded))
    if params.get("trace_path"):
        write_trace(view, params["trace_path"])
    from tcx.renderers.formats import write

    text_only = {"show_all": bool(params.get("show_all"))} if params["fmt"] == "text" else {}
    write(VIEW, view, params["fmt"], common.console(params), params, **text_only)
    common.saved_note(loaded)
    if params.get("trace_path") and params["fmt"] != "json":
        click.echo(f"trace written to {params['trace_path']} (open it in https://ui.perfetto.dev)", err=True)
    common.finish(loaded.model)


def cost_run(params: dict[str, Any], eager: bool = True) -> Any:
    """Run the program for its cost: the force_eager run (when `eager`), then the measured run with
    the eager timings in its recording. Returns the measured run, loaded (`cli/session.Loaded`)."""
    from tcx.cli import common

    profile = params.get("profile_calls")
    options = (
        f"profile={DEFAULT_PROFILE_CALLS if profile is None else profile},warmup={params.get('warmup') or 0}"
    )
    gpu = str(params.get("device") or "").startswith("cuda")
    with tempfile.TemporaryDirectory(prefix="tcx-cost-") as folder:
        argument = options
        if eager:
            timings = eager_run(params, options)
            gpu = gpu or bool(timings["run"].get("cuda"))
            path = Path(folder, "eager.json")
            path.write_text(json.dumps(timings), encoding="utf-8")
            argument += f",eager_calls={path}"
        captures = (f"cost={argument}", *VIEW.captures, *(("cudagraphs",) if gpu else ()))
        return common.load(params, VIEW.fresh_compile, capture=captures)


def eager_run(params: dict[str, Any], options: str) -> dict[str, Any]:
    """The program with compilation off, its calls timed: how it ended and each call's time."""
    from tcx.cli.options import build_run_options
    from tcx.cli.session import live_status
    from tcx.core.errors import UsageError
    from tcx.core.ingest.recording import load_recording
    from tcx.core.model import build_model
    from tcx.core.run import driver
    from tcx.core.run.targets import resolve_target

    base = build_run_options(params, VIEW.fresh_compile, (f"cost=force_eager,{options}",))
    # Not kept: the measured run is the one saved (this one compiles nothing, so torch logs nothing).
    opts = dataclasses.replace(base, save=None, keep_last=False, what_if=None)
    with live_status(enabled=not opts.show_output) as progress:
        run = driver.record(resolve_target(params["target"]), opts, progress)
    try:
        captures = build_model(load_recording(run.path), "live").captures
    finally:
        run.cleanup()
    end = captures.first("program_exit") or {}
    if end.get("status") == "usage":
        raise UsageError(str(end.get("message")))
    outcome = captures.first("outcome") or {}
    status = end.get("status") or ("timeout" if outcome.get("timed_out") else "died")
    keys = ("index", "function", "file", "line", "wall_ns", "warmup", "raised")
    calls = [{k: e[k] for k in keys if k in e} for e in captures.of("cost_call")]
    message = str(end.get("message") or "")[:500]
    cuda = bool((captures.first("cost_run_end") or {}).get("cuda"))
    return {"run": {"status": status, "message": message, "calls": len(calls), "cuda": cuda}, "calls": calls}


def write_trace(view: Any, path: str) -> None:
    from tcx.core import files
    from tcx.core.cost.trace import chrome_trace
    from tcx.renderers.safe import json_text

    doc = chrome_trace(view)
    files.write_text(path, json_text(doc, indent=None) + "\n", option="--trace")
