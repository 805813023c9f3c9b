"""`tcx cache TARGET` (a program: a cold run, then warm runs sharing a private cache directory) and
`tcx cache A B` (two recordings or TORCH_TRACE logs, compared offline)."""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from tcx.cli.views import view_command
from tcx.core.budgets import BUDGETS, Budget
from tcx.core.run import run_series
from tcx.core.views.registry import get

VIEW = get("cache")
CAPTURE = ("caches",)  # core/recorder/compat_cache.py: caches on, every key's parts logged


@view_command(
    VIEW,
    click.option(
        "--runs",
        type=click.IntRange(1, 20),
        default=None,
        metavar="N",
        help="Warm runs after the cold one (default 1); the last one is judged.",
    ),
    click.option(
        "--env",
        "env",
        multiple=True,
        metavar="K=V",
        help="Set K=V in the environment of the warm runs only (repeatable): does this flag break my cache?",
    ),
)
def command(**params: Any) -> None:
    from tcx.cli import common
    from tcx.core.views.cache import build_cache
    from tcx.renderers.formats import write

    loaded, labels, envs = load_runs(params)
    pairs = tuple((lo.model, common.selection(lo)) for lo in loaded)
    view = build_cache(*pairs[-1], earlier=pairs[:-1], labels=labels, envs=envs)
    write(VIEW, view, params["fmt"], common.console(params), params)
    for lo in loaded:
        common.saved_note(lo)
    for lo in loaded:
        common.finish(lo.model)


def load_runs(params: dict[str, Any]) -> tuple[list[Any], tuple[str, ...], tuple[dict[str, str], ...]]:
    """The runs to compare: the two files `A B` (or one), or the program run cold then warm."""
    from tcx.cli import common
    from tcx.core.errors import UsageError
    from tcx.core.run.targets import FileTarget, resolve_target

    target = resolve_target(params["target"])
    if isinstance(target, FileTarget):
        others = list(params.get("program_args") or ())
        if len(others) > 1:
            raise UsageError(f"tcx cache compares at most two recordings or logs (got {1 + len(others)}).")
        if params.get("runs") or params.get("env"):
            click.echo(
                "tcx: note: --runs and --env ignored: nothing is run for recordings or logs.", err=True
            )
        params["program_args"] = ()
        files = [params["target"], *others]
        loaded = [common.load(params, None, "")] + [common.load_file(f) for f in others]
        return loaded, (("A", "B") if len(files) == 2 else ()), ()
    warm_env = run_series.parse_env(params.get("env") or ())
    runs = params.get("runs") or 1
    loaded = record_runs(params, runs, warm_env)
    return loaded, run_series.labels(runs), run_series.run_envs(runs, warm_env)


def record_runs(params: dict[str, Any], warm_runs: int, warm_env: dict[str, str]) -> list[Any]:
    """Run the program cold, then `warm_runs` times warm, with the compile caches on and in one
    private directory (removed afterwards). A run that fails ends the series: it is reported.

    The runs share an environment no other command has (the private cache folder): they fork from
    a warm process of this command's own, started with the first run a later one shares its
    environment with (core/run/warm.py). It has imported torch and compiled nothing, so the cold
    run finds no compiled code in memory or on disk, as in a fresh process."""
    from tcx.cli import common
    from tcx.cli.session import load
    from tcx.core.run import warm

    base = common.build_run_options(params, VIEW.fresh_compile, CAPTURE)
    loaded = []
    with run_series.private_cache_dir() as env, warm.invocation(own=True):
        envs = [{**env, **(warm_env if i else {})} for i in range(warm_runs + 1)]
        for i, run_env in enumerate(envs):
            opts = dataclasses.replace(
                base,
                env=run_env,
                save=run_series.saved_name(base.save, i, warm_runs),
                warm_again=envs[i + 1 : i + 2] == [run_env],
            )
            loaded.append(load(params["target"], opts))
            if common.target_failed(loaded[-1].model):
                break
    return loaded


def warm_run(params: dict[str, Any], budgets: list[Budget]) -> tuple[Any, dict[str, float]]:
    """For `tcx check`'s warm-start budgets: the run judged (a program's warm run after a cold one;
    a recording or log itself) and its counts. A count the run cannot show is an error, never 0."""
    from tcx.cli import common
    from tcx.core.errors import InputError
    from tcx.core.views.cache import build_cache

    loaded, labels, envs = load_runs({**params, "runs": None, "env": ()})
    if common.target_failed(loaded[-1].model):
        return loaded[-1], {}  # the check reports the failed run (exit 3)
    pairs = tuple((lo.model, common.selection(lo)) for lo in loaded)
    view = build_cache(*pairs[-1], earlier=pairs[:-1], labels=labels, envs=envs)
    judged = view.judged
    if BUDGETS["max_cache_misses"] in budgets and judged.caches_disabled:
        raise InputError(
            f"{judged.model.target}: the compile caches were disabled in this run (tcx records with "
            "them off), so its cache misses cannot be counted.",
            hint="Check the program itself (tcx check PROGRAM runs it cold, then warm), or a recording "
            "saved by `tcx cache PROGRAM --save FILE`.",
        )
    seconds = view.compile_seconds
    if seconds is None and judged.model.compiles:
        raise InputError(
            f"{judged.model.target}: torch logged no compilation_metrics for its compiles, so its compile "
            "time cannot be checked."
        )
    return loaded[-1], {"compile_seconds": seconds or 0.0, "cache_miss_count": view.cache_miss_count}
