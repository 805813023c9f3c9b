"""The `tcx` command line. Thin: parse, call core, pick a renderer.

Importing this module must stay cheap (`tcx --help` never imports torch or rich):
every command imports what it needs when it runs.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

import click

from tcx import __version__
from tcx.cli import common
from tcx.cli.options import DYNAMO_ONLY_REASON, render_options, run_options
from tcx.core.errors import EXIT_INTERNAL, EXIT_OK, EXIT_TARGET, EXIT_USAGE, TcxError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

EPILOG = """\b
Exit codes: 0 ok · 1 a `check` budget was exceeded · 2 usage error (bad option, missing
file or function, bad --call) · 3 the target failed (raised, exited non-zero, crashed,
timed out) · 4 unreadable recording or log · 5 internal tcx error.
"""


@click.group(context_settings=CONTEXT, epilog=EPILOG)
@click.version_option(__version__, prog_name="tcx")
def cli() -> None:
    """Make torch.compile explain itself.

    \b
    TARGET is one of:
      script.py               run it as __main__, record every compile
      script.py:func          only that function's frames; with --call (or a
                              tcx_calls() in the script) tcx calls it itself
      package.module:func     import the module, call func with --call/tcx_calls()
      FILE.tcx                a recording saved with --save
      TRACE.log | DIR         a TORCH_TRACE log file or directory
    """


@cli.command(epilog=EPILOG)
@run_options
@render_options(("text", "json"))
def explain(**params: Any) -> None:
    """Why did TARGET graph-break, where, and what to change."""
    from tcx.core.explain import explain as build
    from tcx.core.explain import to_json
    from tcx.renderers.explain_terminal import render_explain

    loaded = common.load(params, "eager", DYNAMO_ONLY_REASON)
    ex = build(loaded.model, loaded.function)
    if params["fmt"] == "json":
        common.emit_json(to_json(ex))
    else:
        render_explain(ex, common.console(params))
        common.saved_note(loaded)
    common.finish(loaded.model)


@cli.command(epilog=EPILOG)
@run_options
@click.option(
    "--max-graph-breaks", type=int, default=None, metavar="N", help="Budget for graph-break events."
)
@click.option(
    "--max-unique-graph-breaks",
    type=int,
    default=None,
    metavar="N",
    help="Budget for distinct breaks.",
)
@click.option("--max-recompiles", type=int, default=None, metavar="N", help="Budget for recompiles.")
@click.option("--max-graphs", type=int, default=None, metavar="N", help="Budget for graphs Dynamo produced.")
@click.option(
    "--max-failed-frames",
    type=int,
    default=None,
    metavar="N",
    help="Budget for frames Dynamo gave up on.",
)
@click.option(
    "--max-rank-divergence",
    type=int,
    default=None,
    metavar="N",
    help="Budget for compile ids where ranks of a multi-rank log differ.",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Fail only when this run is worse than the baseline FILE (and say what got worse).",
)
@click.option(
    "--write-baseline",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Write this run's counts and graph breaks to FILE as the baseline.",
)
@render_options(("text", "json", "sarif", "github"))
def check(**params: Any) -> None:
    """Fail (exit 1) when TARGET exceeds a budget: a CI gate on graph breaks and recompiles."""
    from tcx.core.check import budgets_from, compare_baseline, evaluate, write_baseline
    from tcx.core.explain import explain as build
    from tcx.renderers.check_output import render_check

    budgets = budgets_from(params, baseline=bool(params["baseline"] or params["write_baseline"]))
    loaded = common.load(params, "eager", DYNAMO_ONLY_REASON)
    ex = build(loaded.model, loaded.function)
    result = evaluate(ex, budgets)
    if params["baseline"]:
        result.baseline = params["baseline"]
        result.worse_than_baseline = compare_baseline(params["baseline"], ex)
    if params["write_baseline"]:
        write_baseline(params["write_baseline"], ex)
        click.echo(f"baseline written to {params['write_baseline']}", err=True)
    render_check(result, params["fmt"], common.console(params))
    if common.target_failed(loaded.model):
        sys.exit(EXIT_TARGET)
    sys.exit(result.exit_code)


@cli.command(epilog=EPILOG)
@click.argument("recording")
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
    "--limit", type=int, default=20, show_default=True, help="With --event: at most this many events."
)
@render_options(("text", "json"))
def show(**params: Any) -> None:
    """Re-render a saved recording or a TORCH_TRACE log (no torch needed)."""
    from tcx.core.errors import UsageError
    from tcx.core.explain import explain as build
    from tcx.core.explain import to_json
    from tcx.core.targets import FileTarget, resolve_target
    from tcx.renderers.explain_terminal import render_explain

    target = resolve_target(params["recording"])
    if not isinstance(target, FileTarget):
        if target.module and not target.function:  # a dotted name that is no file: show never imports
            raise UsageError(f"no such file: {params['recording']!r}.")
        raise UsageError(
            f"`tcx show` renders a saved recording or a log; {params['recording']!r} is a program. "
            "Use `tcx explain` to run it."
        )
    params["target"] = params["recording"]
    loaded = common.load(params, None, "")
    if params["list_events"] or params["event_name"]:
        from tcx.renderers.raw_events import render_raw

        render_raw(loaded.model, params["event_name"], params["limit"], params["fmt"], common.console(params))
        return
    ex = build(loaded.model)
    if params["fmt"] == "json":
        common.emit_json(to_json(ex))
    else:
        render_explain(ex, common.console(params))


# Views with their own module (cli/cmd_*.py) register here; each module imports only click
# at import time so `tcx --help` stays fast.
for _module in (
    "cmd_record",
    "cmd_diff",
    "cmd_recompiles",
    "cmd_graphs",
    "cmd_fusion",
    "cmd_codegen",
    "cmd_trace",
    "cmd_guards",
    "cmd_bytecode",
    "cmd_completion",
    "cmd_report",
):
    _cmd = __import__(f"tcx.cli.{_module}", fromlist=["command"]).command
    cli.add_command(_cmd)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, turning every failure into a message and an exit code."""
    try:
        cli.main(args=argv, prog_name="tcx", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("tcx: interrupted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE if exc.exit_code == 2 else exc.exit_code)
    except TcxError as exc:
        click.echo(f"tcx: error: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"     {exc.hint}", err=True)
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
    sys.exit(EXIT_OK)
