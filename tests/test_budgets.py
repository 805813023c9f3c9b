"""A budget is one typed value (core/budgets.Budget) from `tcx check`'s option to its SARIF rule:
the option, its type, the run it is judged on and the rule id all come from the same row."""

from __future__ import annotations

import json
import re

import click
from conftest import REPO, run_tcx

from tcx.cli.main import cli
from tcx.core.budgets import BUDGETS

NANO = REPO / "fixtures" / "recordings" / "nano_train_inductor.tcx.gz"  # holds tcx cost's measurement


def test_each_budget_is_one_option_of_its_type_and_one_rule():
    params = {p.name: p for p in cli.commands["check"].params}
    for key, budget in BUDGETS.items():
        assert budget.key == key
        option = params[key]
        assert isinstance(option, click.Option) and option.opts == [budget.option]
        assert option.type == (click.FLOAT if budget.type is float else click.INT), key
        assert re.fullmatch(r"tcx/budget/[a-z0-9]+(-[a-z0-9]+)*", budget.rule_id), budget.rule_id
    assert len({b.rule_id for b in BUDGETS.values()}) == len(BUDGETS)
    # the ids CI systems already keep for the --max-* budgets do not change
    assert BUDGETS["max_graph_breaks"].rule_id == "tcx/budget/graph-breaks"
    assert {b.key for b in BUDGETS.values() if b.floor} == {"min_speedup"}


def test_a_floor_budget_fails_under_sarif_rule_of_its_own_name():
    """--min-speedup came out as the rule `tcx/budget/--min-speedup` (cut as if it were a --max-)."""
    proc = run_tcx("check", str(NANO), "--min-speedup", "1000", "--max-graphs", "0", "--format", "sarif")
    assert proc.returncode == 1, proc.stderr
    run = json.loads(proc.stdout)["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert sorted(rules) == ["tcx/budget/graphs", "tcx/budget/min-speedup"]
    assert {r["ruleId"] for r in run["results"]} == set(rules)
    speedup = next(b for b in run["properties"]["budgets"] if b["option"] == "--min-speedup")
    assert speedup["actual"] < 1000
