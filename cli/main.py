"""The `tcx` command line. Thin: parse, call core, pick a renderer.

Importing this module must stay cheap (`tcx --help` never imports torch or rich):
every command imports what it needs when it runs.
"""

from __future__ import annotations

import gc
import os
import sys
import traceback
from typing import Any

import click

from tcx import __version__
from tcx.cli import common
from tcx.cli.options import render_options
from tcx.cli.views import EPILOG, commands
from tcx.core.errors import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, TcxError

# tcx builds a model of up to millions of objects from a log and keeps it until it exits; with
# Python's default thresholds (700, 10, 10) the cycle collector walks all of them again and again
# (a tenth of `tcx report`'s time on a 48 MB log). The programs tcx runs live in child processes.
GC_THRESHOLDS = (100_000, 20, 20)
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT, epilog=EPILOG)
@click.version_option(__version__, prog_name="tcx")
def cli() -> None:
    """Make torch.compile explain itself.

    Start with `tcx explain script.py`: it runs the program once, as it runs, and keeps
    the run in .tcx/last.tcx, so every other view reads it again without running it
    (`tcx guards .tcx/last.tcx`, `tcx show`).

    \b
    Which commands run the program (seconds to minutes: a real torch.compile)
    and which read a saved run (instant):
      run it     a view given a script or module (explain, recompiles, guards,
                 graphs, codegen, report, ...): one run; cost (eager, then
                 compiled), cache (cold, then warm), numerics and fix: several
                 runs; record CMD: any command, e.g. torchrun
      read it    a view given FILE.tcx, TRACE.log or DIR; show; diff

    \b
    TARGET is one of:
      script.py               run it as `__main__`, record every compile
      script.py:func          only that function's frames; with --call (or a
                              tcx_calls() in the script) tcx calls it itself
      package.module:func     import the module, call func with --call/tcx_calls()
      FILE.tcx                a recording saved with --save
      TRACE.log | DIR         a TORCH_TRACE log file or directory
      FILE.tcx:func           (also TRACE.log:func, DIR:func) only func's compiles
    """


@cli.command(epilog=EPILOG)
@click.argument("recording", required=False)
@click.option(
    "--events",
    "list_events",
    is_flag=True,
    help="List every event name with its count (unknown ones marked).",
)
@click.option(
    "--event",
    "event_name",
    metavar="NAME",
    default=None,
    help="Print the raw metadata and payload of events named NAME (e.g. artifact:recompile_reasons).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="With --event: at most this many events.",
)
@render_options(("text", "json"))
def show(**params: Any) -> None:
    """Re-render a saved recording or a TORCH_TRACE log (no torch needed); FILE:func for one function.

    Without RECORDING: the last live run, which every view keeps in .tcx/last.tcx."""
    from tcx.core.errors import UsageError
    from tcx.core.run.last_run import LAST_RUN
    from tcx.core.run.targets import FileTarget, resolve_target
    from tcx.core.views.explain import explain as build
    from tcx.core.views.explain import to_json
    from tcx.renderers.explain_terminal import render_explain

    if params["recording"] is None:
        if not os.path.isfile(LAST_RUN):
            raise UsageError(
                f"tcx show needs a recording or a log; there is no {LAST_RUN} here "
                "(every live run keeps one: e.g. tcx explain script.py)."
            )
        params["recording"] = LAST_RUN
    target = resolve_target(params["recording"])
    if not isinstance(target, FileTarget):
        if target.module and not target.function:  # a dotted name that is no file: show never imports
            raise UsageError(f"no such file: {params['recording']!r}.")
        raise UsageError(
            f"`tcx show` renders a saved recording or a log; {params['recording']!r} is a program. "
            "Use `tcx explain` to run it."
        )
    params["target"] = params["recording"]
    loaded = common.load(params)
    if params["list_events"] or params["event_name"]:
        from tcx.renderers.raw_events import render_raw

        render_raw(loaded.model, params["event_name"], params["limit"], params["fmt"], common.console(params))
        return
    ex = build(loaded.model, common.selection(loaded))
    if params["fmt"] == "json":
        common.emit_json(to_json(ex))
    else:
        render_explain(ex, common.console(params))
    common.finish(loaded.model)  # a failed run exits 3, as `tcx explain FILE` does


# Every view of the registry (core/views/registry.py), then the commands that are not views.
for _cmd in commands():
    cli.add_command(_cmd)
for _module in ("cmd_browse", "cmd_record", "cmd_completion", "cmd_mcp", "cmd_fix"):
    cli.add_command(__import__(f"tcx.cli.{_module}", fromlist=["command"]).command)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, turning every failure into a message and an exit code."""
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        cli.main(args=argv, prog_name="tcx", standalone_mode=False)
    except SystemExit as exc:  # a command's own exit code; a run stopped by a signal says so
        sys.exit(_stop_code() or exc.code)
    except click.exceptions.Abort:
        click.echo("tcx: interrupted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE if exc.exit_code == 2 else exc.exit_code)
    except TcxError as exc:
        from tcx.renderers.safe import clean  # a message may quote the input (a file name, a field)

        click.echo(f"tcx: error: {clean(exc.message)}", err=True)
        if exc.hint:
            click.echo(f"     {clean(exc.hint)}", err=True)
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(EXIT_OK)
    except Exception as exc:
        detail = getattr(exc, "traceback", "") or traceback.format_exc()
        if os.environ.get("TCX_DEBUG"):
            click.echo(detail, err=True)
        click.echo(
            f"tcx: internal error ({type(exc).__name__}: {exc}). This is a bug in tcx; "
            "rerun with TCX_DEBUG=1 for the traceback and report it.",
            err=True,
        )
        sys.exit(EXIT_INTERNAL)
    sys.exit(_stop_code() or EXIT_OK)


def _stop_code() -> int | None:
    """128 + the signal number when SIGINT/SIGTERM stopped a run (its report is partial)."""
    processes = sys.modules.get("tcx.core.run.processes")  # imported only by commands that ran something
    return processes.stop_exit_code() if processes else None
