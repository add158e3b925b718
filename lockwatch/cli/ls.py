"""`lockwatch ls`: the headless twin of the lock table."""

from __future__ import annotations

import os
import sys

import click
import orjson

from lockwatch.cli.fanout import available_cpus
from lockwatch.cli.table import render_table, summary
from lockwatch.clock import SystemClock
from lockwatch.model.assess import assess
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
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Processes for large --json scans (default: one per CPU).",
)
def ls(
    paths: tuple[str, ...], as_json: bool, long_: bool, fail_on_stale: bool, jobs: int | None
) -> None:
    """List lock files under PATHs (default: the current directory) with verdicts.

    Scans recursively for *.lock and *.pid files (never following symlinks),
    detects each file's format from its content, and judges it active, stale or
    invalid by that format's rules. Each lock gets reason codes such as
    holder_dead, pid_reused, too_old, heartbeat_expired, scope_conflict,
    schema_violation or unparseable.
    """
    roots = paths or (".",)
    clock = SystemClock()
    host = os.uname().nodename  # what gethostname() returns, without importing socket

    if as_json:
        from lockwatch.cli.listing import json_listing

        listing = json_listing(roots, clock.now(), host, jobs or available_cpus())
        errors, stale = listing.errors, listing.stale
        document = b"".join(listing.pieces)
        if sys.stdout.isatty():
            document = orjson.dumps(orjson.loads(document), option=orjson.OPT_INDENT_2)
        sys.stdout.flush()
        sys.stdout.buffer.write(document + b"\n")
        sys.stdout.buffer.flush()
    else:
        from lockwatch.sources.files.scanner import scan
        from lockwatch.sources.processes import PsutilProcesses

        result = scan(roots)
        assessed = assess(result.locks, PsutilProcesses(), clock, host)
        errors = result.errors
        stale = sum(verdict.state is State.STALE for _, verdict in assessed)
        color = None if "NO_COLOR" not in os.environ else False
        for line in render_table(assessed, long=long_, cwd=os.getcwd()):
            click.echo(line, color=color)
        click.echo(summary(assessed, roots), color=color)
    for error in errors:
        click.echo(f"lockwatch: {error.path}: {error.message}", err=True)

    named = {os.path.abspath(p) for p in roots}
    if fail_on_stale and stale:
        sys.exit(EXIT_STALE)
    if any(e.path in named for e in errors):
        sys.exit(EXIT_BAD_PATH)
    if errors:
        sys.exit(EXIT_PARTIAL)
