"""`tcx check TARGET`: a CI gate; one `--max-*` option per row of core/budgets.BUDGETS."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from tcx.cli.views import view_command
from tcx.core.budgets import BUDGETS
from tcx.core.views.registry import get

VIEW = get("check")
OVERRIDES = ("backend", "mode", "dynamic")


def budget_options() -> list[Callable[..., Any]]:
    """`--max-graph-breaks N` and the others, one per budget."""
    return [
        click.option(
            budget.option,
            budget.key,
            type=budget.type,
            default=None,
            metavar="N",
            help=f"Budget for {budget.label}.",
        )
        for budget in BUDGETS.values()
    ]


@view_command(
    VIEW,
    *budget_options(),
    click.option(
        "--baseline",
        type=click.Path(dir_okay=False),
        default=None,
        metavar="FILE",
        help="Fail only when this run is worse than the baseline FILE (and say what got worse).",
    ),
    click.option(
        "--write-baseline",
        type=click.Path(dir_okay=False),
        default=None,
        metavar="FILE",
        help="Write this run's counts and graph breaks to FILE as the baseline.",
    ),
    click.option(
        "--allow-empty",
        is_flag=True,
        default=False,
        help="Pass a run that compiled nothing (by default it fails, exit 1: counts of 0 were not seen).",
    ),
)
def command(**params: Any) -> None:
    from tcx.cli import common
    from tcx.core.run.targets import FileTarget, resolve_target
    from tcx.core.views.check import budgets_from, compare_baseline, evaluate, write_baseline
    from tcx.renderers.formats import write

    asked = {key: params.get(key) for key in BUDGETS}
    budgets = budgets_from(asked, baseline=bool(params["baseline"] or params["write_baseline"]))
    # Overrides the user chose for this check: a live run uses them, and a recording made with
    # them is accepted (any other run that did not compile as the program does fails, exit 4).
    accepted = {k: str(params[k]) for k in OVERRIDES if params.get(k) is not None}
    if accepted and isinstance(resolve_target(params["target"]), FileTarget):
        params = {**params, **dict.fromkeys(OVERRIDES)}  # nothing runs: not "ignored", accepted
    warm = None
    program = not isinstance(resolve_target(params["target"]), FileTarget)
    judged_on = {BUDGETS[key].judged_on for key in budgets}
    numerics = "numerics" in judged_on
    if numerics and judged_on & {"warm", "cost"}:
        from tcx.core.errors import UsageError

        raise UsageError(
            "the --max-numerics-* budgets are judged on tcx numerics' runs, the warm-start and cost budgets "
            "on runs of their own: give them to two checks."
        )
    if numerics and program:  # compared as `tcx numerics --no-localize` compares
        from tcx.cli.cmd_numerics import numerics_run

        loaded = numerics_run({**params, "max_runs": 0, "localize": False})
    elif "warm" in judged_on:  # judged on a warm run, as `tcx cache` makes
        from tcx.cli.cmd_cache import warm_run

        loaded, warm = warm_run(params, [BUDGETS[k] for k in budgets if BUDGETS[k].judged_on == "warm"])
    elif (
        "cost" in judged_on and program
    ):  # measured as `tcx cost` measures it: the eager run only when a speedup is asked for
        from tcx.cli.cmd_cost import cost_run

        loaded = cost_run(params, eager="min_speedup" in budgets)
    else:
        # the program's torch.export calls are recorded only when an export budget is asked for
        capture = ("export",) if "max_export_issues" in budgets else ()
        loaded = common.load(params, VIEW.fresh_compile, capture=capture)
    ex = VIEW.builder()(loaded.model, common.selection(loaded))
    result = evaluate(ex, budgets, warm, accepted, allow_empty=params["allow_empty"])
    if params["baseline"]:
        result.baseline = params["baseline"]
        result.worse_than_baseline = compare_baseline(params["baseline"], ex)
    if params["write_baseline"]:
        write_baseline(params["write_baseline"], ex)
        click.echo(f"baseline written to {params['write_baseline']}", err=True)
    write(VIEW, result, params["fmt"], common.console(params), params)
    common.saved_note(loaded)
    sys.exit(result.exit_code)
