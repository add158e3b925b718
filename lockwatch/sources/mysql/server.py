"""One MySQL or MariaDB server, polled on one quiet connection (PyMySQL, imported
only here, only when --mysql is used).

The monitor never hurts the server: autocommit (no transaction is ever left
open), every read with its deadline, a handful of in-memory reads a poll. What
it may not read is said in its status with the GRANT that fixes it, never taken
for "no locks".
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import pymysql

from lockwatch.clock import Clock, SystemClock
from lockwatch.model.lock import Lock
from lockwatch.model.status import SourceStatus, backoff_seconds
from lockwatch.sources.clients import cmdline
from lockwatch.sources.contract import DEFAULT_DEADLINE
from lockwatch.sources.deadline import DeadlineMissed, SocketLike, whole_answer
from lockwatch.sources.locktables.config import TableSpec
from lockwatch.sources.mysql import queries
from lockwatch.sources.mysql.clients import UnixClients, start_time, unix_clients
from lockwatch.sources.mysql.dsn import Endpoint
from lockwatch.sources.mysql.facts import MyClient, MyLock
from lockwatch.sources.mysql.idle import idle_in_transaction
from lockwatch.sources.mysql.lexer import asked_names
from lockwatch.sources.mysql.locktables import read_tables
from lockwatch.sources.mysql.records import Poll, build
from lockwatch.sources.mysql.settings import DEFAULT_IDLE_AFTER
from lockwatch.sources.polled import Polled

KIND = "mysql"
# MySQL's "access denied; you need the PROCESS privilege" and "table access denied".
_NO_PROCESS = (1227,)
_DENIED = (1142, 1143, 1227, 1044)
_CLIENT_LOST = (2006, 2013, 2055)

ClientFinder = Callable[[dict[int, tuple[str, int]], int], dict[int, MyClient | None]]


def privilege_hint(user: str | None) -> str:
    who = f"'{user}'" if user else "<user>"
    return (
        "other sessions and InnoDB lock waits are hidden from lockwatch's user: GRANT PROCESS"
        f" ON *.* TO {who} (MySQL 8 also: GRANT SELECT ON performance_schema.* TO {who};"
        " CONNECTION ADMIN to break locks)"
    )


def find_clients(
    wanted: dict[int, tuple[str, int]], server_port: int
) -> dict[int, MyClient | None]:
    """The client processes on this host of TCP sessions (thread -> (address,
    port)), through the kernel's socket tables (sources/clients.py)."""
    from lockwatch.sources.clients import Session
    from lockwatch.sources.clients import find_clients as find

    sessions = [Session(thread, address, port) for thread, (address, port) in wanted.items()]
    return find(sessions, server_port, MyClient)


def join_waits(
    trx: Sequence[Sequence[Any]],
    edges: Sequence[Sequence[Any]],
    locks: Sequence[Sequence[Any]],
) -> list[tuple[Any, ...]]:
    """INNODB_LOCK_WAITS joined with INNODB_TRX and INNODB_LOCKS, as
    queries.INNODB_WAITS_MARIADB (and sys.innodb_lock_waits) would return it, each
    edge once. MariaDB's read-only transactions share trx_id 0: an edge to it names
    each of them that holds any lock (the server's join names them all)."""
    by_id: dict[Any, list[Sequence[Any]]] = {}
    for row in trx:
        by_id.setdefault(row[4], []).append(row)
    by_lock = {row[0]: row for row in locks}
    joined: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for requesting, requested, blocking, blocking_lock in edges:
        waiters = by_id.get(requesting, ())
        blockers = by_id.get(blocking, ())
        if len(blockers) > 1:
            blockers = [row for row in blockers if (row[6] or 0) > 0]
        rl, bl = by_lock.get(requested), by_lock.get(blocking_lock)
        if len(waiters) != 1 or rl is None or bl is None:
            continue  # gone between the reads
        r = waiters[0]
        for b in blockers:
            joined.setdefault(
                (r[0], b[0]),
                (r[0], r[3], rl[1], rl[2], rl[3], rl[4], rl[5], b[0], b[1], bl[1], bl[0] == b[5]),
            )
    return list(joined.values())


