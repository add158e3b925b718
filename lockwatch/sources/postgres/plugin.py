"""The postgres source: pg_locks with the sessions behind them, from the
servers --pg names (else LOCKWATCH_PG, the config, or libpq's PG* variables).

Config tables it owns:

    [postgres]
    dsn = ["postgresql://monitor@db1/app"]   # a string or a list
    idle_after = 60        # seconds idle (in a transaction) before holders are stale
    all = false            # true: every pg_locks row, not only the interesting ones
    password_file = "~/.config/lockwatch/pg.password"  # for DSNs without a password:
                           # its first line (mode 0600); libpq's PGPASSWORD and
                           # PGPASSFILE (~/.pgpass) work as ever

    [advisory.namespaces]  # pg_advisory_lock(int4, int4): name the first int
    1 = "agent"
    [advisory.keys]        # pg_advisory_lock(bigint): name single keys
    "8121971372" = "nightly-reindex"
    [advisory]
    strings = ["billing-sync"]  # bigint keys hashed from strings (BLAKE2b, 8 bytes)
    [advisory.pair_strings]     # pair keys (namespace, int32 hashed from a string:
    1 = ["agent-sync"]          #   BLAKE2b, 4 bytes, big-endian)

    [[locktables]]              # a table whose rows are locks (sources/locktables/config.py)
    table = "ops.deploy_lock"
    locked = "held"
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lockwatch.model.slots import lean_dataclass
from lockwatch.sources.contract import (
    Collected,
    Found,
    ListingRequest,
    LookupFailed,
    Selected,
    SourceError,
    Wanted,
)
from lockwatch.sources.postgres import ids
from lockwatch.sources.postgres.declared import PostgresDeclared
from lockwatch.sources.postgres.settings import (
    PgSettings,
    defaults,
)
from lockwatch.sources.servers import (
    DEFAULT_REFRESH,
    Listens,
    ServerPlugin,
    found_in,
    idle_after,
    refresh,
)

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.sources.feed import Feed


class PostgresSource(ServerPlugin, PostgresDeclared):
    listens = Listens(
        "a PostgreSQL server",
        5432,
        # Where a local server's socket is by default (Debian's and the upstream builds').
        ("/var/run/postgresql/.s.PGSQL.5432", "/tmp/.s.PGSQL.5432"),
        "--pg postgresql://USER@127.0.0.1:5432/postgres (or LOCKWATCH_PG) shows its locks",
    )
    actions_module = "tableactions"

    @property
    def record_types(self) -> tuple[type, ...]:
        # Its facts' types, for recordings: loaded when asked, not at the CLI's start
        # (`ls` of lock files never loads this source's facts, display and rules).
        from lockwatch.sources.locktables.facts import TableLock
        from lockwatch.sources.postgres.facts import AdvisoryKey, PgBackend, PgClient, PgLock

        return (AdvisoryKey, PgBackend, PgClient, PgLock, TableLock)

    def select(self, wanted: Wanted) -> Selected | None:
        settings: PgSettings = wanted.settings(self.name) or defaults()
        idle = idle_after(wanted, "pg_idle_after", settings.idle_after)
        dsns = _resolve(wanted, settings)
        if not dsns:
            return None
        return SelectedServers(
            tuple(dsns),
            PgSettings(
                tuple(dsns),
                idle,
                bool(wanted.values.get("pg_all")) or settings.all_rows,
                settings.advisory,
                locktables=settings.locktables,
            ),
            refresh(wanted),
        )

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        settings: PgSettings = wanted.settings(self.name) or defaults()
        dsns = _resolve(wanted, settings)
        return find_pg(target, dsns, settings, host)


def _resolve(wanted: Wanted, settings: PgSettings) -> list[str]:
    from lockwatch.sources.postgres.dsn import malformed, problem, resolve_dsns, scrub
    from lockwatch.sources.secrets import PasswordFileError

    try:
        dsns = resolve_dsns(
            wanted.values.get("pg_dsns") or (),
            settings.dsns,
            wanted.environ,
            password_file=settings.password_file,
        )
    except PasswordFileError as exc:
        raise SourceError(str(exc)) from exc
    for dsn in dsns:
        # A DSN nobody can read is the operator's mistake (exit 2), not a server away.
        why = problem(dsn) or malformed(dsn)
        if why is not None:
            raise SourceError(f"--pg {scrub(dsn, dsn)!r}: {why}")
    return dsns


@lean_dataclass(frozen=True)
class SelectedServers:
    dsns: tuple[str, ...]
    settings: PgSettings
    refresh: float = DEFAULT_REFRESH

    def collect(self, request: ListingRequest) -> Collected:
        from lockwatch.model.blocking import from_locks
        from lockwatch.sources.postgres.listing import make_sources, poll_once, render

        servers = make_sources(self.dsns, self.settings)
        poll_once(servers)
        out = Collected()
        for server in servers:
            out.statuses.append(server.status)
            if server.status.state != "connected":
                out.warnings.append(f"postgres {server.status.name}: {server.status.reason}")
                continue
            out.places.append(f"of interest on {server.name}")
            last = server.last
            if last is None:
                continue
            # Sessions' ages count from their poll, not from the run's start.
            now = last.polled_at
            if request.as_json:
                rendered = render(last, now, request.host, request.jobs)
                out.arrays.append(rendered.array)
                out.blocking.append((server.name, from_locks(rendered.waiting)))
                out.stale += rendered.stale
                if last.tables:
                    from lockwatch.sources.postgres.locktables import render_tables

                    array, stale = render_tables(last.tables, now, request.host)
                    out.arrays.append(array)
                    out.stale += stale
            else:
                # The table's judging is loaded for a table only (`--json` never shows one).
                from lockwatch.clock import FrozenClock
                from lockwatch.model.assess import assess
                from lockwatch.model.process import StaticProcesses
                from lockwatch.model.verdict import State

                # A session's liveness is the server's word, not this host's processes.
                assessed = assess(last.locks, StaticProcesses(), FrozenClock(now), request.host)
                out.assessed.extend(assessed)
                out.stale += sum(verdict.state is State.STALE for _, verdict in assessed)
        return out

    def feeds(self, clock: Clock, host: str) -> Sequence[Feed]:
        from lockwatch.sources.postgres.feed import PgFeed
        from lockwatch.sources.postgres.listing import make_sources

        feeds: list[Feed] = []
        for source in make_sources(self.dsns, self.settings):
            source.clock = clock
            feeds.append(PgFeed(source, host=host, interval=self.refresh))
        return feeds


def find_pg(target: str, dsns: Sequence[str], settings: PgSettings, host: str) -> Found | str:
    """The Postgres lock `target` names, polled and judged now; or why there is none."""
    from lockwatch.sources.postgres.dsn import display_name
    from lockwatch.sources.postgres.listing import make_sources, poll_once

    parsed = ids.parse_pg(target)
    if parsed is None:
        raise SourceError(
            f"{target!r} is not a Postgres lock id as `lockwatch ls --json` prints one"
        )
    server = parsed.server
    chosen = [dsn for dsn in dsns if display_name(dsn) == server]
    if not chosen:
        from lockwatch.sources.postgres.dsn import dsn_from_name

        derived = dsn_from_name(server)
        if derived is None:
            raise SourceError(f"no server {server} among --pg/LOCKWATCH_PG/config")
        chosen = [derived]
    every_row = PgSettings(
        tuple(chosen[:1]),
        settings.idle_after,
        True,
        settings.advisory,
        locktables=settings.locktables,
    )
    sources = make_sources(chosen[:1], every_row)
    for source in sources:
        source.name = server  # ids name the server as the operator's listing did
    poll_once(sources)
    source = sources[0]
    if source.last is None:
        reason = source.status.reason or "no answer"
        raise LookupFailed(f"cannot read pg_locks on {server}: {reason}")
    locks = source.last.locks
    return found_in(locks, target, host) or (
        f"no lock {target} on {server} now: released, or its holder changed since it was"
        " listed (lock ids name the holder's pid)"
    )


SOURCE = PostgresSource()
