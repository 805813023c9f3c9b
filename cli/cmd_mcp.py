"""`tcx mcp`: a Model Context Protocol server over stdio, for agents (tools: cli/mcp_tools.py).

Built on the official `mcp` Python SDK (`pip install tcx[mcp]`), imported only here. A client
starts it as a command, e.g. `{"command": "tcx", "args": ["mcp", "--root", "/path/to/project"]}`.
"""

from __future__ import annotations

import os
from typing import Any

import click

REFUSED_RUN = "tools run programs only with --allow-run"


@click.command(name="mcp")
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    metavar="DIR",
    help="A folder whose recordings and logs the tools may read (repeatable; default: the current "
    "directory).",
)
@click.option(
    "--allow-run",
    is_flag=True,
    help="Let tools run programs under the roots (a `record` tool, and programs as targets). Off by "
    "default: an agent should not execute code by reading a log.",
)
def command(roots: tuple[str, ...], allow_run: bool) -> None:
    """Serve tcx's views to an MCP client over stdio: one tool per view, plus list_compiles,
    show_source and (with --allow-run) record. Each returns the view's JSON document."""
    from tcx.cli.mcp_tools import Policy
    from tcx.core.errors import UsageError

    try:
        import anyio
        import mcp  # noqa: F401 - the SDK, used by serve()
    except ImportError as exc:
        raise UsageError(
            f"tcx mcp needs the MCP Python SDK, which is not installed ({exc.name}).",
            hint="Install it with: pip install tcx[mcp]",
        ) from None
    policy = Policy(roots=tuple(os.path.realpath(r) for r in roots or (os.getcwd(),)), allow_run=allow_run)
    anyio.run(serve, policy)


async def serve(policy: Any) -> None:
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    from tcx import __version__
    from tcx.cli.mcp_tools import ToolError, call, tools
    from tcx.renderers.safe import json_text

    table = {t.name: t for t in tools(policy)}

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=t.name, description=t.description, input_schema=t.schema)
                for t in table.values()
            ]
        )

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        def error(text: str) -> types.CallToolResult:
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)

        tool = table.get(params.name)
        if tool is None:
            return error(f"no tool named {params.name!r}; tools: {', '.join(table)}.")
        try:
            doc = call(tool, params.arguments, policy)
        except ToolError as exc:
            return error(str(exc))
        except Exception as exc:
            return error(
                f"internal error in tcx ({type(exc).__name__}: {exc}). This is a bug in tcx; "
                "please report it."
            )
        return types.CallToolResult(content=[types.TextContent(text=json_text(doc))])

    server: Any = Server(
        "tcx",
        version=__version__,
        instructions="tcx explains torch.compile runs: graph breaks, recompiles, guards, graphs and kernels. "
        "Give each tool a recording (.tcx) or a TORCH_TRACE log; list_compiles first on a big run. "
        + ("" if policy.allow_run else f"Programs are not run: {REFUSED_RUN}."),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
