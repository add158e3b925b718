"""One PostgreSQL server: a single quiet monitoring connection, polled.

The monitor must never hurt the server: autocommit (so no transaction is ever
left open, and each poll's own transaction reads pg_stat_activity afresh, after
the locks: query.py), read-only, low statement_timeout and lock_timeout,
application_name=lockwatch, one connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import field, replace
from datetime import datetime, timedelta
from itertools import repeat
from operator import itemgetter
from typing import Any, NamedTuple, cast

import psycopg
from psycopg import Column
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import RowMaker, dict_row, no_result, tuple_row

from lockwatch.clock import Clock, SystemClock
from lockwatch.model.compact import Columns, Row
from lockwatch.model.lock import Lock
from lockwatch.model.slots import lean_dataclass
from lockwatch.model.status import SourceStatus, backoff_seconds
from lockwatch.sources.contract import DEFAULT_DEADLINE
from lockwatch.sources.deadline import DeadlineMissed, SocketLike, whole_answer
from lockwatch.sources.locktables.config import TableSpec
from lockwatch.sources.postgres.clients import Session, Sockets, find_clients, read_sockets
from lockwatch.sources.postgres.dsn import display_name, problem, scrub
from lockwatch.sources.postgres.facts import (
    INSUFFICIENT_PRIVILEGE,
    NO_NAMES,
    AdvisoryNames,
    PgClient,
)
from lockwatch.sources.postgres.locktables import (
    NOTHING,
    catalog_statement,
    read_tables,
    table_locks,
)
from lockwatch.sources.postgres.query import TARGET_COLUMNS, lock_query, target_of
from lockwatch.sources.postgres.records import (
    SeenKey,
    Waits,
    holds_seen,
    index_waits,
    to_locks,
)
from lockwatch.sources.postgres.rowread import Entry
from lockwatch.sources.postgres.settings import DEFAULT_IDLE_AFTER
from lockwatch.sources.postgres.terms import local_client

APPLICATION_NAME = "lockwatch"
PRIVILEGE_HINT = (
    "other sessions' queries are hidden: grant lockwatch's role pg_read_all_stats"
    " (pg_signal_backend to break locks)"
)
# Finds sessions' client processes on this host: (sessions, the server's port) ->
# by backend pid, the client found (alive or gone), or None where it cannot be.
ClientFinder = Callable[[Sequence[Session], "int | None"], "dict[int, PgClient | None]"]


@lean_dataclass
class PgSnapshot:
    """One poll's rows. Records are built from them on demand: a one-shot listing
    shares that work among processes (see cli/pg.py), a dashboard asks `locks`."""

    server: str
    polled_at: datetime
    rows: Sequence[Mapping[str, Any]]  # pg_locks rows of interest
    sessions: Mapping[int, Mapping[str, Any]]  # pg_stat_activity by pid
    server_version: int
    idle_after: float
    names: AdvisoryNames
    all_rows: bool
    # When the source first saw each hold (this poll's time for a new one).
    seen: dict[SeenKey, datetime] = field(default_factory=dict)
    # Sessions' client processes on this host, by backend pid.
    clients: dict[int, PgClient | None] = field(default_factory=dict)
    monitor_role: str | None = None
    # Rows of migration tools' lock tables that hold their lock (locktables.py).
    tables: list[Lock] = field(default_factory=list)
    _locks: list[Lock] | None = None

    def waits(self) -> Waits:
        return index_waits(self.rows)

    def to_locks(
        self, rows: Sequence[Mapping[str, Any]], waits: Waits, entries: list[Entry] | None = None
    ) -> list[Lock]:
        return to_locks(
            rows,
            self.sessions,
            server=self.server,
            polled_at=self.polled_at,
            idle_after=self.idle_after,
            names=self.names,
            all_rows=self.all_rows,
            waits=waits,
            seen=self.seen,
            clients=self.clients,
            monitor_role=self.monitor_role,
            entries=entries,
        )

    @property
    def locks(self) -> list[Lock]:
        if self._locks is None:
            self._locks = self.to_locks(self.rows, self.waits()) + self.tables
        return self._locks


# Columns whose values repeat from row to row (a lock's type and mode, a session's
# pid, names and state): one object each per result, not one per row.
_REPEATING = frozenset(
    {
        "locktype",
        "mode",
        "pid",
        "virtualtransaction",
        "database",
        "database_name",
        "relation",
        "schema_name",
        "relation_name",
        "classid",
        "objsubid",
        "prepared_owner",
        "held_kinds",
        "datname",
        "usename",
        "application_name",
        "client",
        "backend_type",
        "state",
        "wait_event_type",
        "wait_event",
    }
)


def _shape(
    description: Sequence[Column],
) -> tuple[Columns, list[int], Callable[[Sequence[Any]], tuple[Any, ...]] | None]:
    """A result's columns as its rows get them (with `target` added where the
    result has its parts), which of them repeat, and a getter of target's parts."""
    names = [column.name for column in description]
    # The locks' rows get their `target` here, from its columns (query.target_of).
    parts = None
    if "target" not in names and all(name in names for name in TARGET_COLUMNS):
        parts = itemgetter(*(names.index(name) for name in TARGET_COLUMNS))
        names.append("target")
    columns = Columns(names)
    repeating = [i for i, name in enumerate(columns.names) if name in _REPEATING]
    return columns, repeating, parts