class MyServer:
    """A poller (sources/polled.py) of one server."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        clock: Clock | None = None,
        idle_after: float = DEFAULT_IDLE_AFTER,
        names: Sequence[str] = (),
        timeout: float = 3.0,
        client_finder: ClientFinder | None = find_clients,
        deadline: float = DEFAULT_DEADLINE,
        locktables: Sequence[TableSpec] = (),
    ) -> None:
        """`timeout`: for connecting, each read and write, and each statement on the
        server (max_statement_time); `deadline`: for a poll's whole answer."""
        self.endpoint = endpoint
        self.server = endpoint.name
        self.name = f"mysql:{endpoint.name}"
        self.clock = clock or SystemClock()
        self.idle_after = idle_after
        self.names = tuple(names)
        self.locktables = tuple(locktables)  # the config's [[locktables]]
        self.timeout = timeout
        self.deadline = deadline
        self.client_finder = client_finder
        self._conn: pymysql.connections.Connection[Any] | None = None
        self._connecting: pymysql.connections.Connection[Any] | None = None
        self._mariadb = True
        self._port = endpoint.port
        self._user: str | None = None
        self._performance_schema = False
        self._socket: str | None = None
        # Unix-socket sessions whose client was found: thread -> ((user, host), the
        # client, its start time, its socket inodes), kept while the thread lives.
        self._unix_seen: dict[
            int, tuple[tuple[Any, Any], MyClient, int | None, frozenset[int]]
        ] = {}
        self._seen: dict[str, datetime] = {}
        self._listed: dict[str, tuple[str, str]] = {}
        self._updated_at: datetime | None = None
        self.failures = 0
        self.status = SourceStatus(KIND, endpoint.name, "connecting")

    def connect(self) -> pymysql.connections.Connection[Any]:
        if self._conn is not None and self._conn.open:
            return self._conn
        # Connected apart from made: the handshake's socket is the deadline's to cut too.
        conn: pymysql.connections.Connection[Any] = pymysql.connect(
            **self.endpoint.connect_args(self.timeout), defer_connect=True
        )
        self._connecting = conn
        try:
            conn.connect()
            with conn.cursor() as cursor:
                cursor.execute(
                    "SELECT VERSION(), @@port, CURRENT_USER(), @@performance_schema, @@socket"
                )
                version, port, user, ps, sock = cursor.fetchone() or ("", None, None, 0, None)
                self._limit_statements(cursor, "mariadb" in str(version).lower())
        except BaseException:
            with contextlib.suppress(pymysql.Error, OSError):
                conn.close()
            raise
        finally:
            self._connecting = None
        self._mariadb = "mariadb" in str(version).lower()
        self._port = int(port) if port else self.endpoint.port
        self._user = str(user).rpartition("@")[0] if user else None
        self._performance_schema = bool(ps)
        self._socket = str(sock) if sock else None
        self._conn = conn
        return conn

    def _limit_statements(self, cursor: Any, mariadb: bool) -> None:
        """The server ends any statement of this session that runs past `timeout`
        itself (MariaDB's max_statement_time, MySQL's max_execution_time for
        SELECT), rather than go on working for a poll given up on."""
        seconds = max(1, round(self.timeout))
        setting = (
            f"SET SESSION max_statement_time = {seconds}"
            if mariadb
            else f"SET SESSION max_execution_time = {seconds * 1000}"
        )
        with contextlib.suppress(pymysql.err.OperationalError, pymysql.err.ProgrammingError):
            cursor.execute(setting)  # (a server too old for it: the deadline still holds)

    def _sockets(self) -> list[SocketLike]:
        return [getattr(conn, "_sock", None) for conn in (self._conn, self._connecting) if conn]

    def poll(self) -> Polled:
        try:
            with whole_answer(self.deadline, self._sockets):
                return self._poll()
        except (pymysql.Error, OSError, DeadlineMissed) as exc:
            return self._fail(exc)

    def _rows(self, cursor: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        cursor.execute(sql, args)
        return list(cursor.fetchall())

    def _denied(self, cursor: Any, sql: str) -> list[tuple[Any, ...]] | None:
        """Rows, or None when lockwatch's user may not read them."""
        try:
            return self._rows(cursor, sql)
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] in _DENIED:
                return None
            raise
        except pymysql.err.ProgrammingError as exc:
            if exc.args and exc.args[0] in (1109, 1146):  # unknown table: not there
                return None
            raise

    def _poll(self) -> Polled:
        if self._conn is None:
            self.status = SourceStatus(KIND, self.server, "connecting", updated_at=self._updated_at)
        conn = self.connect()
        with conn.cursor() as cursor:
            before = self.clock.now()
            cursor.execute("SELECT NOW(6)")
            (server_now,) = cursor.fetchone() or (None,)
            after = self.clock.now()
            processes = self._rows(
                cursor, queries.PROCESSLIST_MARIADB if self._mariadb else queries.PROCESSLIST_MYSQL
            )
            polled_at = self.clock.now()
            trx = self._denied(cursor, queries.TRANSACTIONS)
            waits = self._row_waits(cursor, trx)
            mdl, pending, mdl_from = self._metadata_rows(cursor)
            used = self._used(cursor, processes, mdl)
            tables = read_tables(
                cursor,
                processes,
                server=self.server,
                polled_at=polled_at,
                specs=self.locktables,
            )
        offset = timedelta(0)
        if isinstance(server_now, datetime):
            offset = server_now - (before + (after - before) / 2).replace(tzinfo=None)
        hidden = trx is None
        poll = Poll(
            self.server,
            polled_at,
            processes,
            trx,
            waits,
            mdl,
            mdl_pending=pending,
            mdl_from=mdl_from,
            waits_from="innodb_lock_waits" if self._mariadb else "data_lock_waits",
            used=used,
            monitor_user=self._user,
            idle_after=self.idle_after,
            seen=self._seen,
            listed=self._listed,
            server_offset=offset,
        )
        holders = _holders(processes, trx, waits, mdl, used, self.idle_after)
        poll.clients = self._clients(processes, holders)
        locks = build(poll) + tables
        self._remember(locks)
        self.failures = 0
        self._updated_at = polled_at
        reason = self._partial_reason(hidden, mdl, processes)
        self.status = SourceStatus(
            KIND, self.server, "connected", reason=reason, updated_at=polled_at, partial=hidden
        )
        return Polled(polled_at, (self.status,), locks)

    def _row_waits(self, cursor: Any, trx: Sequence[Sequence[Any]] | None) -> Any:
        """Who waits for whose row lock: MariaDB's lock waits joined to its
        locks, or MySQL's data_lock_waits; None without the transactions."""
        waits = None
        if trx is not None and self._mariadb:
            edges = self._denied(cursor, queries.LOCK_WAITS_MARIADB)
            locks_rows = self._denied(cursor, queries.LOCKS_MARIADB) if edges else []
            waits = join_waits(trx, edges or (), locks_rows or ())
        elif trx is not None:
            waits = self._denied(cursor, queries.INNODB_WAITS_MYSQL)
        return waits

    def _metadata_rows(self, cursor: Any) -> tuple[Any, bool, str]:
        """The metadata locks the server tells (MariaDB's plugin, MySQL's
        performance_schema), whether pending requests are among them, and from where."""
        mdl, pending, mdl_from = None, False, "metadata_lock_info"
        if self._mariadb:
            cursor.execute(queries.PLUGIN_ACTIVE)
            active = cursor.fetchone()
            if active and active[0]:
                mdl = self._denied(cursor, queries.METADATA_LOCK_INFO)
        elif self._performance_schema:
            mdl = self._denied(cursor, queries.METADATA_LOCKS_MYSQL)
            pending, mdl_from = True, "metadata_locks"
        return mdl, pending, mdl_from

    def _remember(self, locks: Sequence[Lock]) -> None:
        """What the next poll needs of this one's locks: when each was known held,
        and each granted one's mode and finder."""
        self._seen = {}
        self._listed = {}
        for lock in locks:
            facts = lock.facts
            if isinstance(facts, MyLock) and facts.known_held_at is not None:
                self._seen[lock.id] = facts.known_held_at
            if isinstance(facts, MyLock) and facts.granted:
                self._listed[lock.id] = (facts.mode, facts.found_by)

    def _partial_reason(
        self, hidden: bool, mdl: Any, processes: Sequence[Sequence[Any]]
    ) -> str | None:
        """Why the picture is partial: privileges, or metadata-lock holders guessed."""
        reason = privilege_hint(self._user) if hidden else None
        if (
            not hidden
            and self._mariadb
            and mdl is None
            and any(row[6] in queries.MDL_STATES for row in processes)
        ):
            reason = (
                "metadata-lock holders are suspects only: INSTALL SONAME 'metadata_lock_info'"
                " to see who holds a table's metadata lock"
            )
        return reason

    def _used(
        self, cursor: Any, processes: Sequence[Sequence[Any]], mdl: Sequence[Sequence[Any]] | None
    ) -> dict[str, int | None]:
        """IS_USED_LOCK of the names the config gives and the waiters' statements
        name, where no metadata-lock table said who holds them."""
        known = {str(row[4]) for row in mdl or () if row[3] == "User lock"}
        names = list(dict.fromkeys(self.names))
        for row in processes:
            if row[6] == queries.USER_LOCK_STATE:
                names.extend(name for name in asked_names(row[7]) if name not in names)
        names = [name for name in names if name not in known]
        if not names:
            return {}
        found: dict[str, int | None] = {}
        for start in range(0, len(names), 500):
            chunk = names[start : start + 500]
            cursor.execute("SELECT " + ", ".join("IS_USED_LOCK(%s)" for _ in chunk), tuple(chunk))
            row = cursor.fetchone() or ()
            found.update(
                (name, None if value is None else int(value))
                for name, value in zip(chunk, row, strict=False)
            )
        return found

    def _clients(
        self, processes: Sequence[Sequence[Any]], holders: set[int]
    ) -> dict[int, MyClient | None]:
        """The client processes of the sessions that hold locks, where they are on
        this host: over TCP through the kernel's socket tables, over the unix
        socket where the mapping is unambiguous (`_unix`)."""
        if self.client_finder is None:
            return {}
        found: dict[int, MyClient | None] = {}
        wanted: dict[int, tuple[str, int]] = {}
        for row in processes:
            if int(row[0]) not in holders:
                continue
            address, sep, port = str(row[2] or "").rpartition(":")
            if sep and port.isdigit() and address in ("127.0.0.1", "::1", "localhost"):
                wanted[int(row[0])] = (address, int(port))
        if wanted:
            with contextlib.suppress(OSError):
                found.update(self.client_finder(wanted, self._port))
        with contextlib.suppress(OSError, pymysql.Error):
            found.update(self._unix(processes, holders))
        return found

    def _unix(
        self, processes: Sequence[Sequence[Any]], holders: set[int]
    ) -> dict[int, MyClient | None]:
        """The client processes of holders over the unix socket (PROCESSLIST HOST
        `localhost`). A session gets one only when that is not a guess: the
        server's unix connections all lead to one process (and the sessions seen
        are those connections: the same before and after the sockets were read),
        or its self-reported `_pid` (performance_schema) is one of the processes
        connected. One found before whose process is gone, on the same thread and
        connection (user, host), is gone (`alive` False), as over TCP."""
        local = {int(row[0]): (row[1], row[2]) for row in processes if row[2] == "localhost"}
        self._unix_seen = {
            thread: seen for thread, seen in self._unix_seen.items() if local.get(thread) == seen[0]
        }
        wanted = [thread for thread in local if thread in holders]
        if not wanted:
            return {}
        conn = self.connect()
        paths = [path for path in (self._socket, self.endpoint.socket) if path]
        picture = unix_clients(paths, None if self.endpoint.socket else self._port, self._own())
        if picture is None:
            return self._remembered(wanted, None)
        with conn.cursor() as cursor:
            again = {int(row[0]) for row in self._rows(cursor, queries.LOCAL_SESSIONS)}
            attrs: dict[int, int] = {}
            if self._performance_schema:
                for thread, value in self._denied(cursor, queries.CONNECT_PID) or ():
                    with contextlib.suppress(TypeError, ValueError):
                        attrs[int(thread)] = int(value)
        sole = picture.sole()
        if set(local) != again or len(picture.connections) != len(local):
            sole = None  # sessions came or went meanwhile: the picture is not theirs
        connected = picture.pids()
        result: dict[int, MyClient | None] = {}
        known: dict[int, MyClient] = {}
        for thread in wanted:
            pid = sole if sole is not None else attrs.get(thread)
            if pid is None or pid not in connected:
                continue
            client = known.get(pid)
            if client is None:
                client = known[pid] = MyClient(pid, cmdline(pid), True)
            result[thread] = client
            inodes = frozenset(
                peer for peer, pids in picture.connections.values() if pid in pids and peer
            )
            self._unix_seen[thread] = (local[thread], client, start_time(pid), inodes)
        result.update(self._remembered([t for t in wanted if t not in result], picture))
        return result

    def _remembered(
        self, threads: Sequence[int], picture: UnixClients | None
    ) -> dict[int, MyClient | None]:
        """Clients found earlier for these threads: alive while the same process
        lives; gone once it has exited and no process holds its sockets."""
        found: dict[int, MyClient | None] = {}
        for thread in threads:
            seen = self._unix_seen.get(thread)
            if seen is None:
                continue
            _, client, started, inodes = seen
            assert client.pid is not None
            now = start_time(client.pid)
            if now is not None and now == started:
                found[thread] = client
            elif (
                now is None
                and picture is not None
                and picture.complete
                and not inodes & picture.held
            ):
                found[thread] = MyClient(client.pid, client.cmdline, False)
        return found

    def _own(self) -> set[int]:
        """The socket inode of lockwatch's own connection (its client end)."""
        sock = getattr(self._conn, "_sock", None)
        if sock is None:
            return set()
        try:
            return {os.fstat(sock.fileno()).st_ino}
        except (OSError, ValueError):
            return set()

    def _fail(self, exc: BaseException) -> Polled:
        self.failures += 1
        self.close()
        delay = backoff_seconds(self.failures, random.uniform(-1.0, 1.0))
        now = self.clock.now()
        code = exc.args[0] if isinstance(exc, pymysql.Error) and exc.args else None
        lost = (
            isinstance(exc, OSError | DeadlineMissed)
            or code in _CLIENT_LOST
            or (isinstance(code, int) and 2000 <= code < 2100)
        )
        self.status = SourceStatus(
            KIND,
            self.server,
            "disconnected" if lost else "error",
            reason=describe(exc, self.endpoint),
            updated_at=self._updated_at,
            next_retry_at=now + timedelta(seconds=delay),
        )
        return Polled(now, (self.status,), None, retry_in=delay)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(pymysql.Error, OSError):
                conn.close()


