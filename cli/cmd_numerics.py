"""`tcx numerics TARGET`: does the compiled program compute what eager computes, and if not, where it stops.

A program runs several times (core/numerics/pipeline.py: eager with float64 twins, compiled, and when a
value diverges eager again, a localization run and one run per remedy); the report is written into the
compiled run's recording, which is kept like any live run's (`--save`, .tcx/last.tcx), so
`tcx numerics run.tcx` re-renders it. A recording or log TARGET is rendered as it is.
"""

from __future__ import annotations

import dataclasses
import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import click

from tcx.cli.views import view_command
from tcx.core.views.registry import get

VIEW = get("numerics")
RUN_OPTIONS = {
    "rtol": "--rtol",
    "atol": "--atol",
    "multiplier": "--multiplier",
    "max_runs": "--max-runs",
}


@view_command(
    VIEW,
    click.option(
        "--localize/--no-localize",
        default=True,
        help="Place the first divergence: its call's graphs replayed stage by stage in the compiled run, to "
        "the node, the line and the pass (default: on; --no-localize compares only).",
    ),
    click.option(
        "--grads/--no-grads",
        default=True,
        help="Also compare the parameters' gradients after each backward and the parameters after each "
        "optimizer step (default: on).",
    ),
)
def command(**params: Any) -> None:
    from tcx.cli import common
    from tcx.core.run.targets import FileTarget, resolve_target
    from tcx.renderers.formats import write

    if isinstance(resolve_target(params["target"]), FileTarget):
        given = [flag for key, flag in RUN_OPTIONS.items() if params.get(key) not in (None, False)]
        if given:
            click.echo(
                f"tcx: note: {', '.join(given)} ignored: nothing is run for a recording or log "
                "(its comparison was judged when it was recorded).",
                err=True,
            )
        loaded = common.load(params, VIEW.fresh_compile)
    else:
        loaded = numerics_run(params)
    view = VIEW.builder()(loaded.model, common.selection(loaded))
    write(VIEW, view, params["fmt"], common.console(params), params)
    common.saved_note(loaded)
    common.finish(loaded.model)


def numerics_run(params: dict[str, Any]) -> Any:
    """Make the runs for a program TARGET; returns the compiled run, loaded, with the report in it."""
    from tcx.core.errors import UsageError
    from tcx.core.numerics.judge import Tolerance
    from tcx.core.numerics.pipeline import DEFAULT_MAX_RUNS, Options, numerics
    from tcx.core.run.targets import resolve_target

    for key in ("rtol", "atol", "multiplier"):
        value = params.get(key)
        if value is not None and not (value >= 0 and value == value and value != float("inf")):
            raise UsageError(f"--{key} must be a finite number, 0 or more (got {value}).")
    max_runs = params.get("max_runs")
    if max_runs is not None and not 0 <= max_runs <= 100:
        raise UsageError(f"--max-runs must be from 0 to 100 (got {max_runs}).")
    options = Options(
        tolerance=Tolerance(params.get("multiplier"), params.get("rtol"), params.get("atol")),
        grads=params.get("grads") is not False,
        max_runs=DEFAULT_MAX_RUNS if max_runs is None else int(max_runs),
        localize=params.get("localize") is not False,
    )
    from tcx.core.run import driver, warm

    if params.get("save"):
        driver.check_save(params["save"], getattr(resolve_target(params["target"]), "script", None))
    runner = LiveRunner(params)
    try:
        # the runs after the first fork from one warm process (core/run/warm.py)
        with tempfile.TemporaryDirectory(prefix="tcx-numerics-") as folder, warm.invocation():
            report = numerics(runner, Path(folder), options)
        return runner.finish(report)
    finally:
        runner.cleanup()


class LiveRunner:
    """The runs of `tcx numerics`, each a live run with the numerics capture (core/numerics/pipeline.Runner).
    Every run's recording is held until the report is written into the compiled one."""

    def __init__(self, params: dict[str, Any]) -> None:
        from tcx.core.run.targets import resolve_target

        self.params = params
        self.target = resolve_target(params["target"])
        self.runs: list[tuple[Any, Any, bool]] = []  # (LiveRun, RunOptions, kept for the report)

    def __call__(self, request: Any) -> Any:
        from tcx.cli.options import build_run_options
        from tcx.cli.session import check_exit, record_live
        from tcx.core.ingest.recording import load_recording
        from tcx.core.model import build_model
        from tcx.core.numerics.pipeline import RunResult

        click.echo(f"tcx numerics: {request.name} run: {request.purpose}", err=True)
        opts = build_run_options(self.params, False, (f"numerics={request.spec_path}",))
        opts = dataclasses.replace(
            opts, save=None, keep_last=False, what_if=None, backend=request.backend or opts.backend
        )
        run = record_live(self.target, opts)
        self.runs.append((run, opts, request.keep))
        model = build_model(load_recording(run.path), "live")
        check_exit(model)
        program = model.status.program
        failed = None
        if program.failed and program.status != "interrupted":
            first = str(program.message or "").strip().splitlines()[:1]
            failed = program.status + (
                f" ({': '.join(str(p) for p in (program.exc_type, *first) if p)[:200]})"
            )
        recorded = model.numerics
        return RunResult(
            seconds=program.wall_s,
            failed=failed,
            interrupted=program.status == "interrupted",  # tcx stopped it (the outcome says so)
            probes=list(recorded.probes),
            problems=list(recorded.problems),
        )

    def finish(self, report: Any) -> Any:
        """Write the report into the compiled run's recording (the first run's when no compiled run was
        made) and load it as a live run is loaded: saved with --save, kept in .tcx/last.tcx."""
        from tcx.cli.session import finish_live
        from tcx.core.ingest.recording import RecordingWriter
        from tcx.core.run.last_run import LastRun

        if not self.runs:
            raise RuntimeError("tcx numerics made no run")
        run, opts, _ = next((r for r in self.runs if r[2]), self.runs[0])
        self.runs = [r for r in self.runs if r[0] is not run]
        writer = RecordingWriter(run.path)
        writer.write("numerics_report", **report.to_json())
        writer.close()
        final = dataclasses.replace(
            opts, save=self.params.get("save"), keep_last=not self.params.get("no_save")
        )
        with LastRun() if final.keep_last else nullcontext() as slot:
            return finish_live(self.target, run, final, slot)

    def cleanup(self) -> None:
        for run, _, _ in self.runs:
            run.cleanup()
        self.runs = []
