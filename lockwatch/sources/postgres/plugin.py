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
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from lockwatch.model import ids
from lockwatch.sources.contract import (
    Collected,
    Decorator,
    Found,
    ListingRequest,
    LookupFailed,
    Selected,
    SourceError,
    Wanted,
)
from lockwatch.sources.postgres.facts import (
    DEFAULT_IDLE_AFTER,
    AdvisoryKey,
    AdvisoryNames,
    PgBackend,
    PgClient,
    PgLock,
)

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.sources.feed import Feed

DEFAULT_REFRESH = 2.0


@dataclass(frozen=True)
class PgSettings:
    dsns: tuple[str, ...] = ()
    idle_after: float = DEFAULT_IDLE_AFTER
    all_rows: bool = False
    advisory: AdvisoryNames = field(default_factory=lambda: AdvisoryNames.build())
    password_file: str | None = None


DEFAULTS = PgSettings()


def _error(message: str) -> Exception:
    from lockwatch.config import ConfigError

    return ConfigError(message)


def _table(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise _error(f"{where}: [{key}] must be a table")
    return value


def _int_key(text: str, where: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _error(f"{where}: {text!r} is not an integer key") from None


def _int32_key(text: str, where: str) -> int:
    """A pair's first key: an int4."""
    key = _int_key(text, where)
    if not -(2**31) <= key < 2**31:
        raise _error(f"{where}: {text!r} is not a 32-bit key (the pair form's keys are int4)")
    return key


def read_settings(data: Mapping[str, Any], where: str) -> PgSettings:
    postgres = _table(data, "postgres", where)
    dsn = postgres.get("dsn", [])
    dsns = [dsn] if isinstance(dsn, str) else dsn
    if not isinstance(dsns, list) or not all(isinstance(d, str) for d in dsns):
        raise _error(f"{where}: postgres.dsn must be a string or a list of strings")
    idle_after = postgres.get("idle_after", DEFAULT_IDLE_AFTER)
    if (
        isinstance(idle_after, bool)
        or not isinstance(idle_after, int | float)
        or not math.isfinite(idle_after)
        or idle_after < 0
    ):
        raise _error(f"{where}: postgres.idle_after must be a number of seconds >= 0")
    pg_all = postgres.get("all", False)
    if not isinstance(pg_all, bool):
        raise _error(f"{where}: postgres.all must be true or false")
    password_file = postgres.get("password_file")
    if password_file is not None and (not isinstance(password_file, str) or not password_file):
        raise _error(f"{where}: postgres.password_file must be a path")

    advisory = _table(data, "advisory", where)
    namespaces = _table(advisory, "namespaces", f"{where}: advisory")
    keys = _table(advisory, "keys", f"{where}: advisory")
    strings = advisory.get("strings", [])
    if not isinstance(strings, list) or not all(isinstance(s, str) for s in strings):
        raise _error(f"{where}: advisory.strings must be a list of strings")
    pair_strings = _table(advisory, "pair_strings", f"{where}: advisory")
    for texts in pair_strings.values():
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise _error(f"{where}: advisory.pair_strings maps a first key to a list of strings")
    for table in (namespaces, keys):
        if not all(isinstance(v, str) for v in table.values()):
            raise _error(f"{where}: advisory names must be strings")
    names = AdvisoryNames.build(
        namespaces={_int32_key(k, where): v for k, v in namespaces.items()},
        keys={_int_key(k, where): v for k, v in keys.items()},
        strings=strings,
        pair_strings={_int32_key(k, where): v for k, v in pair_strings.items()},
    )
    return PgSettings(
        tuple(dsns),
        float(idle_after),
        pg_all,
        names,
        os.path.expanduser(password_file) if password_file else None,
    )


class PostgresSource:
    name = "postgres"
    label = "pg"
    id_prefix = ids.PG
    summary = "PostgreSQL's pg_locks: advisory locks, waiters, blockers, blocking trees"
    config_tables: tuple[str, ...] = ("postgres", "advisory")
    actions = frozenset({"break", "steal", "release", "cancel"})
    record_types: tuple[type, ...] = (AdvisoryKey, PgBackend, PgClient, PgLock)

    def options(self) -> Sequence[Decorator]:
        return [
            click.option(
                "--pg",
                "pg_dsns",
                multiple=True,
                metavar="DSN",
                help="A PostgreSQL server to read pg_locks from (repeatable).",
            ),
            click.option(
                "--pg-idle-after",
                type=click.FloatRange(min=0),
                default=None,
                metavar="SECONDS",
                help="Idle (in transaction) holders older than this are stale"
                f" [default: {DEFAULT_IDLE_AFTER:g}].",
            ),
            click.option(
                "--pg-all",
                is_flag=True,
                help="Every pg_locks row, not only contended and advisory ones.",
            ),
        ]

    def asked(self, values: Mapping[str, Any]) -> bool:
        return bool(values.get("pg_dsns"))

    def read_config(self, tables: Mapping[str, Any], where: str) -> PgSettings:
        return read_settings(tables, where)

    def select(self, wanted: Wanted) -> Selected | None:
        settings: PgSettings = wanted.settings(self.name) or DEFAULTS
        idle_after = wanted.values.get("pg_idle_after")
        if idle_after is not None and not math.isfinite(idle_after):
            raise SourceError("--pg-idle-after: must be a finite number of seconds")
        dsns = _resolve(wanted, settings)
        if not dsns:
            return None
        return SelectedServers(
            tuple(dsns),
            PgSettings(
                tuple(dsns),
                settings.idle_after if idle_after is None else float(idle_after),
                bool(wanted.values.get("pg_all")) or settings.all_rows,
                settings.advisory,
            ),
            float(wanted.values.get("refresh") or DEFAULT_REFRESH),
        )

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        settings: PgSettings = wanted.settings(self.name) or DEFAULTS
        dsns = _resolve(wanted, settings)
        return find_pg(target, dsns, settings, host)


def _resolve(wanted: Wanted, settings: PgSettings) -> list[str]:
    from lockwatch.sources.postgres.dsn import (
        PasswordFileError,
        malformed,
        problem,
        resolve_dsns,
        scrub,
    )

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


@dataclass(frozen=True)
class SelectedServers:
    dsns: tuple[str, ...]
    settings: PgSettings
    refresh: float = DEFAULT_REFRESH

    def collect(self, request: ListingRequest) -> Collected:
        from lockwatch.clock import FrozenClock
        from lockwatch.model.assess import assess
        from lockwatch.model.blocking import from_locks
        from lockwatch.model.process import StaticProcesses
        from lockwatch.model.verdict import State
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
            else:
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


def dsn_from_name(server: str) -> str | None:
    """`user@host:port/db` (a lock id's server) as a DSN: libpq finds any password
    in PGPASSWORD or ~/.pgpass."""
    match = re.fullmatch(
        r"(?:(?P<user>[^@:/]+)@)?(?P<host>[^:/]+):(?P<port>\d+)/(?P<db>.*)", server
    )
    if match is None:
        return None
    from psycopg.conninfo import make_conninfo

    params = {"port": match["port"]}
    if match["host"] != "local":
        params["host"] = match["host"]
    if match["user"]:
        params["user"] = match["user"]
    if match["db"]:
        params["dbname"] = match["db"]
    return make_conninfo("", **params)


def find_pg(target: str, dsns: Sequence[str], settings: PgSettings, host: str) -> Found | str:
    """The Postgres lock `target` names, polled and judged now; or why there is none."""
    from lockwatch.clock import SystemClock
    from lockwatch.model.process import StaticProcesses
    from lockwatch.model.verdict import evaluate_all
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
        derived = dsn_from_name(server)
        if derived is None:
            raise SourceError(f"no server {server} among --pg/LOCKWATCH_PG/config")
        chosen = [derived]
    every_row = PgSettings(tuple(chosen[:1]), settings.idle_after, True, settings.advisory)
    sources = make_sources(chosen[:1], every_row)
    for source in sources:
        source.name = server  # ids name the server as the operator's listing did
    poll_once(sources)
    source = sources[0]
    if source.last is None:
        reason = source.status.reason or "no answer"
        raise LookupFailed(f"cannot read pg_locks on {server}: {reason}")
    locks = source.last.locks
    verdicts = evaluate_all(locks, StaticProcesses(), SystemClock(), host)
    for lock, verdict in zip(locks, verdicts, strict=True):
        if lock.id == target:
            return lock, verdict, locks
    return (
        f"no lock {target} on {server} now: released, or its holder changed since it was"
        " listed (lock ids name the holder's pid)"
    )


SOURCE = PostgresSource()