def describe(exc: BaseException, endpoint: Endpoint) -> str:
    """A one-line reason an operator can act on, never with a password in it."""
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    if isinstance(exc, DeadlineMissed):
        return str(exc)
    if len(args) >= 2 and isinstance(args[0], int):
        text = f"({args[0]}) {args[1]}"
    else:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if args and args[0] == 1045:
        text += " — check the password (DSN, MYSQL_PWD, option file or password_file)"
    return endpoint.scrub(text)


def _holders(
    processes: Sequence[Sequence[Any]],
    trx: Sequence[Sequence[Any]] | None,
    waits: Any,
    mdl: Any,
    used: Mapping[Any, Any],
    idle_after: float,
) -> set[int]:
    """The threads whose client processes are looked for: every holder, and
    those idle in a transaction past the limit (stale unless found alive)."""
    holders = {int(row[0]) for row in mdl or ()}
    holders.update(int(thread) for thread in used.values() if thread is not None)
    holders.update(int(row[7]) for row in waits or ())
    # Idle in a transaction past the limit: stale unless its client is found alive.
    holders.update(idle_in_transaction(processes, trx, idle_after))
    if mdl is None and any(row[6] in queries.MDL_STATES for row in processes):
        holders.update(int(row[0]) for row in trx or () if row[0])
    return holders
