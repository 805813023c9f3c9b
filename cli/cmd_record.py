"""`tcx record -- CMD ...`: run any command with TORCH_TRACE set, then explain its logs."""

from __future__ import annotations

import sys
from typing import Any

import click

from tcx.cli.options import check_timeout, render_options


@click.command(name="record", context_settings={"ignore_unknown_options": True})
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- CMD [ARGS]...")
@click.option(
    "--save",
    type=click.Path(file_okay=False),
    default=None,
    metavar="DIR",
    help="Keep the trace logs in DIR (re-render with `tcx show DIR`).",
)
@click.option(
    "--timeout",
    type=float,
    default=None,
    metavar="SECONDS",
    callback=check_timeout,
    help="Stop the command after this long.",
)
@click.option("--no-cache", is_flag=True, help="Disable Inductor's caches so every stage really runs.")
@render_options(("text", "json"))
def command(**params: Any) -> None:
    """Run CMD (e.g. torchrun ...) with TORCH_TRACE set, then explain every rank's log."""
    import shutil

    from tcx.cli import common
    from tcx.core.errors import EXIT_TARGET, TcxError
    from tcx.core.run.command_run import command_model, keep_logs, run_command
    from tcx.core.run.driver import check_save
    from tcx.core.views.explain import explain, to_json
    from tcx.renderers.explain_terminal import render_explain

    if params["save"]:
        check_save(params["save"], directory=True)
    run = run_command(list(params["cmd"]), timeout=params["timeout"], disable_caches=params["no_cache"])
    try:
        if params["save"]:
            keep_logs(run, params["save"])
        try:
            model = command_model(run, list(params["cmd"]))
        except TcxError:
            click.echo(
                f"tcx: the command wrote no TORCH_TRACE events (exit code {run.returncode}).", err=True
            )
            sys.exit(EXIT_TARGET if run.returncode else 0)
        ex = explain(model)
        hang = _hang(run, model, params["timeout"])
        if params["fmt"] == "json":
            common.emit_json({**to_json(ex), "hang": hang.to_json() if hang else None})
        else:
            render_explain(ex, common.console(params), view="record")
            if hang:
                from tcx.renderers.hang_terminal import render_hang

                render_hang(hang, common.console(params))
        if params["save"]:
            click.echo(f"trace logs saved to {params['save']} (tcx show {params['save']})", err=True)
    finally:
        shutil.rmtree(run.trace_dir, ignore_errors=True)
    if run.interrupted_by:
        click.echo(f"tcx: interrupted ({run.interrupted_by}): tcx stopped the command.", err=True)
    elif _status(run) != "ok":
        click.echo(f"tcx: the command {_status(run)} (exit code {run.returncode}).", err=True)
    if _status(run) != "ok":
        sys.exit(EXIT_TARGET)


def _hang(run: Any, model: Any, timeout: float | None) -> Any:
    """Where each rank was, when tcx stopped a multi-rank job (timeout, SIGTERM, SIGINT)."""
    stopped = run.interrupted_by or (f"tcx's timeout ({timeout:g} s)" if run.timed_out and timeout else None)
    if not stopped:
        return None
    from tcx.core.views.ranks import hang_report

    return hang_report(model, stopped)


def _status(run: Any) -> str:
    if run.interrupted_by:
        return "interrupted"
    if run.timed_out:
        return "timed out"
    if run.returncode == 0:
        return "ok"
    return f"was killed by {run.signal_name}" if run.signal_name else "failed"
