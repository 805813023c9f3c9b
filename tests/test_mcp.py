"""`tcx mcp`, driven over stdio by the MCP SDK's own client, as an agent's client would drive it."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client  # the MCP SDK (dev extra; `pip install tcx[mcp]` for users)
from mcp.client.stdio import StdioServerParameters

from tests.conftest import PROGRAMS, REPO, run_tcx

RECORDING = REPO / "tests" / "data" / "golden" / "two_functions_inductor.tcx.gz"


def serve(root: Path, *extra: str) -> Callable[[Callable[[Client], Awaitable[Any]]], Any]:
    """Run `session(client)` against `tcx mcp --root ROOT` started as a subprocess over stdio."""

    def run(session: Callable[[Client], Awaitable[Any]]) -> Any:
        async def main() -> Any:
            params = StdioServerParameters(
                command=sys.executable,
                args=["-m", "tcx", "mcp", "--root", str(root), *extra],
                cwd=str(root),
                env={"NO_COLOR": "1", "PYTHONPATH": str(REPO)},
            )
            async with Client(params, read_timeout_seconds=300) as client:
                return await session(client)

        return anyio.run(main)

    return run


def text(result: Any) -> str:
    return "".join(c.text for c in result.content)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy(RECORDING, folder / "run.tcx.gz")
    shutil.copy(PROGRAMS / "print_break.py", folder / "print_break.py")
    return folder


def test_tools_are_the_registrys_views_and_explain_matches_the_cli(root):
    from tcx.core.views.registry import VIEWS

    async def session(client: Client) -> tuple[list[str], Any, Any]:
        tools = await client.list_tools()
        explain = await client.call_tool("explain", {"target": str(root / "run.tcx.gz")})
        only_g = await client.call_tool("explain", {"target": str(root / "run.tcx.gz"), "function": "g"})
        return [t.name for t in tools.tools], explain, only_g

    names, explain, only_g = serve(root)(session)
    assert set(names) >= {v.name for v in VIEWS if v.name not in ("check", "diff")}
    assert {"list_compiles", "show_source"} <= set(names) and "record" not in names  # no --allow-run
    assert not explain.is_error, text(explain)
    doc = json.loads(text(explain))
    cli = run_tcx("explain", str(root / "run.tcx.gz"), "--format", "json")
    assert cli.returncode == 0, cli.stderr
    assert doc["schema"] == "tcx.explain/1"
    assert doc["graph_break_count"] == json.loads(cli.stdout)["graph_break_count"] == 1
    assert doc == json.loads(cli.stdout)
    cli_g = run_tcx("explain", str(root / "run.tcx.gz") + ":g", "--format", "json")
    assert json.loads(text(only_g))["selection"] == json.loads(cli_g.stdout)["selection"]


def test_refusals_and_malformed_arguments_are_tool_errors_and_the_server_keeps_serving(root):
    async def session(client: Client) -> dict[str, Any]:
        calls = {
            "program": ("explain", {"target": str(root / "print_break.py")}),
            "outside": ("explain", {"target": str(RECORDING)}),
            "dotdot": ("guards", {"target": str(root / ".." / ".." / "run.tcx.gz")}),
            "wrong_type": ("explain", {"target": 3}),
            "unknown_arg": ("guards", {"target": str(root / "run.tcx.gz"), "bogus": True}),
            "missing_target": ("graphs", {}),
            "bad_choice": ("codegen", {"target": str(root / "run.tcx.gz"), "graph": "sideways"}),
            "no_such_compile": ("explain", {"target": str(root / "run.tcx.gz"), "compile": ["9/9"]}),
            "unknown_tool": ("nonsense", {"target": "x"}),
            "after": ("list_compiles", {"target": str(root / "run.tcx.gz")}),
        }
        return {key: await client.call_tool(name, args) for key, (name, args) in calls.items()}

    out = serve(root)(session)
    assert out["program"].is_error and "does not run programs" in text(out["program"])
    assert "--allow-run" in text(out["program"])
    for key in ("outside", "dotdot"):
        assert out[key].is_error and "outside the folders" in text(out[key]), text(out[key])
    for key in ("wrong_type", "unknown_arg", "missing_target", "bad_choice"):
        assert out[key].is_error and "invalid arguments" in text(out[key]), (key, text(out[key]))
    assert out["no_such_compile"].is_error and "matches no compile" in text(out["no_such_compile"])
    assert out["unknown_tool"].is_error
    assert not any("internal error" in text(r) for r in out.values())
    compiles = json.loads(text(out["after"]))  # still serving after every error above
    assert compiles["schema"] == "tcx.compiles/1"
    assert [c["compile_id"] for c in compiles["compiles"]] == compiles["selection"]["compile_ids"]
    assert {c["function"] for c in compiles["compiles"]} >= {"f", "g"}


def test_show_source_returns_the_recordings_snapshot(root):
    with gzip.open(RECORDING, "rt") as fh:
        snapshot = next(e for e in map(json.loads, fh) if e["kind"] == "source")

    async def session(client: Client) -> Any:
        return await client.call_tool(
            "show_source",
            {"target": str(root / "run.tcx.gz"), "file": "two_functions.py", "line": 16, "context": 1},
        )

    result = serve(root)(session)
    assert not result.is_error, text(result)
    doc = json.loads(text(result))
    lines = snapshot["text"].splitlines()
    assert doc["file"] == snapshot["file"]
    assert doc["lines"] == [{"line": n, "text": lines[n - 1]} for n in (15, 16, 17)]


@pytest.mark.torch
def test_allow_run_lets_a_tool_run_a_program_under_the_roots(root):
    script = root / "compiles_nothing.py"
    script.write_text("print('no torch.compile here')\n")

    async def session(client: Client) -> tuple[list[str], Any]:
        names = [t.name for t in (await client.list_tools()).tools]
        return names, await client.call_tool("explain", {"target": str(script)})

    names, result = serve(root, "--allow-run")(session)
    assert "record" in names
    assert not result.is_error, text(result)
    doc = json.loads(text(result))
    assert doc["source_kind"] == "live" and doc["program"]["status"] == "ok" and doc["compile_count"] == 0
    assert not (root / ".tcx").exists()  # the server keeps no last-run copy of its own
