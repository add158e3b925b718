"""`lockwatch ls`: the headless twin of the lock table."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
from typing import Any

import click
import orjson

from lockwatch.cli import ending
from lockwatch.cli.ending import finish
from lockwatch.cli.where import SourcesListed, resolve_targets, target_options
from lockwatch.clock import SystemClock
from lockwatch.cpus import available_cpus
from lockwatch.model.text import terminal_safe as printable
from lockwatch.sources.contract import Collected, ListingRequest

EXIT_PARTIAL = 1
EXIT_BAD_PATH = 2
EXIT_STALE = 3


@click.command(
    "ls",
    cls=SourcesListed,
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
lockwatch.toml, else libpq's PG* variables. Redis servers come from --redis
and --redlock (a Redlock group), else [redis] in lockwatch.toml; etcd servers
from --etcd, else [etcd]. With --pg, --kernel, --redis or --etcd and no
PATH, no files are scanned. Passwords are never shown.

\b
States: active, stale, invalid, waiting, free (a lock file nobody holds:
no kernel lock on it and nobody has it open), unknown (nobody can tell: a
pid from another pid namespace; a lock file you may not read, no kernel
lock held on it: permission_denied). Lock files always get the
kernel's word where /proc/locks is readable (reason kernel_lock: held with
flock/fcntl by that process; not_held); --kernel also lists every kernel
lock as its own record.

\b
Examples:
  lockwatch ls                       # locks under the current directory
  lockwatch ls -l .loops memory      # with the reasons spelled out
  lockwatch ls --json /srv | jq '.locks[] | select(.state=="stale") | .path'
  lockwatch ls --fail-on-stale /srv/locks || page-oncall
  lockwatch ls --pg postgresql://monitor@db1/app --pg-idle-after 30
  lockwatch ls --kernel /srv        # with every flock/fcntl lock, holders and waiters
  lockwatch ls --redis redis://cache1:6379/0 --etcd http://etcd1:2379   # store locks
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
@click.option(
    "--at",
    metavar="T",
    default=None,
    help="The locks as they were at T, from the recorded history (RFC 3339, HH:MM[:SS]"
    " today, or -15m/-2h/-1d); with --json, the document has `as_of`.",
)
@click.option(
    "--history",
    "history_path",
    metavar="PATH|DSN",
    default=None,
    help="The history --at reads [default: the user state directory's history.sqlite3;"
    " config: history.path].",
)
def ls(**values: Any) -> None:
    """List locks under PATHs (default: the current directory) and in every
    source below that its options or the config name, each with its verdict.

    Scans recursively for *.lock and *.pid files, lock directories and the
    lock files tools name their own way (git, flufl.lock, filelock, Emacs
    .#x, LibreOffice .~lock.x#, Terraform .lock.info, little-loops queues),
    following no symlink inside the trees (a PATH you name that is a
    symlinked directory is followed), detects each file's format, and judges
    it active, stale, invalid, free or unknown as the tool that wrote it
    would, with the kernel's locks on it. With
    --pg it also lists pg_locks rows of interest (advisory locks, waiters,
    blockers) as waiting, active, stale or unknown, with bounds for how long
    each was held (PostgreSQL keeps no grant time); with --kernel, every flock,
    POSIX and OFD lock. Each lock gets reason codes such as holder_dead,
    pid_reused, too_old, heartbeat_expired, kernel_lock, not_held, open_by,
    scope_conflict, schema_violation, waiting, blocking, idle_in_transaction,
    idle_holder, client_alive, client_dead, inferred, prepared_too_long or
    insufficient_privilege.
    """
    as_json: bool = values["as_json"]
    if values["at"] is not None:
        # The history's readers load only for --at: `ls` itself stays light.
        from lockwatch.cli.history_at import ls_at

        ls_at(values["at"], values["history_path"], as_json=as_json, long=values["long_"])
    if ending.FAST_EXIT:
        from lockwatch import collector

        collector.keep_to_exit()  # what a listing is done with is left to os._exit
    targets = resolve_targets(values, values.get("config_path"))
    clock = SystemClock()
    host = os.uname().nodename  # what gethostname() returns, without importing socket
    request = ListingRequest(clock.now(), host, as_json, values.get("jobs") or available_cpus())

    parts: list[Collected] = [selected.collect(request) for _, selected in targets.sources]
    stale = sum(part.stale for part in parts)
    errors = sorted((e for part in parts for e in part.errors), key=lambda e: e.path)

    assessed: list[Any] = []
    if as_json:
        _print_json(parts, request, host, errors)
    else:
        assessed = _print_table(parts, values, request, errors)

    for error in errors:
        click.echo(f"lockwatch: {printable(error.path)}: {printable(error.message)}", err=True)
    warnings = [warning for part in parts for warning in part.warnings]
    if as_json or assessed:
        _say_warnings(parts)

    if values["fail_on_stale"] and stale:
        finish(EXIT_STALE)
    if any(part.usage_errors for part in parts):
        finish(EXIT_BAD_PATH)
    finish(EXIT_PARTIAL if errors or warnings else 0)


def _print_json(
    parts: list[Collected], request: ListingRequest, host: str, errors: list[Any]
) -> None:
    """The listing as one JSON document on stdout (indented on a terminal)."""
    from lockwatch.model.report import lock_record, ls_json_bytes, records_json_array

    arrays = []
    for part in parts:
        arrays.extend(part.arrays)
        if part.assessed:
            records = [lock_record(lock, verdict, request.now) for lock, verdict in part.assessed]
            arrays.append(records_json_array(records))
    statuses = [status for part in parts for status in part.statuses]
    trees = [tree for part in parts for tree in part.blocking]
    pieces = [*ls_json_bytes(request.now, host, arrays, errors, statuses, trees), b"\n"]
    if sys.stdout.isatty():
        from lockwatch.model.report import unprintable_escaped

        document = orjson.loads(b"".join(pieces))
        indented = orjson.dumps(document, option=orjson.OPT_INDENT_2)
        pieces = [unprintable_escaped(indented), b"\n"]  # re-dumping undid the escapes
    # Piece by piece: the whole document (megabytes at 10,000 locks) is never copied.
    _write_all(*pieces)


def _print_table(
    parts: list[Collected], values: dict[str, Any], request: ListingRequest, errors: list[Any]
) -> list[Any]:
    """The listing as a table on stdout, and its closing line; the locks shown."""
    # The table's code is imported for a table only: `--json` in cron never renders one.
    from lockwatch.cli.table import render_table, summary

    assessed = [pair for part in parts for pair in part.assessed]
    color = None if "NO_COLOR" not in os.environ else False
    table = render_table(assessed, long=values["long_"], cwd=os.getcwd(), now=request.now)
    for line in table:
        click.echo(line, color=color)
    places = [place for part in parts for place in part.places]
    # What could not be read (a server down) is said before the closing line.
    said = _say_warnings(parts) if not assessed else []
    # A PATH that does not exist is said once, as the error below: not
    # also as "No locks under" it.
    if assessed or not any(part.usage_errors for part in parts):
        closing = summary(assessed, places, failed=bool(said), unread=len(errors))
        if closing is not None:
            click.echo(closing, color=color)
    return assessed


def _say_warnings(parts: list[Collected]) -> list[str]:
    warnings = [warning for part in parts for warning in part.warnings]
    for warning in warnings:
        click.echo(f"lockwatch: {printable(warning)}", err=True)
    return warnings


def _write_all(*pieces: bytes | memoryview) -> None:
    """Write `pieces` to stdout whole, in order. A buffered write that the reader cuts short
    (`| head`) returns how much went through instead of raising, which would
    make a closed pipe look like success: the rest is written until EPIPE
    raises BrokenPipeError, which click turns into exit 1."""
    sys.stdout.flush()
    out = sys.stdout.buffer
    with contextlib.suppress(OSError):  # io.UnsupportedOperation: a stream with no fd
        _widen_pipe(out.fileno(), sum(len(data) for data in pieces))
    for data in pieces:
        view = memoryview(data)
        while view:
            written = out.write(view)
            if not written:  # a stream that takes nothing will never take the rest
                raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))
            view = view[written:]
    out.flush()


PIPE_MAX = 1 << 20  # Linux's pipe-max-size unless raised: what anyone may ask for


def _widen_pipe(fd: int, size: int) -> None:
    """Megabytes of JSON through a pipe's 64 KiB are a hundred wake-ups of its
    reader and of this process in turn (~5 ms of 7 MB on a 2-core host): when `fd`
    is a pipe, ask for a buffer as large as `size` (at most PIPE_MAX). A pipe
    its reader made smaller than the kernel's 16 pages is the reader's choice,
    kept; so is a file, a terminal, or a refusal (a user's pipe pages used up)."""
    if size <= 1 << 16:
        return
    with contextlib.suppress(OSError):
        have, want = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ), min(size, PIPE_MAX)
        if 16 * os.sysconf("SC_PAGE_SIZE") <= have < want:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, want)