def compact_rows(cursor: psycopg.AsyncCursor[Any] | psycopg.Cursor[Any]) -> RowMaker[Row]:
    """A psycopg row factory: each row a `Row` of its result's shared columns,
    with the values of repeating columns shared among the result's rows."""
    description = cursor.description
    if description is None:
        return no_result
    columns, repeating, parts = _shape(description)
    seen: dict[object, object] = {}

    def make(values: Sequence[Any]) -> Row:
        kept = list(values)
        for i in repeating:
            value = kept[i]
            if type(value) is str or type(value) is int:
                kept[i] = seen.setdefault(value, value)
        if parts is not None:
            kept.append(target_of(parts(kept)))
        return Row(columns, kept)

    return make


def compact(description: Sequence[Column] | None, rows: Sequence[tuple[Any, ...]]) -> list[Row]:
    """`compact_rows`' rows, made a column at a time from psycopg's tuples: the
    same rows, the same values shared, for about half its cost per row (a poll
    has thousands)."""
    if description is None or not rows:
        return []
    columns, repeating, parts = _shape(description)
    values: list[Sequence[Any]] = list(zip(*rows, strict=True))
    for i in repeating:
        # One dict per column: a column holds one type (and NULL), so no value
        # is ever swapped for an equal one of another type (1 for True).
        column = values[i]
        values[i] = list(map({}.setdefault, column, column))
    if parts is not None:
        values.append(_targets(parts(values)))
    return list(map(Row, repeat(columns), zip(*values, strict=True)))


# query.target_of's text in two parts, each written by one format: "%s" writes each
# value with str(), as target_of does, NULL as `None` (then dropped; no value spells
# it, and the slashes keep it from spanning two). The head (the lock's type, and
# where: a poll has few of those) is written once per distinct head; the tail (an
# advisory or object key: one per lock) once per row.
_TAIL = 3  # classid, objid, objsubid: TARGET_COLUMNS' last
_HEAD_SPELLING = "%s/" * (len(TARGET_COLUMNS) - _TAIL)
_TAIL_SPELLING = "/".join(["%s"] * _TAIL)


def _targets(columns: Sequence[Sequence[Any]]) -> list[str]:
    """`query.target_of` of each row, from the TARGET_COLUMNS `columns`, without a
    Python step per row (a fifth of a large poll's cost to make its rows).
    test_pg_compact holds it to target_of's answer, which test_pg_target holds to
    the server's format()."""
    heads = list(zip(*columns[:-_TAIL], strict=True))
    spelled = {head: (_HEAD_SPELLING % head).replace("None", "") for head in set(heads)}
    tails = list(map(_TAIL_SPELLING.__mod__, zip(*columns[-_TAIL:], strict=True)))
    if any(None in column for column in columns[-_TAIL:]):
        tails = list(map(str.replace, tails, repeat("None"), repeat("")))
    return list(map(str.__add__, map(spelled.__getitem__, heads), tails))


class Answer(NamedTuple):
    """A poll's answer (`read_answer`)."""

    rows: list[Row]  # the lock rows
    pids: set[int]  # the sessions they are of
    activity: list[Row]  # the sessions (pg_stat_activity)
    port: int | None = None  # the port the server listens on, as it says
    # The lock tables' catalog rows (locktables.catalog_statement), when asked.
    catalog: list[dict[str, Any]] | None = None


