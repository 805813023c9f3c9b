"""`tcx cost TARGET`: what the program's step costs, and what each graph break, recompile, skipped
frame and kernel costs per step.

The program runs with compilation off first (`torch.compiler.set_stance("force_eager")`: the eager
time of the same steps, same inputs and seed; each step runs once per process, so a training step
applies once), then as it runs, every call of its compiled callables timed, the backward and the
optimizer steps around them timed, and a few steady steps profiled. While the headline figures lack
steady steps (or their interval is wide) and `--budget` leaves time, the program runs again, one
eager and one compiled run timed only, and their steps are pooled. Every run's timings are written
into the recorded run's recording, so `tcx cost run.tcx` re-renders them all.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import click

from tcx.cli.views import view_command
from tcx.core.views.registry import get

VIEW = get("cost")
DEFAULT_PROFILE_CALLS = 5
RUN_OPTIONS = {
    "profile_calls": "--profile-calls",
    "warmup": "--warmup",
    "no_eager": "--no-eager",
    "step": "--step",
    "budget": "--budget",
}


@view_command(
    VIEW,
    click.option(
        "--step",
        default=None,
        metavar="FUNC",
        help="The program's step: a function its loop calls (train_step, Trainer.step); each call is one "
        "step. Default: the period between calls of the compiled callable the program calls most.",
    ),
    click.option(
        "--budget",
        type=click.FloatRange(0, 86400),
        default=None,
        metavar="SECONDS",
        help="Time tcx may spend running the program, all runs together (default 120): while the "
        "figures lack steady steps, it runs the program again (eager and compiled) and pools the "
        "steps; 0: once each.",
    ),
    click.option(
        "--profile-calls",
        type=click.IntRange(0, 1000),
        default=None,
        metavar="N",
        help=f"Profile up to N steady steps per grad mode (default {DEFAULT_PROFILE_CALLS}); the others are "
        "only timed.",
    ),
    click.option(
        "--warmup",
        type=click.IntRange(0, 100000),
        default=None,
        metavar="N",
        help="Also leave out the first N calls of each function (steps that compiled always are).",
    ),
    click.option(
        "--no-eager",
        is_flag=True,
        help="Skip the runs with compilation off (no eager time, no speedup).",
    ),
    click.option(
        "--trace",
        "trace_path",
        type=click.Path(dir_okay=False, writable=True),
        default=None,
        metavar="FILE",
        help="Write one profiled step as a Chrome/Perfetto trace (regions, eager stretches, backward, "
        "optimizer and kernels labelled) to FILE.",
    ),
)
def command(**params: Any) -> None:
    from tcx.cli import common
    from tcx.core.run.targets import FileTarget, resolve_target
    from tcx.core.views.cost import build_cost

    target = resolve_target(params["target"])
    if isinstance(target, FileTarget):
        given = [
            flag
            for key, flag in RUN_OPTIONS.items()
            if params.get(key) is not None and params[key] is not False
        ]
        if given:
            click.echo(
                f"tcx: note: {', '.join(given)} ignored: nothing is run for a recording or log.", err=True
            )
        loaded = common.load(params, VIEW.fresh_compile)
    else:
        from tcx.core.run import warm

        with warm.invocation():  # the runs after the first fork from one warm process (core/run/warm.py)
            loaded = cost_run(params, eager=not params.get("no_eager"))
    view = build_cost(loaded.model, common.selection(loaded))
    written = write_trace(view, params["trace_path"]) if params.get("trace_path") else False
    from tcx.renderers.formats import write

    text_only = {"show_all": bool(params.get("show_all"))} if params["fmt"] == "text" else {}
    write(VIEW, view, params["fmt"], common.console(params), params, **text_only)
    common.saved_note(loaded)
    if written and params["fmt"] != "json":
        click.echo(f"trace written to {params['trace_path']} (open it in https://ui.perfetto.dev)", err=True)
    common.finish(loaded.model)


def cost_run(params: dict[str, Any], eager: bool = True) -> Any:
    """Run the program for its cost: the force_eager run (when `eager`), then the recorded run, then
    more timed pairs while the figures need them and the budget allows; every run's timings go into
    the recorded run's recording. Returns the recorded run, loaded (`cli/session.Loaded`)."""
    from tcx.cli import common
    from tcx.core.cost.repeats import DEFAULT_BUDGET_S

    profile = params.get("profile_calls")
    options = _options(params, DEFAULT_PROFILE_CALLS if profile is None else profile)
    budget = DEFAULT_BUDGET_S if params.get("budget") is None else float(params["budget"])
    gpu = str(params.get("device") or "").startswith("cuda")
    started = time.monotonic()
    others: list[dict[str, Any]] = []
    if eager:
        run = timed_run(params, f"force_eager,{options}", len(others) + 1, "force_eager")
        others.append(run)
        gpu = gpu or bool(run["cuda"])
    captures = (f"cost={options}", *VIEW.captures, *(("cudagraphs",) if gpu else ()))
    recorded_at = time.monotonic()

    def extend(path: Path, model: Any) -> None:
        recorded_s = time.monotonic() - recorded_at
        _repeat(params, options, model, others, eager, budget, time.monotonic() - started, recorded_s)
        _append_runs(path, others)

    return common.load(params, VIEW.fresh_compile, capture=captures, extend=extend)


