"""Golden test: what every view says about saved recordings and TORCH_TRACE logs stays the same.

Each view's JSON is reduced to what must not drift while the code underneath is restructured:
its counts, the compile ids, function names and kernel/graph names it mentions, and the keys
it has (keys may be added, never lost). Torch-free: the inputs are real recordings and logs
saved under tests/data/. The views run in-process through the click command group.

Regenerate deliberately (and explain the diff in the change) with:
    TCX_REGEN_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_views_golden.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tcx.cli.main import cli

DATA = Path(__file__).resolve().parent / "data"
GOLDEN = DATA / "golden"
INPUTS = {
    # `tcx report fixtures/programs/two_functions.py --backend inductor --save ...` (torch 2.13.0+cpu)
    "two_functions_inductor": GOLDEN / "two_functions_inductor.tcx.gz",
    # the same recording, only `f` (`run.tcx:f`: every view applies the same Selection)
    "two_functions_inductor_f": f"{GOLDEN / 'two_functions_inductor.tcx.gz'}:f",
    # `tcx report fixtures/programs/recompiles/changed_global.py --backend aot_eager --save ...`
    "changed_global_aot_eager": GOLDEN / "changed_global_aot_eager.tcx.gz",
    # TORCH_TRACE logs (see tests/data/README.md)
    "demo_trace": DATA / "traces" / "torch2.13_eager_demo.log.gz",
    "loop_break_trace": DATA / "traces" / "torch2.13_eager_loop_break.log.gz",
}
VIEWS = (
    "explain",
    "check",
    "trace",
    "bytecode",
    "guards",
    "recompiles",
    "graphs",
    "fusion",
    "codegen",
    "report",
    "diff",
)
# Keys of the JSON envelope (and its predecessors): they describe the input, not the view's facts.
ENVELOPE = {
    "schema",
    "tcx_version",
    "torch_version",
    "target",
    "source_kind",
    "source",
    "backend",
    "device",
    "selection",
    "function",
    "program",
    "preview",
}
# Values collected anywhere in a document, by key.
COLLECT = ("compile_id", "compile_ids", "function", "frame", "outcome", "graph", "type", "category")


# Inputs recorded with an override of the program's backend: `check` is told to accept it (it
# fails, exit 4, a run that did not compile as the program does unless given the same override).
ACCEPTED = {"changed_global_aot_eager": ("--backend", "aot_eager")}


def view_args(view: str, path: Path | str, name: str = "") -> list[str]:
    if view == "check":
        return ["check", str(path), "--max-graph-breaks", "1000", "--format", "json", *ACCEPTED.get(name, ())]
    if view == "diff":
        return ["diff", str(INPUTS["two_functions_inductor"]), str(path), "--format", "json"]
    return [view, str(path), "--format", "json"]


def run_view(args: list[str]) -> dict[str, Any]:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, f"tcx {' '.join(args)} -> {result.exit_code}\n{result.output}"
    return json.loads(result.stdout)


def _walk(doc: Any, key: str) -> list[Any]:
    out: list[Any] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == "selection":  # the envelope's, at any depth (diff's `a` and `b`)
                continue
            if k == key and not isinstance(v, (dict, list)):
                out.append(v)
            elif k == key and isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v):
                out.extend(v)
            else:
                out.extend(_walk(v, key))
    elif isinstance(doc, list):
        for v in doc:
            out.extend(_walk(v, key))
    return out


def summarize(view: str, doc: dict[str, Any]) -> dict[str, Any]:
    """What must not drift: counts, ids and names (sorted), and the view's own keys."""
    if view == "report":
        return {
            "keys": sorted(k for k in doc if k not in ENVELOPE),
            "pipeline": [[r["compile_id"], r["frame"]] for r in doc["pipeline"]],
            "problems": [[p["kind"], p["title"]] for p in doc["problems"]],
            "views": {name: summarize(name, sub) for name, sub in sorted(doc["views"].items())},
        }
    body = {k: v for k, v in doc.items() if k not in ENVELOPE}
    out: dict[str, Any] = {
        "keys": sorted(body),
        "counts": {k: v for k, v in sorted(body.items()) if k.endswith("_count") and isinstance(v, int)},
    }
    if view == "diff":
        out["counts"] = body.get("counts")
        out["kernels"] = [body.get("kernels_added"), body.get("kernels_removed")]
    for key in COLLECT:
        values = sorted({str(v) for v in _walk(body, key) if v is not None})
        if values:
            out[key] = values
    kernels = sorted({k["name"] for k in body.get("kernels") or [] if isinstance(k, dict)})
    if kernels:
        out["kernels"] = kernels
    return out


def compare(golden: dict[str, Any], actual: dict[str, Any], where: str = "") -> list[str]:
    """Differences, except what was added: keys a view gained, views the report gained."""
    problems = []
    for key in sorted(set(golden) | set(actual)):
        g, a = golden.get(key), actual.get(key)
        if key == "keys":
            lost = sorted(set(g or []) - set(a or []))
            if lost:
                problems.append(f"{where}keys lost: {lost}")
        elif isinstance(g, dict) and isinstance(a, dict) and key == "views":
            for name in sorted(g):
                problems += compare(g[name], a.get(name) or {}, f"{where}views.{name}.")
        elif g != a:
            problems.append(f"{where}{key}: golden {g!r} != now {a!r}")
    return problems


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_views_match_golden(name: str) -> None:
    path = INPUTS[name]
    actual = {view: summarize(view, run_view(view_args(view, path, name))) for view in VIEWS}
    golden_file = GOLDEN / f"{name}.json"
    if os.environ.get("TCX_REGEN_GOLDEN"):
        golden_file.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    golden = json.loads(golden_file.read_text(encoding="utf-8"))
    problems: list[str] = []
    for view in VIEWS:
        problems += compare(golden.get(view, {}), actual[view], f"{view}: ")
    assert not problems, "\n".join(problems)
