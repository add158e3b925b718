"""Unix-socket clients against a real MariaDB: a holder's client process over the
server's socket is named when it is the only one connected (alive, then killed),
and never guessed between two."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from lockwatch.clock import SystemClock
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.mysql.clients import unix_clients
from lockwatch.sources.mysql.dsn import Endpoint, parse
from lockwatch.sources.mysql.facts import MyLock
from lockwatch.sources.mysql.server import MyServer
from tests.mysql.conftest import GROUP, MyHarness, spawn_holder, wait_until

pytestmark = [pytest.mark.mysql, GROUP]

HOLDER = """
import sys, pymysql
conn = pymysql.connect(unix_socket=sys.argv[1], user=sys.argv[2], database=sys.argv[3],
                       autocommit=True)
cursor = conn.cursor()
cursor.execute("BEGIN")
cursor.execute("SELECT * FROM " + sys.argv[4] + " WHERE id = %s FOR UPDATE", (int(sys.argv[5]),))
print(conn.thread_id(), flush=True)
if sys.argv[6] == "busy":
    cursor.execute("SELECT SLEEP(30)")
else:
    sys.stdin.read()
"""


@pytest.fixture
def sock(my: MyHarness) -> str:
    ((path,),) = my.admin_rows("SELECT @@socket")
    if not path or not os.path.exists(str(path)):
        pytest.skip(f"the server's socket {path!r} is not on this host")
    return str(path)


@pytest.fixture
def holders(my: MyHarness, sock: str) -> Iterator[Any]:
    started: list[subprocess.Popen[str]] = []
    database = my.endpoint.database or "test"

    def start(table: str, row: int, how: str = "idle") -> tuple[subprocess.Popen[str], int]:
        return spawn_holder(started, HOLDER, sock, my.endpoint.user, database, table, str(row), how)

    yield start
    for process in started:
        process.kill()
        process.wait()


def endpoint(my: MyHarness, sock: str) -> Endpoint:
    return parse(f"mysql://{my.endpoint.user}@/{my.endpoint.database or 'test'}?socket={sock}", {})


def held(server: MyServer, thread: int) -> list[tuple[Lock, Verdict]]:
    polled = server.poll()
    assert polled.locks is not None, polled.statuses
    return [
        (lock, evaluate(lock, StaticProcesses(), SystemClock(), "h"))
        for lock in polled.locks
        if isinstance(lock.facts, MyLock)
        and lock.facts.granted
        and lock.facts.session.thread_id == thread
    ]


def only_client(sock: str) -> None:
    """Skip when some other program is connected over the socket: then no client
    can be named, by design."""
    found = unix_clients([sock], None)
    if found is None:
        pytest.skip("the server's unix connections cannot be read here (root needed)")
    if len(found.pids()) != 1:
        pytest.skip(f"other programs are connected over {sock}: {sorted(found.pids())}")


def present(my: MyHarness, thread: int) -> bool:
    rows = my.admin_rows(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s", (thread,)
    )
    return bool(rows[0][0])


def test_the_only_unix_client_is_named_alive_then_gone(
    my: MyHarness, sock: str, holders: Any
) -> None:
    table = my.table("unix")
    my.admin_rows(f"INSERT INTO {table} VALUES (1, 0), (2, 0)")
    idle, idle_thread = holders(table, 1)
    only_client(sock)
    waiter = my.session()
    my.run(waiter, "SET innodb_lock_wait_timeout = 20")
    first = my.background(waiter, f"SELECT * FROM {table} WHERE id = 1 FOR UPDATE")
    my.waiting(waiter)
    time.sleep(0.2)
    server = MyServer(endpoint(my, sock), idle_after=0.1)
    try:
        ((lock, verdict),) = held(server, idle_thread)
        assert isinstance(lock.facts, MyLock)
        client = lock.facts.session.client_process
        assert client is not None and client.alive and client.pid == idle.pid
        assert verdict.state is State.ACTIVE and "client_alive" in verdict.codes

        # Killed while idle: the server reads the socket's end and ends the session.
        os.kill(idle.pid, signal.SIGKILL)
        idle.wait()
        wait_until(lambda: not present(my, idle_thread), f"thread {idle_thread} to end")
        first.wait()  # its lock went with it: the waiter has the row
        time.sleep(0.2)  # the InnoDB tables are a cache, refreshed after ~100 ms unread
        assert held(server, idle_thread) == []

        # Killed while busy: the server holds on, and its client is known gone.
        busy, busy_thread = holders(table, 2, "busy")
        blocked = my.session()
        my.run(blocked, "SET innodb_lock_wait_timeout = 20")
        my.background(blocked, f"SELECT * FROM {table} WHERE id = 2 FOR UPDATE")
        my.waiting(blocked)
        ((lock, verdict),) = held(server, busy_thread)
        assert isinstance(lock.facts, MyLock)
        client = lock.facts.session.client_process
        assert client is not None and client.alive and client.pid == busy.pid
        os.kill(busy.pid, signal.SIGKILL)
        busy.wait()
        before = present(my, busy_thread)
        found = held(server, busy_thread)
        after = present(my, busy_thread)
        if before and after:
            ((lock, verdict),) = found
            assert isinstance(lock.facts, MyLock)
            client = lock.facts.session.client_process
            assert client is not None and not client.alive and client.pid == busy.pid
            assert verdict.state is State.STALE and "client_dead" in verdict.codes
        elif not before:
            assert found == []
        my.admin_rows(f"KILL {busy_thread}")
    finally:
        server.close()


def test_two_unix_clients_are_never_guessed_between(my: MyHarness, sock: str, holders: Any) -> None:
    table = my.table("unix2")
    my.admin_rows(f"INSERT INTO {table} VALUES (1, 0), (2, 0)")
    _, first = holders(table, 1)
    _, second = holders(table, 2)
    for row in (1, 2):
        waiter = my.session()
        my.run(waiter, "SET innodb_lock_wait_timeout = 20")
        my.background(waiter, f"SELECT * FROM {table} WHERE id = {row} FOR UPDATE")
        my.waiting(waiter)
    time.sleep(0.2)
    server = MyServer(endpoint(my, sock), idle_after=0.1)
    try:
        for thread in (first, second):
            ((lock, verdict),) = held(server, thread)
            assert isinstance(lock.facts, MyLock)
            assert lock.facts.session.client_process is None
            assert verdict.state is State.STALE
            assert {"idle_in_transaction", "inferred"} <= set(verdict.codes)
    finally:
        server.close()