def _options(params: dict[str, Any], profile: int) -> str:
    """The cost capture's argument (core/recorder/compat_cost.install)."""
    options = f"profile={profile},warmup={params.get('warmup') or 0}"
    return options + (f",step={params['step']}" if params.get("step") else "")


def _repeat(
    params: dict[str, Any],
    options: str,
    model: Any,
    others: list[dict[str, Any]],
    eager: bool,
    budget: float,
    elapsed: float,
    recorded_s: float,
) -> None:
    """Pairs of timed runs (eager, compiled) while the figures need more steps and the budget allows."""
    from tcx.core.cost.measurements import read_measurements, step_unit
    from tcx.core.cost.repeats import fits, more_needed

    m = read_measurements(model)
    if m.config is None:
        return
    named, explicit = step_unit(m)
    runs = list(m.runs)
    start = time.monotonic() - elapsed
    pair = recorded_s + sum(r["seconds"] for r in others if r["stance"] == "force_eager")
    while more_needed(runs + [_run_times(r) for r in others], named, explicit, eager):
        if not fits(time.monotonic() - start, pair, budget):
            break
        began = time.monotonic()
        if eager:
            others.append(timed_run(params, f"force_eager,{options}", len(others) + 1, "force_eager"))
        others.append(timed_run(params, _options(params, 0), len(others) + 1, "compiled"))
        pair = time.monotonic() - began
        if any(r["status"] != "ok" for r in others[-2:]):
            break  # a run that failed will fail again


def _run_times(run: dict[str, Any]) -> Any:
    from tcx.core.cost.timings import RunTimes, call_time, compile_mark, span_time

    n = run["run"]
    times = RunTimes(n, run["stance"], run["status"], run["message"], run["seconds"])
    times.calls = [c for e in run["calls"] if (c := call_time(e, n)) is not None]
    times.spans = [s for e in run["spans"] if (s := span_time(e, n)) is not None]
    times.compiles = [m for e in run["compiles"] if (m := compile_mark(e, n)) is not None]
    return times


def _append_runs(path: Path, runs: list[dict[str, Any]]) -> None:
    """The other runs' timings, written into the recorded run's recording (`cost_run`, `cost_run_*`)."""
    from tcx.core.ingest.recording import RecordingWriter

    writer = RecordingWriter(path)
    try:
        for run in runs:
            n = run["run"]
            head = {k: run[k] for k in ("stance", "status", "message", "seconds") if run.get(k) is not None}
            writer.write("cost_run", run=n, calls=len(run["calls"]), **head)
            for kind, items in (("call", run["calls"]), ("span", run["spans"]), ("compile", run["compiles"])):
                for item in items:
                    writer.write(f"cost_run_{kind}", **{**item, "run": n})
    finally:
        writer.close()


def timed_run(params: dict[str, Any], argument: str, number: int, stance: str) -> dict[str, Any]:
    """One more run of the program, its steps timed only (`cost=ARGUMENT`): how it ended and what it timed."""
    from tcx.cli.options import build_run_options
    from tcx.cli.session import record_live
    from tcx.core.errors import UsageError
    from tcx.core.ingest.recording import load_recording
    from tcx.core.model import build_model
    from tcx.core.run.targets import resolve_target

    base = build_run_options(params, VIEW.fresh_compile, (f"cost={argument}",))
    # Not kept: the recorded run is the one saved; this one's timings are copied into it.
    opts = dataclasses.replace(base, save=None, keep_last=False, what_if=None)
    began = time.monotonic()
    run = record_live(resolve_target(params["target"]), opts)
    seconds = time.monotonic() - began
    try:
        model = build_model(load_recording(run.path), "live")
    finally:
        run.cleanup()
    program, captured = model.status.program, model.cost_capture
    if program.exit_status == "usage":
        raise UsageError(str(program.message))
    status = program.exit_status or ("timeout" if program.status == "timeout" else "died")
    keys = (
        "index",
        "function",
        "file",
        "line",
        "start_ns",
        "wall_ns",
        "mode",
        "warmup",
        "profiled",
        "raised",
    )
    calls = captured.copied("cost_call", keys, needs="wall_ns")
    compiles = captured.copied("cost_compile", ("start_ns", "what"))
    return {
        "run": number,
        "stance": stance,
        "status": status,
        "message": str(program.message or "")[:500],
        "seconds": round(seconds, 3),
        "calls": calls,
        "spans": captured.copied("cost_span", SPAN_KEYS),
        "compiles": compiles,
        "cuda": captured.on_cuda,
    }


SPAN_KEYS = ("span", "start_ns", "wall_ns", "name", "index", "mode", "warmup", "profiled", "raised")


def write_trace(view: Any, path: str) -> bool:
    """One profiled step as a Chrome trace; when no step was profiled, a warning beside the report
    (the report itself is still printed). True when written."""
    from tcx.core import files
    from tcx.core.cost.trace import chrome_trace
    from tcx.renderers.safe import json_text

    doc = chrome_trace(view)
    if doc is None:
        view.warnings.append(
            f"--trace {path}: not written, no step was profiled in this run (a step is profiled once the "
            "program calls its compiled function again after it compiled; --profile-calls N sets how many)"
        )
        return False
    files.write_text(path, json_text(doc, indent=None) + "\n", option="--trace")
    return True
