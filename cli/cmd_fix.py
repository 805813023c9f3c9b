"""`tcx fix TARGET`: each candidate remedy of the baseline's findings re-run in a fresh process, and
verified (or not) from the re-run's own figures (core/fix/verify.py).

Each run is a live run like any view's (cli/session.py) with the `fix` capture, which applies the
remedy in the child before the program starts; the user's files are never edited. The program runs
in tcx's current directory, as it would without tcx, unless `--isolate` runs each run in a fresh copy
of the program's folder (`IsolatedCopy`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
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
    "the remedy applied (config, recompile_limit, mark_dynamic, maybe_mark_dynamic, shapes_spec, "
    "mark_static, dynamic=True, code rewrites on a copy; your files are never edited), verified when "
    "the finding is gone, nothing got worse and the outputs match.",
)
@run_options
@click.option(
    "--max-runs",
    type=click.IntRange(0, 100),
    default=None,
    metavar="N",
    help="Re-run at most N remedies (default 5), the costliest findings first (their compile seconds in "
    "the baseline); the baseline is not counted.",
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
@click.option(
    "--isolate",
    is_flag=True,
    help="Run every run (the baseline too) in a fresh copy of the program's folder, in a temporary "
    "directory, so a program that writes files cannot touch your working tree.",
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
    if params.get("isolate") and not target.script:
        raise UsageError(
            "--isolate copies the program's folder, and this TARGET is a module, not a script.",
            hint="Give the script: tcx fix --isolate path/to/script.py (or script.py:func).",
        )
    from tcx.core.recorder.compat_fix import missing_remedies
    from tcx.core.run import warm

    max_runs = DEFAULT_MAX_RUNS if params.get("max_runs") is None else params["max_runs"]
    # the re-runs fork from one warm process of this command's own (core/run/warm.py)
    with tempfile.TemporaryDirectory(prefix="tcx-fix-") as folder, warm.invocation():
        isolated = IsolatedCopy(target.script, Path(folder) / "isolated") if params.get("isolate") else None
        if isolated:
            isolated.check()
            runs_in = (
                f"a fresh copy of {isolated.source} for each run (in a temporary directory, the copy its "
                "working directory), so your files there were not touched"
            )
        else:
            runs_in = (
                f"place, with tcx's current directory ({os.getcwd()}) as its working directory: files it "
                "writes land where it writes them, once per run (--isolate runs each run in a copy of its "
                "folder)"
            )
        report = fix(
            make_runner(params, isolated),
            Path(folder),
            max_runs,
            program=target.script,
            missing=missing_remedies(),
            runs_in=runs_in,
        )
    if params["fmt"] == "json":
        common.emit_json(to_json(report))
    else:
        render_fix(report, common.console(params))
    if params.get("apply_patches"):
        write_patches(report)
    common.finish(report.baseline.model)


def write_patches(report: Any) -> None:
    """`--apply`: each verified rewrite's patch beside its file; the files are left as they are."""
    from tcx.core.errors import UsageError
    from tcx.core.fix.rewrites import write_patch

    rewrites = [o.remedy.rewrite for o in report.verified if o.remedy.rewrite]
    failed = []
    for rewrite in rewrites:
        try:
            path = write_patch(rewrite)
        except OSError as exc:
            failed.append(f"{rewrite.file}.tcx.patch ({exc.strerror or exc})")
            continue
        click.echo(f"patch written to {path} (apply it: patch {rewrite.file} < {path})", err=True)
    if not rewrites:
        click.echo("tcx: note: --apply: no verified code remedy, so no patch was written.", err=True)
    if failed:
        raise UsageError(f"--apply: could not write {', '.join(failed)}; the report above is complete.")


# --isolate copies the program's folder without these (tools' and version control's own state) and
# refuses a folder larger than this: a program in a big tree (a home directory) is named in the error.
SKIPPED = shutil.ignore_patterns(".git", "__pycache__", ".venv", "venv", "node_modules", ".tcx", "*.tcx")
MAX_COPY_BYTES = 512 * 1024 * 1024
MAX_COPY_FILES = 20_000


@dataclasses.dataclass
class IsolatedCopy:
    """--isolate: the program's folder copied afresh before each run, always to the same place (so the
    runs' paths compare), and the program run from the copy with the copy as its working directory."""

    script: str
    root: Path

    @property
    def source(self) -> str:
        return os.path.dirname(self.script)

    def check(self) -> None:
        from tcx.core.errors import UsageError

        files = size = 0
        for folder, dirs, names in os.walk(self.source):
            dirs[:] = [d for d in dirs if d not in SKIPPED(folder, dirs)]
            kept = set(names) - SKIPPED(folder, names)
            files += len(kept)
            size += sum(_size(os.path.join(folder, n)) for n in kept)
            if files > MAX_COPY_FILES or size > MAX_COPY_BYTES:
                raise UsageError(
                    f"--isolate copies the program's folder {self.source!r} for every run, and it holds more "
                    f"than {MAX_COPY_FILES:,} files or {MAX_COPY_BYTES // 2**20} MB; nothing was run.",
                    hint="Move the program into a folder of its own, or run without --isolate.",
                )

    def fresh(self, rewritten: str | None) -> tuple[str, str]:
        """A new copy (the last run's removed); `rewritten`: a code remedy's text put in place of the
        script. Returns the copy's script and folder."""
        copy = self.root / os.path.basename(self.source)
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(self.source, copy, ignore=SKIPPED, symlinks=True)
        script = copy / os.path.basename(self.script)
        if rewritten:
            shutil.copyfile(rewritten, script)
        return str(script), str(copy)


def _size(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def make_runner(params: dict[str, Any], isolated: IsolatedCopy | None = None) -> Any:
    """The runner core/fix/verify.py calls for each run: a live run with the remedy's fix capture."""
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
            trace = str(Path(keep_logs).absolute() / request.name)
            env["TORCH_TRACE"] = trace
        opts = dataclasses.replace(
            opts,
            env=env,
            dynamic=opts.dynamic if request.dynamic is None else request.dynamic,
            save=opts.save if request.baseline else None,
            keep_last=opts.keep_last and request.baseline,
        )
        target_text = params["target"]
        moved = None
        suffix = f":{target.function}" if target.function else ""
        if isolated and target.script:  # a fresh copy of the folder, the rewrite (if any) in it
            script, copy = isolated.fresh(request.script)
            target_text = script + suffix
            opts = dataclasses.replace(opts, cwd=copy)
            moved = (copy, isolated.source)
        elif request.script and target.script:  # a rewritten copy, importing what the original imports
            target_text = request.script + suffix
            folder = os.path.dirname(target.script)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (folder, os.environ.get("PYTHONPATH")) if p)
            opts = dataclasses.replace(opts, env=env)
        loaded = load(target_text, opts)
        if moved:  # the report names the program, not its copy
            loaded.model.target = loaded.model.target.replace(moved[0], moved[1], 1)
        return loaded.model, choose(loaded.model, loaded.function), trace, moved

    return run
