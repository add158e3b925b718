"""`lockwatch ls`: the headless twin of the lock table."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import click
import orjson

from lockwatch.cli import ending
from lockwatch.cli.ending import finish
from lockwatch.cli.fanout import available_cpus
from lockwatch.cli.table import printable, render_table, summary
from lockwatch.cli.where import resolve_targets, target_options
from lockwatch.clock import SystemClock
from lockwatch.model.lock import Lock
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.verdict import State, Verdict

if TYPE_CHECKING:
    from lockwatch.config import Config
    from lockwatch.sources.postgres.source import PgSource

EXIT_PARTIAL = 1
EXIT_BAD_PATH = 2
EXIT_STALE = 3


@click.command(
    "ls",
    short_help="List locks with their state and reasons (scriptable).",
    epilog="""\b
Exit status:
  0  listed (whatever the states)
  1  some files or directories could not be read, a server could not be polled,
     or the reader of the output went away (a closed pipe)
  2  a PATH you named does not exist or cannot be read; a bad option or config
  3  with --fail-on-stale: at least one lock is stale (takes precedence)

\b
PostgreSQL servers come from --pg (repeatable), else LOCKWATCH_PG, else
lockwatch.toml, else libpq's PG* variables. With --pg and no PATH, no files
are scanned. Passwords are never shown.

\b
Examples:
  lockwatch ls                       # locks under the current directory
  lockwatch ls -l .loops memory      # with the reasons spelled out
  lockwatch ls --json /srv | jq '.locks[] | select(.state=="stale") | .path'
  lockwatch ls --fail-on-stale /srv/locks || page-oncall
  lockwatch ls --pg postgresql://monitor@db1/app --pg-idle-after 30
""",
)
@target_options
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
    paths: tuple[str, ...],
    as_json: bool,
    long_: bool,
    fail_on_stale: bool,
    pg_dsns: tuple[str, ...],
    pg_idle_after: float | None,
    pg_all: bool,
    config_path: str | None,
    jobs: int | None,
) -> None:
    """List locks under PATHs (default: the current directory) and on PostgreSQL
    servers, each with its verdict.

    Scans recursively for *.lock and *.pid files (following no symlink inside
    the trees; a PATH you name that is a symlinked directory is followed),
    detects each file's format from its content, and judges it active, stale or
    invalid by that format's rules. With --pg it also lists pg_locks rows of
    interest (advisory locks, waiters, blockers) as waiting, active or stale.
    Each lock gets reason codes such as holder_dead, pid_reused, too_old,
    heartbeat_expired, scope_conflict, schema_violation, waiting, blocking,
    idle_in_transaction or idle_holder.
    """
    roots, dsns, config = resolve_targets(paths, pg_dsns, pg_idle_after, config_path)
    clock = SystemClock()
    now = clock.now()
    host = os.uname().nodename  # what gethostname() returns, without importing socket

    if ending.FAST_EXIT:
        # A one-shot process builds many small objects and frees them only at exit:
        # the cyclic collector would walk them again and again for nothing.
        gc.disable()
    file_assessed: list[tuple[Lock, Verdict]] = []
    file_arrays: list[bytes] = []
    errors: list[ScanError] = []
    stale = 0
    if not roots:
        pass  # --pg without PATH: servers only
    elif as_json:
        from lockwatch.cli.listing import json_listing

        listing = json_listing(roots, now, host, jobs or available_cpus())
        file_arrays, errors, stale = listing.arrays, listing.errors, listing.stale
    else:
        from lockwatch.model.assess import assess
        from lockwatch.sources.files.scanner import scan
        from lockwatch.sources.processes import PsutilProcesses

        result = scan(roots)
        file_assessed = assess(result.locks, PsutilProcesses(), clock, host)
        errors = result.errors
        stale = sum(verdict.state is State.STALE for _, verdict in file_assessed)

    servers = _poll_servers(dsns, config, pg_idle_after, pg_all) if dsns else []
    pg_now = clock.now()  # sessions' ages count from their poll, not from our start
    statuses = _file_statuses(roots, errors, now) + [server.status for server in servers]

    if as_json:
        from lockwatch.model.blocking import BlockingTree, from_locks
        from lockwatch.model.report import ls_json_bytes

        pg_arrays: list[bytes] = []
        trees: list[tuple[str, BlockingTree]] = []
        for server in servers:
            if server.last is not None:
                from lockwatch.cli.pg import render

                rendered = render(server.last, pg_now, host, jobs or available_cpus())
                pg_arrays.append(rendered.array)
                trees.append((server.name, from_locks(rendered.waiting)))
                stale += rendered.stale
        pieces = ls_json_bytes(now, host, [*file_arrays, *pg_arrays], errors, statuses, trees)
        document = b"".join(pieces)
        if sys.stdout.isatty():
            document = orjson.dumps(orjson.loads(document), option=orjson.OPT_INDENT_2)
        sys.stdout.flush()
        sys.stdout.buffer.write(document + b"\n")
        sys.stdout.buffer.flush()
    else:
        pg_assessed = _assess_servers(servers, clock, host)
        stale += sum(verdict.state is State.STALE for _, verdict in pg_assessed)
        assessed = [*file_assessed, *pg_assessed]
        color = None if "NO_COLOR" not in os.environ else False
        for line in render_table(assessed, long=long_, cwd=os.getcwd()):
            click.echo(line, color=color)
        polled = [s.name for s in servers if s.status.state == "connected"]
        click.echo(summary(assessed, roots, polled), color=color)

    for error in errors:
        click.echo(f"lockwatch: {printable(error.path)}: {error.message}", err=True)
    failed = [server.status for server in servers if server.status.state != "connected"]
    for status in failed:
        click.echo(f"lockwatch: postgres {status.name}: {status.reason}", err=True)

    named = {os.path.abspath(p) for p in roots}
    if fail_on_stale and stale:
        finish(EXIT_STALE)
    if any(e.path in named for e in errors):
        finish(EXIT_BAD_PATH)
    finish(EXIT_PARTIAL if errors or failed else 0)


def _poll_servers(
    dsns: Sequence[str], config: Config, idle_after: float | None, all_rows: bool
) -> list[PgSource]:
    from lockwatch.cli.pg import make_sources, poll_once

    sources = make_sources(dsns, config, idle_after, all_rows)
    poll_once(sources)
    return sources


def _assess_servers(
    servers: Sequence[PgSource], clock: SystemClock, host: str
) -> list[tuple[Lock, Verdict]]:
    from lockwatch.model.assess import assess
    from lockwatch.model.process import StaticProcesses

    locks = [lock for server in servers if server.last for lock in server.last.locks]
    # A session's liveness is the server's word, not this host's process table.
    return assess(locks, StaticProcesses(), clock, host)


def _file_statuses(
    roots: Sequence[str], errors: Sequence[ScanError], now: datetime
) -> list[SourceStatus]:
    failed = {error.path: error for error in errors}
    statuses = []
    for root in roots:
        path = os.path.abspath(root)
        error = failed.get(path)
        statuses.append(
            SourceStatus(
                "file",
                path,
                "error" if error else "ok",
                reason=error.message if error else None,
                updated_at=None if error else now,
            )
        )
    return statuses
