"""The `lockwatch` command. Subcommands import their heavy parts lazily, so
`lockwatch ls` in cron never pays for Textual."""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Iterable
from typing import IO, Any

import click

from lockwatch import __version__
from lockwatch.cli import ending

# Each subcommand's module, imported only when that command runs (or --help lists
# them all): `lockwatch ls` in cron pays for `ls` alone, not for every command's
# sources, actions and Textual. Order is --help's order, the action kinds'
# commands (model/kinds.py's table, built by cli/act.py) after `why`.
_COMMANDS: dict[str, tuple[str, str]] = {
    "ls": ("lockwatch.cli.ls", "ls"),
    "why": ("lockwatch.cli.why", "why"),
    "history": ("lockwatch.cli.history", "history"),
    "audit": ("lockwatch.cli.audit", "audit"),
    "watch": ("lockwatch.cli.watch", "watch"),
    "replay": ("lockwatch.cli.watch", "replay"),
    "demo": ("lockwatch.cli.demo", "demo"),
    "serve": ("lockwatch.cli.serve", "serve"),
}

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
_GROUP_OPTIONS = ("-h", "--help", "-V", "--version")
READONLY_FLAG = "--readonly"


class _DashboardByDefault(click.Group):
    """`lockwatch [PATH]... [OPTIONS]` is `lockwatch watch …`: anything that is not
    a subcommand's name (or the group's own --help/--version) goes to `watch`.
    Subcommands are loaded by name (`_COMMANDS`), when used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return _command_names()

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = _COMMANDS.get(cmd_name)
        if where is None:
            return _action_command(cmd_name)
        command = getattr(importlib.import_module(where[0]), where[1])
        assert isinstance(command, click.Command)
        return command

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from lockwatch.cli.where import sources_section

        sources_section(formatter, "Sources (their options: lockwatch watch --help)")
        super().format_epilog(ctx, formatter)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # `lockwatch --readonly SUBCOMMAND …`: no action anywhere in this run.
        if len(args) > 1 and args[0] == READONLY_FLAG and _is_command(args[1]):
            ctx.meta[READONLY_FLAG] = True
            args = args[1:]
        if not args or (not _is_command(args[0]) and args[0] not in _GROUP_OPTIONS):
            if args and not ctx.resilient_parsing:
                _refuse_a_mistyped_command(ctx, args[0], _command_names())
            args = ["watch", *args]
        return super().parse_args(ctx, _syslog_flag(args))

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            from lockwatch.config import ConfigError

            if isinstance(exc.__cause__, ConfigError):
                # A config that cannot be used is no misuse of the command: its one line.
                raise _OneLine(exc.message) from exc
            raise


def _syslog_flag(args: list[str]) -> list[str]:
    """`--audit-syslog` takes an optional mode; alone before a TARGET or PATH it is
    the flag it always was (`--audit-syslog=required`), not that word as its mode."""
    out: list[str] = []
    for index, arg in enumerate(args):
        if arg == "--":
            return out + args[index:]
        following = args[index + 1] if index + 1 < len(args) else None
        if arg == "--audit-syslog" and following not in ("required", "best-effort"):
            arg = "--audit-syslog=required"
        out.append(arg)
    return out


class _OneLine(click.ClickException):
    """An error shown as its one line, `lockwatch: …`, exit 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        from lockwatch.cli.table import printable

        click.echo(f"lockwatch: {printable(self.message)}", err=True)


def _command_names() -> list[str]:
    """Every subcommand's name, in --help's order."""
    from lockwatch.model.kinds import table

    names = list(_COMMANDS)
    return [*names[:2], *(kind.command for kind in table()), *names[2:]]


def _is_command(word: str) -> bool:
    # A static command's name is known without loading the kinds' table (`ls`).
    return word in _COMMANDS or word in _command_names()


def _action_command(name: str) -> click.Command | None:
    """An action kind's command (model/kinds.py), built with the sources'
    options registered now; None: no kind has that command."""
    from lockwatch.model.kinds import by_command

    kind = by_command(name)
    if kind is None:
        return None
    from lockwatch.cli.act import command

    return command(kind)


def _refuse_a_mistyped_command(ctx: click.Context, word: str, commands: Iterable[str]) -> None:
    """`lockwatch lss` is a typo for `ls`, not a dashboard on ./lss: a bare word
    that names no existing path but is close to a command's name."""
    if word.startswith("-") or "/" in word or os.path.lexists(word):
        return
    import difflib  # only for a word that may be a typo

    close = difflib.get_close_matches(word, sorted(commands), n=1, cutoff=0.6)
    if close:
        ctx.fail(f"No such command {word!r}. Did you mean {close[0]!r}?")


@click.group(cls=_DashboardByDefault, context_settings=CONTEXT, invoke_without_command=True)
@click.version_option(__version__, "-V", "--version", prog_name="lockwatch")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """See every lock's holder, age and staleness: files, kernel, servers.

    lockwatch reads the locks of every source below (lock files, the kernel's
    file locks, lock servers), and judges each lock active, stale, invalid,
    waiting, free or unknown by its writer's own rules, with machine-readable
    reasons.

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
    if ctx.invoked_subcommand != "ls":
        gc.enable()  # off since main(); a one-shot `ls` keeps it off (ls.py)
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


def main() -> None:
    """The console script: `cli`, allowed to leave fast (see `finish`)."""
    if sys.stdout is None:
        # Started with its output closed (`>&-`): Python has no stdout at all, and the
        # first thing printed would die in a traceback. Nothing could be read: exit 1.
        if sys.stderr is not None:
            print("lockwatch: standard output is closed: nothing could be written", file=sys.stderr)
        sys.exit(1)
    ending.FAST_EXIT = True
    # The start-up's imports (click, psycopg, every source's plugin) make tens of
    # thousands of objects that live as long as the process: the collector, set off
    # every few hundred of them, would walk them ~90 times for nothing. The group
    # turns it back on for every command but `ls` (see `cli`).
    gc.disable()
    cli(prog_name="lockwatch")
