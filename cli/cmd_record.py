"""`tcx record -- CMD ...`: run any command with TORCH_TRACE set, then explain its logs."""

from __future__ import annotations

import sys
from typing import Any

import click

from tcx.cli.options import render_options


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
    "--timeout", type=float, default=None, metavar="SECONDS", help="Stop the command after this long."
)
@click.option("--no-cache", is_flag=True, help="Disable Inductor's caches so every stage really runs.")
@render_options(("text", "json"))
def command(**params: Any) -> None:
    """Run CMD (e.g. torchrun ...) with TORCH_TRACE set, then explain every rank's log."""
    import shutil

    from tcx.cli import common
    from tcx.core.analysis import build_model
    from tcx.core.command_run import keep_logs, run_command
    from tcx.core.errors import EXIT_TARGET, TcxError
    from tcx.core.explain import explain, to_json
    from tcx.core.trace_log import load_trace
    from tcx.renderers.explain_terminal import render_explain

    run = run_command(list(params["cmd"]), timeout=params["timeout"], disable_caches=params["no_cache"])
    try:
        if params["save"]:
            keep_logs(run, params["save"])
        try:
            model = build_model(load_trace(run.trace_dir), "trace")
        except TcxError:
            click.echo(
                f"tcx: the command wrote no TORCH_TRACE events (exit code {run.returncode}).", err=True
            )
            sys.exit(EXIT_TARGET if run.returncode else 0)
        model.target = " ".join(params["cmd"])
        ex = explain(model)
        if params["fmt"] == "json":
            doc = to_json(ex)
            doc["program"] = {
                "status": _status(run),
                "exit_code": run.returncode,
                "signal": run.signal_name,
                "wall_s": run.wall_s,
            }
            common.emit_json(doc)
        else:
            render_explain(ex, common.console(params))
        if params["save"]:
            click.echo(f"trace logs saved to {params['save']} (tcx show {params['save']})", err=True)
    finally:
        shutil.rmtree(run.trace_dir, ignore_errors=True)
    if _status(run) != "ok":
        click.echo(f"tcx: the command {_status(run)} (exit code {run.returncode}).", err=True)
        sys.exit(EXIT_TARGET)


def _status(run: Any) -> str:
    if run.timed_out:
        return "timed out"
    if run.returncode == 0:
        return "ok"
    return f"was killed by {run.signal_name}" if run.signal_name else "failed"