async def read_answer(cursor: psycopg.AsyncCursor[tuple[Any, ...]]) -> Answer:
    """A poll's answer, from the cursor at lock_query's first result: the lock
    rows, the pids of the sessions they are of, the sessions (pg_stat_activity),
    the server's port, and a catalog statement's rows sent after them if any."""
    answer = await cursor.fetchall()
    rows = compact(cursor.description, answer)
    pids = _column_set(cursor.description, answer, "pid")
    activity: list[Row] = []
    port = catalog = None
    # The sessions come last, read afresh after the locks (see query.py), past
    # pg_stat_clear_snapshot()'s result, which has the port.
    if cursor.nextset():
        port = _port(cursor.description, await cursor.fetchall())
        if cursor.nextset():
            activity = compact(cursor.description, await cursor.fetchall())
            if cursor.nextset():
                names = [column.name for column in cursor.description or ()]
                found = await cursor.fetchall()
                catalog = [dict(zip(names, values, strict=True)) for values in found]
    return Answer(rows, pids, activity, port, catalog)


def _port(description: Sequence[Column] | None, rows: Sequence[tuple[Any, ...]]) -> int | None:
    """The `port` column's value in a one-row result, as a number."""
    names = [column.name for column in description or ()]
    if "port" not in names or len(rows) != 1:
        return None
    with contextlib.suppress(ValueError, TypeError):
        return int(str(rows[0][names.index("port")]))
    return None


def _column_set(
    description: Sequence[Column] | None, rows: Sequence[tuple[Any, ...]], name: str
) -> set[Any]:
    """The values of column `name` in a result's tuples, NULL left out."""
    names = [column.name for column in description or ()]
    if name not in names:
        return set()
    at = names.index(name)
    found = {values[at] for values in rows}
    found.discard(None)
    return found


