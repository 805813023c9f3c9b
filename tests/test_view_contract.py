"""The view contract: one registry (core/views/registry.py) that the CLI, `tcx report`, the capture plan and
completion read, and one JSON envelope at the top of every view's document.

Torch-free: the views run in-process on a real recording and a real TORCH_TRACE log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import REPO

from tcx.cli.main import cli
from tcx.core.recorder.captures import CAPTURES as INSTALLERS
from tcx.core.run.targets import FileTarget, resolve_target
from tcx.core.views.envelope import ENVELOPE_KEYS
from tcx.core.views.registry import VIEWS, all_captures
from tcx.core.views.report import CAPTURES as REPORT_CAPTURES

DATA = Path(__file__).resolve().parent / "data"
RECORDING = DATA / "golden" / "two_functions_inductor.tcx.gz"
TRACE_LOG = DATA / "traces" / "torch2.13_eager_loop_break.log.gz"


def view_json(name: str, target: str) -> dict:
    args = [name, target, "--format", "json"]
    if name == "check":
        args += ["--max-graph-breaks", "100"]
    if name == "diff":
        args = ["diff", target, target, "--format", "json"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("name", [v.name for v in VIEWS])
@pytest.mark.parametrize(
    ("source", "kind", "device"), [(RECORDING, "recording", "cpu"), (TRACE_LOG, "trace_log", "cpu")]
)
def test_every_view_starts_with_the_envelope(name: str, source: Path, kind: str, device: str) -> None:
    doc = view_json(name, str(source))
    assert list(doc)[: len(ENVELOPE_KEYS)] == list(ENVELOPE_KEYS), list(doc)
    view = next(v for v in VIEWS if v.name == name)
    assert doc["schema"] == view.schema
    assert doc["source_kind"] == kind
    assert doc["device"] == device  # torch's describe_tensor says cpu; never the view's --target
    assert doc["target"] not in ("run", "cpu", "cuda") and doc["target"]
    assert set(doc["selection"]) == {"function", "compile_ids"} and doc["selection"]["function"] is None
    assert doc["selection"]["compile_ids"], "the whole run's compile ids"
    assert "source" not in doc and "function" not in doc  # the old per-view spellings


def test_a_function_of_a_recording_or_a_log_is_spelled_like_a_live_one() -> None:
    target = resolve_target(f"{RECORDING}:f")
    assert target == FileTarget(path=str(RECORDING), kind="recording", function="f")
    assert resolve_target(f"{TRACE_LOG}:inner").function == "inner"
    doc = view_json("graphs", f"{RECORDING}:g")
    assert doc["selection"] == {"function": "g", "compile_ids": ["1/0", "2/0"]}
    assert [c["compile_id"] for c in doc["compiles"]] == ["1/0", "2/0"]


def test_the_capture_plan_reads_the_registry() -> None:
    assert set(REPORT_CAPTURES) == set(all_captures())
    for view in VIEWS:
        assert set(view.captures) <= set(INSTALLERS), f"{view.name} asks for a capture nobody installs"


def test_every_view_is_a_command_with_each_option_once() -> None:
    commands = set(cli.commands)
    assert {v.name for v in VIEWS} <= commands
    for name, command in cli.commands.items():
        flags = [f for p in command.params if isinstance(p, click.Option) for f in p.opts]
        assert len(flags) == len(set(flags)), f"tcx {name} declares an option twice: {sorted(flags)}"
        result = CliRunner().invoke(cli, [name, "--help"], catch_exceptions=False)
        assert result.exit_code == 0, result.output


def test_check_has_one_option_per_budget() -> None:
    from tcx.core.budgets import BUDGETS

    options = {p.name for p in cli.commands["check"].params}
    assert set(BUDGETS) <= options


def test_shell_completion_lists_every_view() -> None:
    env = {**os.environ, "_TCX_COMPLETE": "bash_complete", "COMP_WORDS": "tcx ", "COMP_CWORD": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "tcx"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    offered = {line.split(",", 1)[1] for line in proc.stdout.splitlines() if "," in line}
    assert {v.name for v in VIEWS} <= offered, proc.stdout + proc.stderr


def test_the_registry_imports_neither_click_nor_rich_nor_torch() -> None:
    code = (
        "import sys, tcx.core.views.registry\n"
        "bad = [m for m in ('click', 'rich', 'torch') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
