"""MariaDB (or MySQL) for the integration tests: a server to poll, and sessions to
contend on it.

The server is `LOCKWATCH_TEST_MYSQL_DSN`, default mysql://root@127.0.0.1:3306/test
(root, empty password; .ci/run starts the machine's MariaDB when it does not
answer). Without one the tests skip with the reason, or fail with it when
`LOCKWATCH_REQUIRE_MYSQL=1` (CI).

Each test gets a `MyHarness`: extra autocommit sessions, statements left blocked in
background threads, tables with a prefix of its own. Every session a test opens is
killed, every thread joined and every table dropped at teardown. The tests share
the server's lock tables (PROCESSLIST, INNODB_*), so they run on one xdist worker.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn, cast

import pymysql
import pytest

from lockwatch.sources.mysql.dsn import Endpoint, parse

DEFAULT_DSN = "mysql://root@127.0.0.1:3306/test"
WAIT_S = 30.0  # a bound for waits under a loaded suite, never a timing assertion
GROUP = pytest.mark.xdist_group("mysql-server")


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("LOCKWATCH_REQUIRE_MYSQL") == "1":
        pytest.fail(f"LOCKWATCH_REQUIRE_MYSQL=1 but no MySQL to test against: {reason}")
    pytest.skip(f"no MySQL to test against: {reason}")


def tid(conn: pymysql.connections.Connection[Any]) -> int:
    """A session's thread id (PyMySQL's own is untyped)."""
    thread: Any = cast(Any, conn).thread_id()
    return int(thread)


def endpoint_of(dsn: str) -> Endpoint:
    return parse(dsn, {})


def connect(endpoint: Endpoint, **extra: Any) -> pymysql.connections.Connection[Any]:
    args = endpoint.connect_args(10.0)
    args.update(extra)
    conn: pymysql.connections.Connection[Any] = pymysql.connect(**args)
    return conn


@pytest.fixture(scope="session")
def my_dsn() -> str:
    dsn = os.environ.get("LOCKWATCH_TEST_MYSQL_DSN") or DEFAULT_DSN
    try:
        with connect(endpoint_of(dsn)) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT 1")
    except (pymysql.Error, OSError) as exc:
        unavailable(f"nothing answers at {endpoint_of(dsn).name} ({exc})")
    return dsn


def wait_until(
    predicate: Callable[[], object], what: str, timeout: float = WAIT_S, every: float = 0.02
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


@dataclass
class Blocked:
    """A statement running in a background thread (it blocks on a lock)."""

    thread: threading.Thread
    result: list[Any] = field(default_factory=list)
    error: list[BaseException] = field(default_factory=list)

    def wait(self, timeout: float = WAIT_S) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the statement still blocks"


@dataclass
class MyHarness:
    dsn: str
    endpoint: Endpoint
    prefix: str
    admin: pymysql.connections.Connection[Any]
    sessions: list[pymysql.connections.Connection[Any]] = field(default_factory=list)
    blocked: list[Blocked] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)

    def session(self) -> pymysql.connections.Connection[Any]:
        conn = connect(self.endpoint)
        self.sessions.append(conn)
        return conn

    def run(self, conn: pymysql.connections.Connection[Any], sql: str) -> Any:
        with conn.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchall()

    def admin_rows(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        with self.admin.cursor() as cursor:
            cursor.execute(sql, args)
            return list(cursor.fetchall())

    def table(self, name: str, ddl: str = "(id INT PRIMARY KEY, v INT) ENGINE=InnoDB") -> str:
        table = f"{self.prefix}_{name}"
        self.admin_rows(f"CREATE TABLE {table} {ddl}")
        self.tables.append(table)
        return table

    def background(self, conn: pymysql.connections.Connection[Any], sql: str) -> Blocked:
        blocked = Blocked(threading.Thread(daemon=True))

        def work() -> None:
            try:
                blocked.result.append(self.run(conn, sql))
            except BaseException as exc:  # noqa: BLE001 - the test reads it
                blocked.error.append(exc)

        blocked.thread = threading.Thread(target=work, daemon=True)
        blocked.thread.start()
        self.blocked.append(blocked)
        return blocked

    def waiting(self, conn: pymysql.connections.Connection[Any], state: str | None = None) -> None:
        """Wait until session `conn` waits (on a lock, in PROCESSLIST's STATE)."""
        thread = tid(conn)

        def waits() -> bool:
            rows = self.admin_rows(
                "SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = %s", (thread,)
            )
            if not rows:
                return False
            if state is not None:
                return str(rows[0][0]) == state
            trx = self.admin_rows(
                "SELECT trx_state FROM information_schema.INNODB_TRX"
                " WHERE trx_mysql_thread_id = %s",
                (thread,),
            )
            return bool(trx) and str(trx[0][0]) == "LOCK WAIT"

        # The InnoDB tables are a cache, refreshed when it was not read for ~100 ms:
        # read more often, it would never be.
        wait_until(waits, f"thread {thread} to wait", every=0.15)
        time.sleep(0.15)

    def plugin(self) -> bool:
        rows = self.admin_rows(
            "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME ="
            " 'METADATA_LOCK_INFO' AND PLUGIN_STATUS = 'ACTIVE'"
        )
        return bool(rows[0][0])


@pytest.fixture
def my(my_dsn: str) -> Iterator[MyHarness]:
    endpoint = endpoint_of(my_dsn)
    admin = connect(endpoint)
    harness = MyHarness(my_dsn, endpoint, f"lwt_{uuid.uuid4().hex[:8]}", admin)
    try:
        yield harness
    finally:
        for conn in harness.sessions:
            with contextlib.suppress(pymysql.Error):
                harness.admin_rows(f"KILL {int(tid(conn))}")
        for blocked in harness.blocked:
            blocked.thread.join(WAIT_S)
        for conn in harness.sessions:
            with contextlib.suppress(pymysql.Error, OSError):
                conn.close()
        for table in harness.tables:
            harness.admin_rows(f"DROP TABLE IF EXISTS {table}")
        admin.close()


@pytest.fixture
def metadata_lock_info(my: MyHarness) -> Iterator[None]:
    """The metadata_lock_info plugin installed for the test (and put back as it was)."""
    had = my.plugin()
    if not had:
        try:
            my.admin_rows("INSTALL SONAME 'metadata_lock_info'")
        except pymysql.Error as exc:
            unavailable(f"cannot install metadata_lock_info ({exc})")
    try:
        yield
    finally:
        if not had:
            my.admin_rows("UNINSTALL SONAME 'metadata_lock_info'")


@pytest.fixture
def no_metadata_lock_info(my: MyHarness) -> Iterator[None]:
    had = my.plugin()
    if had:
        my.admin_rows("UNINSTALL SONAME 'metadata_lock_info'")
    try:
        yield
    finally:
        if had:
            my.admin_rows("INSTALL SONAME 'metadata_lock_info'")


def spawn_holder(
    started: list[subprocess.Popen[str]], script: str, *args: str
) -> tuple[subprocess.Popen[str], int]:
    """A client process running `script` (a real PyMySQL session that takes a lock),
    returned once it has printed its connection's thread id; `started` keeps it
    for the fixture to kill."""
    process = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    started.append(process)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.strip(), f"the holder process said nothing (exit {process.wait()})"
    return process, int(line)


def past_last_change(endpoint: Endpoint, database: str, table: str) -> None:
    """Wait until the server's clock is past the second of the table's last change:
    a lock row's version on MySQL is its table's UPDATE_TIME, whole seconds, and a
    look within that second cannot tell a later change from it (its break is
    refused, rightly). Waits on the server's own clock, not a sleep."""

    def past() -> bool:
        with connect(endpoint) as conn, conn.cursor() as cursor:
            cursor.execute(
                "SELECT UPDATE_TIME IS NULL OR UPDATE_TIME < NOW()"
                " FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (database, table),
            )
            row = cursor.fetchone()
        return bool(row and row[0])

    wait_until(past, f"the server's clock to pass {database}.{table}'s last change", every=0.1)