class PgSource:
    def __init__(
        self,
        dsn: str,
        *,
        idle_after: float = DEFAULT_IDLE_AFTER,
        all_rows: bool = False,
        names: AdvisoryNames = NO_NAMES,
        clock: Clock | None = None,
        statement_timeout_ms: int = 2000,
        lock_timeout_ms: int = 500,
        connect_timeout_s: int = 5,
        query: str | None = None,
        client_finder: ClientFinder | None = find_clients,
        deadline_s: float = DEFAULT_DEADLINE,
        locktables: Sequence[TableSpec] = (),
    ) -> None:
        """Timeouts: `connect_timeout_s` for connecting (libpq's, the whole of it),
        `statement_timeout_ms` for each statement on the server, and `deadline_s`
        for a poll's whole answer here (connect, query, every row of it): a server
        that answers a byte at a time trips none of the others."""
        self._dsn = dsn
        self.name = display_name(dsn)
        self.idle_after = idle_after
        self.all_rows = all_rows
        self.names = names
        self.locktables = tuple(locktables)  # the config's [[locktables]]
        self.clock = clock or SystemClock()
        self._statement_timeout_ms = statement_timeout_ms
        self._lock_timeout_ms = lock_timeout_ms
        self._connect_timeout_s = connect_timeout_s
        self.deadline_s = deadline_s
        self._query = query  # tests replace the poll to simulate a slow server
        # None: never look for clients (as if every client were on another host).
        self._client_finder = client_finder
        self._conn: psycopg.AsyncConnection[dict[str, object]] | None = None
        self._server_port: int | None = None
        # Whether the last poll had sessions with clients on the server's host: if
        # so, this host's sockets are read while the next poll's query runs.
        self._local_clients = True
        # Kept across polls: when each hold was known to exist (see `remember`), and
        # the client process each session had (so a client that is gone is still named).
        self._seen: dict[SeenKey, datetime] = {}
        self._known_clients: dict[tuple[int, Any], PgClient] = {}
        self.failures = 0
        self.retry_in = 0.0
        self.last: PgSnapshot | None = None
        self._polled_at: datetime | None = None  # the last poll that answered
        self.status = SourceStatus("postgres", self.name, "connecting")

    async def _connect(self) -> psycopg.AsyncConnection[dict[str, object]]:
        conn = await psycopg.AsyncConnection.connect(
            self._dsn,
            autocommit=True,
            application_name=APPLICATION_NAME,
            # Within the poll's deadline too: the connection's socket is not the
            # deadline's to cut until connect() has given it (libpq waits 2 s at least).
            connect_timeout=max(1, min(self._connect_timeout_s, math.ceil(self.deadline_s))),
            row_factory=dict_row,
            options=self._options(),
        )
        # The port the server listens on: a session's connection to it is what
        # client lookups find in this host's socket table. Each poll's answer
        # says it (no round trip of its own); till then, the port libpq connected
        # to, which it is unless something forwards it.
        self._server_port = None
        with contextlib.suppress(ValueError, TypeError):
            self._server_port = int(conn.info.port)
        return conn

    def _sockets(self) -> list[SocketLike]:
        found: list[SocketLike] = []
        conn = self._conn
        if conn is not None and not conn.closed:
            with contextlib.suppress(psycopg.Error):
                found.append(conn.pgconn.socket)
        return found

    def _poll_query(self, version: int) -> str:
        """The poll's statements: the locks and sessions (query.py), then the lock
        tables' catalog (locktables.py), all in one round trip."""
        if self._query is not None:
            return self._query
        locks = lock_query(version, self.all_rows, self.idle_after)
        return locks + catalog_statement(self.locktables)

    def _options(self) -> str:
        """The session's settings, sent with the connection (no extra round trip),
        after whatever `options` the DSN or PGOPTIONS already carry."""
        theirs = ""
        with contextlib.suppress(psycopg.ProgrammingError):
            theirs = str(conninfo_to_dict(self._dsn).get("options") or "")
        theirs = theirs or os.environ.get("PGOPTIONS", "")
        ours = (
            f"-c statement_timeout={self._statement_timeout_ms}"
            f" -c lock_timeout={self._lock_timeout_ms}"
            " -c default_transaction_read_only=on"
            f" -c idle_in_transaction_session_timeout={self._statement_timeout_ms * 5}"
        )
        return f"{theirs} {ours}".strip()

    async def poll(self) -> PgSnapshot | None:
        """One poll. On failure the status says why, the connection is dropped
        (the next poll reconnects), and `last` keeps the last good snapshot."""
        invalid = problem(self._dsn)
        if invalid is not None:
            self.status = SourceStatus("postgres", self.name, "error", reason=invalid)
            self.retry_in = 30.0  # the DSN will not mend itself: no busy retrying
            return None
        ahead: asyncio.Future[Sockets] | None = None
        try:
            # At the deadline the connection's socket is shut down: the wait on it
            # ends at once (cancelling would first ask the server to cancel, and
            # wait up to 10 s for a server that may be the one not answering).
            with whole_answer(self.deadline_s, self._sockets):
                if self._conn is None or self._conn.closed:
                    self.status = SourceStatus(
                        "postgres", self.name, "connecting", updated_at=self._updated_at()
                    )
                    self._conn = await self._connect()
                conn = self._conn
                version = conn.info.server_version
                if self._client_finder is find_clients and self._local_clients:
                    ahead = asyncio.ensure_future(
                        asyncio.to_thread(read_sockets, server_port=self._server_port)
                    )
                # Rows as compact `Row`s: the locks keep them (see model/compact.py).
                cursor = conn.cursor(row_factory=tuple_row)
                await cursor.execute(self._poll_query(version))
                rows, pids, activity, port, catalog = await read_answer(cursor)
                if port is not None:
                    self._server_port = port
                tables = NOTHING
                if self._query is None:
                    tables = await read_tables(conn, activity, self.locktables, catalog)
        except (psycopg.Error, OSError, DeadlineMissed) as exc:
            if ahead is not None:
                ahead.cancel()
            await self._fail(exc)
            return None
        polled_at = self.clock.now()
        if self._query is not None:
            activity, rows, pids = [], [], set()  # a test's stand-in query: nothing to read
        sessions: dict[int, Row] = {cast(int, s["pid"]): s for s in activity}
        self.failures = 0
        sockets = await ahead if ahead is not None else None
        clients = await self._clients(pids, sessions, sockets)
        self._polled_at = polled_at
        self.last = PgSnapshot(
            self.name,
            polled_at,
            rows,
            sessions,
            version,
            self.idle_after,
            self.names,
            self.all_rows,
            seen=self._seen,
            clients=clients,
            monitor_role=str(conn.info.user) if conn.info.user else None,
            tables=table_locks(tables, self.name, polled_at),
        )
        hidden = any(s["query"] == INSUFFICIENT_PRIVILEGE for s in activity)
        self.status = SourceStatus(
            "postgres",
            self.name,
            "connected",
            reason=PRIVILEGE_HINT if hidden else None,
            updated_at=polled_at,
        )
        return self.last

    def remember(self, snapshot: PgSnapshot, seen: dict[SeenKey, datetime] | None = None) -> None:
        """Keep when each hold in `snapshot` was known to exist, for the next polls
        (a live feed calls this; a one-shot listing has no next poll). Holds no
        longer seen are forgotten: a lock taken again later is a new hold. `seen`:
        that, worked out already (holds_seen of all the snapshot's locks)."""
        self._seen = holds_seen(snapshot.locks, snapshot.sessions) if seen is None else seen

    async def _clients(
        self,
        pids: Iterable[int],
        sessions: Mapping[int, Mapping[str, Any]],
        sockets: Sockets | None = None,
    ) -> dict[int, PgClient | None]:
        """The client processes of the sessions `pids` (those the poll's rows are of)
        whose client is on the server's host, looked up in a worker thread (it
        reads /proc)."""
        finder = self._client_finder
        if finder is None:
            return {}
        wanted: list[Session] = []
        local: dict[str | None, bool] = {}  # sessions share a few client addresses
        for pid in pids:
            activity = sessions.get(pid)
            if activity is None:
                continue
            client = activity.get("client")
            here = local.get(client)
            if here is None:
                here = local[client] = local_client(client)
            if here:
                wanted.append(Session(pid, client, activity.get("client_port")))
        self._local_clients = bool(wanted)
        if not wanted:
            self._known_clients = {}
            return {}
        if sockets is not None and finder is find_clients:
            found = await asyncio.to_thread(find_clients, wanted, self._server_port, ahead=sockets)
        else:
            found = await asyncio.to_thread(finder, wanted, self._server_port)
        known: dict[tuple[int, Any], PgClient] = {}
        for pid, client in found.items():
            identity = (pid, sessions[pid].get("backend_started"))
            if client is not None and client.pid is None and not client.alive:
                # Its end is gone: name the process lockwatch saw there before, if any.
                before = self._known_clients.get(identity)
                if before is not None:
                    client = found[pid] = replace(before, alive=False)
            if client is not None and client.pid is not None:
                known[identity] = client
        self._known_clients = known
        return found

    def let_go(self) -> None:
        """Drop the last poll's rows (`last`): a live feed has made what it keeps of
        them, and holding them while the next poll's come in would be two polls of
        a large server at once."""
        self.last = None

    def _updated_at(self) -> datetime | None:
        return self._polled_at

    async def _fail(self, exc: BaseException) -> None:
        self.failures += 1
        broken = isinstance(exc, DeadlineMissed) or (
            isinstance(exc, psycopg.OperationalError | OSError)
            and (self._conn is None or self._conn.closed or self._conn.broken)
        )
        if self._conn is not None:
            # Closing a broken connection may itself fail; it is gone either way.
            with contextlib.suppress(psycopg.Error):
                await self._conn.close()
            self._conn = None
        delay = backoff_seconds(self.failures, random.uniform(-1.0, 1.0))
        now = self.clock.now()
        self.status = SourceStatus(
            "postgres",
            self.name,
            "disconnected" if broken else "error",
            reason=describe(exc, self._dsn),
            updated_at=self._updated_at(),
            next_retry_at=now + _seconds(delay),
        )
        self.retry_in = delay

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def run(self, interval: float, on_poll: Callable[[PgSource], Awaitable[None]]) -> None:
        """Poll forever: every `interval` seconds while it works, with backoff
        (at most 30 s) while it does not. Each poll starts after the last ended."""
        while True:
            snapshot = await self.poll()
            await on_poll(self)
            await asyncio.sleep(interval if snapshot is not None else self.retry_in)


def describe(exc: BaseException, dsn: str) -> str:
    """A one-line reason an operator can act on, never with a password in it."""
    sqlstate = getattr(exc, "sqlstate", None)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if sqlstate == "57014":
        text = f"the poll timed out (statement_timeout): {text}"
    elif sqlstate == "55P03":
        text = f"the poll waited too long for a lock (lock_timeout): {text}"
    elif sqlstate == "42501":
        text = f"{text} — grant pg_read_all_stats (pg_signal_backend for actions)"
    return scrub(text, dsn)


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=value)
