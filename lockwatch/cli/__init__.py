"""The `lockwatch` command. Subcommands import their heavy parts lazily, so
`lockwatch ls` in cron never pays for Textual."""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Iterable

import click

from lockwatch import __version__
from lockwatch.cli import ending
from lockwatch.cli.act import break_, cancel, release, steal
from lockwatch.cli.audit import audit
from lockwatch.cli.demo import demo
from lockwatch.cli.ls import ls
from lockwatch.cli.serve import serve
from lockwatch.cli.watch import replay, watch
from lockwatch.cli.why import why

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
_GROUP_OPTIONS = ("-h", "--help", "-V", "--version")
READONLY_FLAG = "--readonly"


class _DashboardByDefault(click.Group):
    """`lockwatch [PATH]... [OPTIONS]` is `lockwatch watch …`: anything that is not
    a subcommand's name (or the group's own --help/--version) goes to `watch`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # `lockwatch --readonly SUBCOMMAND …`: no action anywhere in this run.
        if len(args) > 1 and args[0] == READONLY_FLAG and args[1] in self.commands:
            ctx.meta[READONLY_FLAG] = True
            args = args[1:]
        if not args or (args[0] not in self.commands and args[0] not in _GROUP_OPTIONS):
            if args and not ctx.resilient_parsing:
                _refuse_a_mistyped_command(ctx, args[0], self.commands)
            args = ["watch", *args]
        return super().parse_args(ctx, args)


def _refuse_a_mistyped_command(ctx: click.Context, word: str, commands: Iterable[str]) -> None:
    """`lockwatch lss` is a typo for `ls`, not a dashboard on ./lss: a bare word
    that names no existing path but is close to a command's name."""
    if word.startswith("-") or "/" in word or os.path.lexists(word):
        return
    close = difflib.get_close_matches(word, sorted(commands), n=1, cutoff=0.6)
    if close:
        ctx.fail(f"No such command {word!r}. Did you mean {close[0]!r}?")


@click.group(cls=_DashboardByDefault, context_settings=CONTEXT, invoke_without_command=True)
@click.version_option(__version__, "-V", "--version", prog_name="lockwatch")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """See every lock's holder, age and staleness: files, kernel, servers.

    lockwatch reads lock files (the tools' own: git, filelock, flufl.lock,
    Terraform, little-loops, clawdbot, ...; pid files and bare lock files), the
    kernel's file locks and PostgreSQL's pg_locks, and judges each lock active,
    stale, invalid, waiting, free or unknown by its writer's own rules, with
    machine-readable reasons.

    With no command, or with PATHs, it opens the live dashboard: its options
    (--pg, --kernel, --filter, --theme, ...) are in `lockwatch watch --help`.

    \b
    Global options (before the command):
      --readonly      no action (break, steal, ...) anywhere in this run
      -V, --version   the version
      -h, --help      this help; `lockwatch COMMAND --help` for a command's

    \b
    Examples:
      lockwatch                         the live dashboard on the current directory
      lockwatch /srv/locks --pg postgresql://monitor@db/app
      lockwatch ls                      locks under the current directory
      lockwatch ls /srv/app --json      the JSON contract, for scripts
      lockwatch ls /srv --fail-on-stale exit 3 if any lock is stale (cron)
      lockwatch ls --pg postgresql://monitor@db/app   advisory locks and waiters
      lockwatch why "fatal: Unable to create '/srv/app/.git/index.lock': File exists."
      lockwatch break /srv/locks/app.lock --reason "holder died, INC-1"
      lockwatch audit verify            check the audit log's hash chain
      lockwatch demo                    a live playground: every lock state in ~10 s
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


cli.add_command(ls)
cli.add_command(why)
cli.add_command(break_)
cli.add_command(steal)
cli.add_command(release)
cli.add_command(cancel)
cli.add_command(audit)
cli.add_command(watch)
cli.add_command(replay)
cli.add_command(demo)
cli.add_command(serve)


def main() -> None:
    """The console script: `cli`, allowed to leave fast (see `finish`)."""
    if sys.stdout is None:
        # Started with its output closed (`>&-`): Python has no stdout at all, and the
        # first thing printed would die in a traceback. Nothing could be read: exit 1.
        if sys.stderr is not None:
            print("lockwatch: standard output is closed: nothing could be written", file=sys.stderr)
        sys.exit(1)
    ending.FAST_EXIT = True
    cli(prog_name="lockwatch")
