"""A stale holder stays listed once nobody waits on it (issue 46, item 2), on
MariaDB as on PostgreSQL: a thread idle in a transaction past the idle limit,
its client out of sight, was listed only while a waiter named its row lock.
Real sessions on a real server."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from lockwatch.clock import SystemClock
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, evaluate
from lockwatch.sources.mysql.dsn import parse
from lockwatch.sources.mysql.facts import MyLock
from lockwatch.sources.mysql.server import MyServer
from tests.mysql.conftest import GROUP, MyHarness, tid, wait_until

pytestmark = [pytest.mark.mysql, GROUP]

IDLE_AFTER = 0.2


def held_by(locks: list[Lock] | None, thread: int) -> list[Lock]:
    assert locks is not None
    return [
        lock
        for lock in locks
        if isinstance(lock.facts, MyLock)
        and lock.facts.granted
        and lock.facts.session.thread_id == thread
    ]


def idle_past_limit(my: MyHarness, conn: pymysql.connections.Connection[Any]) -> None:
    """Wait, on the server's own clock, until the session has idled past the limit."""

    def idle() -> bool:
        rows = my.admin_rows(
            "SELECT COMMAND, TIME_MS FROM information_schema.PROCESSLIST WHERE ID = %s",
            (tid(conn),),
        )
        return bool(rows) and rows[0][0] == "Sleep" and float(rows[0][1]) > IDLE_AFTER * 2000

    wait_until(idle, f"thread {tid(conn)} to idle past {IDLE_AFTER} s", every=0.05)


def test_stale_row_lock_holder_stays_after_its_waiter_is_cancelled(my: MyHarness) -> None:
    table = my.table("stays")
    my.admin_rows(f"INSERT INTO {table} VALUES (1, 0)")
    holder, waiter = my.session(), my.session()
    my.run(holder, "BEGIN")
    my.run(holder, f"UPDATE {table} SET v = 1 WHERE id = 1")
    blocked = my.background(waiter, f"UPDATE {table} SET v = 2 WHERE id = 1")
    my.waiting(waiter)
    idle_past_limit(my, holder)
    # Its client out of sight (as from another host): stale by idle time.
    server = MyServer(parse(my.dsn, {}), idle_after=IDLE_AFTER, client_finder=None)
    try:
        before = held_by(server.poll().locks, tid(holder))
        assert len(before) == 1 and ":innodb_row:" in before[0].id, [x.id for x in before]
        my.admin_rows(f"KILL QUERY {tid(waiter)}")
        blocked.wait()
        after: list[Lock] = []

        def settled() -> bool:
            # The INNODB_* tables are a cache the server refreshes only when not
            # read for ~100 ms: polled until it no longer shows the cancelled wait.
            after[:] = held_by(server.poll().locks, tid(holder))
            return (
                not after or not isinstance(after[0].facts, MyLock) or not after[0].facts.blocking
            )

        wait_until(settled, "the server to show the wait cancelled", every=0.15)
    finally:
        server.close()
    # Nobody waits on it now: it stays, the same lock, still stale.
    assert [lock.id for lock in after] == [before[0].id]
    assert after[0].name == before[0].name
    facts = after[0].facts
    assert isinstance(facts, MyLock) and facts.blocking == ()
    assert facts.mode == "X"
    verdict = evaluate(after[0], StaticProcesses(), SystemClock(), "h")
    assert verdict.state is State.STALE, verdict
    assert {"idle_in_transaction", "inferred"} <= set(verdict.codes)


def test_stale_idle_holder_is_listed_by_its_metadata_lock_at_first_look(
    my: MyHarness, metadata_lock_info: None
) -> None:
    table = my.table("first")
    my.admin_rows(f"INSERT INTO {table} VALUES (1, 0)")
    holder = my.session()
    my.run(holder, "BEGIN")
    my.run(holder, f"UPDATE {table} SET v = 1 WHERE id = 1")
    idle_past_limit(my, holder)
    for find, listed in ((False, 1), (True, 0)):
        # Unseen client: stale, listed. Its client (this test) seen alive: not
        # stale, nobody waits: not listed.
        finder = {} if find else {"client_finder": None}
        server = MyServer(parse(my.dsn, {}), idle_after=IDLE_AFTER, **finder)  # type: ignore[arg-type]
        try:
            found = held_by(server.poll().locks, tid(holder))
        finally:
            server.close()
        assert len(found) == listed, [lock.id for lock in found]
    database = my.admin_rows("SELECT DATABASE()")[0][0]
    server = MyServer(parse(my.dsn, {}), idle_after=IDLE_AFTER, client_finder=None)
    try:
        (lock,) = held_by(server.poll().locks, tid(holder))
    finally:
        server.close()
    assert lock.name == f"{database}.{table}" and ":metadata_lock:" in lock.id
    verdict = evaluate(lock, StaticProcesses(), SystemClock(), "h")
    assert verdict.state is State.STALE and "idle_in_transaction" in verdict.codes
