"""The `lockwatch` command. Subcommands import their heavy parts lazily, so
`lockwatch ls` in cron never pays for Textual."""

from __future__ import annotations

import click

from lockwatch import __version__
from lockwatch.cli.ls import ls

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT, invoke_without_command=True)
@click.version_option(__version__, "-V", "--version", prog_name="lockwatch")
@click.pass_context
def main(ctx: click.Context) -> None:
    """See every lock's holder, age and staleness; clear stale locks safely.

    lockwatch reads lock files (clawdbot, gitclaw, tower-fleet/v1, little-loops,
    pid files and bare lock files) and judges each one active, stale or invalid
    by its own format's rules, with machine-readable reasons.

    \b
    Examples:
      lockwatch ls                      locks under the current directory
      lockwatch ls /srv/app --json      the JSON contract, for scripts
      lockwatch ls /srv --fail-on-stale exit 3 if any lock is stale (cron)
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


main.add_command(ls)
