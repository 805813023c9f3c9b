"""`tcx fix TARGET`: each candidate remedy of the baseline's findings re-run in a fresh process, and
verified (or not) from the re-run's own figures (core/fix/verify.py).

Each run is a live run like any view's (cli/session.py) with the `fix` capture, which applies the
remedy in the child before the program starts; the user's files are never edited.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

import click

from tcx.cli.options import render_options, run_options
from tcx.cli.views import EPILOG


@click.command(
    name="fix",
    epilog=EPILOG,
    help="Try the remedies of TARGET's graph breaks and recompiles: each re-run in a fresh process with "
    "the remedy applied (config, mark_dynamic, dynamic=True, torch.cond on a copy; your files are never "
    "edited), verified when "
    "the finding is gone, nothing got worse and the outputs match.",
)
@run_options
@click.option(
    "--max-runs",
    type=click.IntRange(0, 100),
    default=None,
    metavar="N",
    help="Re-run at most N remedies (default 5), heaviest findings first; the baseline is not counted.",
)
@click.option(
    "--keep-logs",
    type=click.Path(file_okay=False),
    default=None,
    metavar="DIR",
    help="Keep torch's own TORCH_TRACE log of every run in DIR/<run> (baseline, remedy-1, ...).",
)
@click.option(
    "--apply",
    "apply_patches",
    is_flag=True,
    help="Write each verified code remedy's diff next to its file as FILE.tcx.patch (never in place).",
)
@render_options(("text", "json"))
def command(**params: Any) -> None:
    from tcx.cli import common
    from tcx.core.errors import UsageError
    from tcx.core.fix.verify import DEFAULT_MAX_RUNS, fix, to_json
    from tcx.core.run.targets import FileTarget, resolve_target
    from tcx.renderers.fix_terminal import render_fix

    target = resolve_target(params["target"])
    if isinstance(target, FileTarget):
        raise UsageError(
            f"tcx fix runs a program; {params['target']!r} is a recording or a log.",
            hint="Give the program: tcx fix script.py (or script.py:func).",
        )
    max_runs = DEFAULT_MAX_RUNS if params.get("max_runs") is None else params["max_runs"]
    with tempfile.TemporaryDirectory(prefix="tcx-fix-") as folder:
        report = fix(make_runner(params), Path(folder), max_runs, program=target.script)
    if params["fmt"] == "json":
        common.emit_json(to_json(report))
    else:
        render_fix(report, common.console(params))
    if params.get("apply_patches"):
        write_patches(report)
    common.finish(report.baseline.model)


def write_patches(report: Any) -> None:
    """`--apply`: each verified rewrite's patch beside its file; the files are left as they are."""
    from tcx.core.fix.rewrites import write_patch

    rewrites = [o.remedy.rewrite for o in report.verified if o.remedy.rewrite]
    for rewrite in rewrites:
        path = write_patch(rewrite)
        click.echo(f"patch written to {path} (apply it: patch {rewrite.file} < {path})", err=True)
    if not rewrites:
        click.echo("tcx: note: --apply: no verified code remedy, so no patch was written.", err=True)


def make_runner(params: dict[str, Any]) -> Any:
    """The runner core/fix/verify.py calls for each run: a live run with the remedy's fix capture."""
    import os

    from tcx.cli.options import build_run_options
    from tcx.cli.session import load
    from tcx.core.fix.verify import RUN_CAPTURES, RunRequest
    from tcx.core.run.targets import resolve_target
    from tcx.core.selectors import choose

    keep_logs = params.get("keep_logs")
    target = resolve_target(params["target"])

    def run(request: RunRequest) -> Any:
        label = "baseline: the program as it runs" if request.baseline else request.name
        click.echo(f"tcx fix: running {label}", err=True)
        # Caches off in every run: each compiles from scratch, so compile seconds compare, and no run
        # inherits what an earlier one left in the caches (PGO's dynamic dimensions among them).
        opts = build_run_options(params, True, (f"fix={request.spec_path}", *RUN_CAPTURES))
        env = dict(opts.env)
        trace = None
        if keep_logs:
            trace = str(Path(keep_logs) / request.name)
            env["TORCH_TRACE"] = trace
        opts = dataclasses.replace(
            opts,
            env=env,
            dynamic=opts.dynamic if request.dynamic is None else request.dynamic,
            save=opts.save if request.baseline else None,
            keep_last=opts.keep_last and request.baseline,
        )
        target_text = params["target"]
        if request.script and target.script:  # a rewritten copy, importing what the original imports
            target_text = request.script + (f":{target.function}" if target.function else "")
            folder = os.path.dirname(target.script)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (folder, os.environ.get("PYTHONPATH")) if p)
            opts = dataclasses.replace(opts, env=env)
        loaded = load(target_text, opts)
        return loaded.model, choose(loaded.model, loaded.function), trace

    return run
