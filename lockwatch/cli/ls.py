"""`lockwatch ls`: the headless twin of the lock table."""

from __future__ import annotations

import os
import sys

import click
import orjson

from lockwatch.cli.table import render_table, summary
from lockwatch.clock import SystemClock
from lockwatch.model.assess import assess
from lockwatch.model.report import ls_json, ls_json_bytes
from lockwatch.model.verdict import State

EXIT_PARTIAL = 1
EXIT_BAD_PATH = 2
EXIT_STALE = 3


@click.command(
    "ls",
    short_help="List locks with their state and reasons (scriptable).",
    epilog="""\b
Exit status:
  0  listed (whatever the states)
  1  some files or directories could not be read (see errors)
  2  a PATH you named does not exist or cannot be read
  3  with --fail-on-stale: at least one lock is stale (takes precedence)

\b
Examples:
  lockwatch ls                       # locks under the current directory
  lockwatch ls -l .loops memory      # with the reasons spelled out
  lockwatch ls --json /srv | jq '.locks[] | select(.state=="stale") | .path'
  lockwatch ls --fail-on-stale /srv/locks || page-oncall
""",
)
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object (schema lockwatch.ls/1)."
)
@click.option("-l", "--long", "long_", is_flag=True, help="Spell out every reason under its lock.")
@click.option("--fail-on-stale", is_flag=True, help="Exit 3 when any lock is stale.")
def ls(paths: tuple[str, ...], as_json: bool, long_: bool, fail_on_stale: bool) -> None:
    """List lock files under PATHs (default: the current directory) with verdicts.

    Scans recursively for *.lock and *.pid files (never following symlinks),
    detects each file's format from its content, and judges it active, stale or
    invalid by that format's rules. Each lock gets reason codes such as
    holder_dead, pid_reused, too_old, heartbeat_expired, scope_conflict,
    schema_violation or unparseable.
    """
    from lockwatch.sources.files.scanner import scan
    from lockwatch.sources.processes import PsutilProcesses

    roots = paths or (".",)
    clock = SystemClock()
    host = os.uname().nodename  # what gethostname() returns, without importing socket
    result = scan(roots)
    assessed = assess(result.locks, PsutilProcesses(), clock, host)

    if as_json:
        if sys.stdout.isatty():
            document = ls_json(clock.now(), host, assessed, result.errors)
            click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
        else:
            sys.stdout.flush()
            out = sys.stdout.buffer
            for piece in ls_json_bytes(clock.now(), host, assessed, result.errors):
                out.write(piece)
            out.write(b"\n")
            out.flush()
    else:
        color = None if "NO_COLOR" not in os.environ else False
        for line in render_table(assessed, long=long_, cwd=os.getcwd()):
            click.echo(line, color=color)
        click.echo(summary(assessed, roots), color=color)
    for error in result.errors:
        click.echo(f"lockwatch: {error.path}: {error.message}", err=True)

    named = {os.path.abspath(p) for p in roots}
    if fail_on_stale and any(v.state is State.STALE for _, v in assessed):
        sys.exit(EXIT_STALE)
    if any(e.path in named for e in result.errors):
        sys.exit(EXIT_BAD_PATH)
    if result.errors:
        sys.exit(EXIT_PARTIAL)
