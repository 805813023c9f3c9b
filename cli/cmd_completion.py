"""`tcx completion bash|zsh|fish`: print the shell completion script (click's own)."""

from __future__ import annotations

import click


@click.command(name="completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def command(shell: str) -> None:
    """Print the completion script for SHELL, e.g. `eval "$(tcx completion bash)"` in ~/.bashrc."""
    from click.shell_completion import get_completion_class

    from tcx.cli.main import cli

    completion = get_completion_class(shell)
    if completion is None:  # pragma: no cover - click ships all three
        raise click.UsageError(f"click has no completion for {shell}")
    click.echo(completion(cli, {}, "tcx", "_TCX_COMPLETE").source())
