"""The `lockwatch` command. Subcommands import their heavy parts lazily, so
`lockwatch ls` in cron never pays for Textual."""

from __future__ import annotations

import click

from lockwatch import __version__
from lockwatch.cli import ending
from lockwatch.cli.ls import ls

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT, invoke_without_command=True)
@click.version_option(__version__, "-V", "--version", prog_name="lockwatch")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """See every lock's holder, age and staleness: lock files and PostgreSQL.

    lockwatch reads lock files (clawdbot, gitclaw, tower-fleet/v1, little-loops,
    pid files and bare lock files) and PostgreSQL's pg_locks, and judges each
    lock active, stale, invalid or waiting by its own rules, with
    machine-readable reasons.

    \b
    Examples:
      lockwatch ls                      locks under the current directory
      lockwatch ls /srv/app --json      the JSON contract, for scripts
      lockwatch ls /srv --fail-on-stale exit 3 if any lock is stale (cron)
      lockwatch ls --pg postgresql://monitor@db/app   advisory locks and waiters
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


cli.add_command(ls)


def main() -> None:
    """The console script: `cli`, allowed to leave fast (see `finish`)."""
    ending.FAST_EXIT = True
    cli(prog_name="lockwatch")
