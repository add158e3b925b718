"""A lock's holder is shown as it is once it holds the lock, never as it was
before (the CI failure of test_history_isolation's DDL queue: the holder of
AccessShareLock recorded `idle`, its query its setup's `SET application_name`,
though it holds that lock only once it is `idle in transaction` after its
SELECT). PostgreSQL reads every session's status once per transaction, at the
first look at pg_stat_activity; a poll's statements run in one transaction, so
sessions read before the locks (or a look within the locks' statement) could be
older than the locks. Real sessions on a real server."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest
from psycopg.rows import tuple_row

from lockwatch.model.lock import Lock
from lockwatch.sources.postgres.facts import PgLock
from lockwatch.sources.postgres.query import lock_query
from lockwatch.sources.postgres.source import read_answer
from tests.postgres.conftest import PgHarness, monitor, poll_ok, wait_until, waiting_on_lock

pytestmark = pytest.mark.postgres


def on_table(locks: list[Lock], pid: int, table: str) -> PgLock:
    found = [
        lock.facts
        for lock in locks
        if isinstance(lock.facts, PgLock)
        and lock.facts.backend.pid == pid
        and lock.facts.locktype == "relation"
        and table in lock.name
    ]
    assert found, f"no lock of pid {pid} on {table}"  # the table's, and its index's
    return found[0]


async def test_the_next_poll_shows_the_holder_in_its_transaction(pg: PgHarness) -> None:
    table = pg.table()
    holder = pg.session("billing-api")
    h = holder.info.backend_pid
    holder.execute("SET application_name = 'billing-api'")
    async with monitor(pg.dsn, all_rows=True, client_finder=None) as source:
        before = await poll_ok(source)
        assert before.sessions[h]["state"] == "idle"
        assert str(before.sessions[h]["query"]).startswith("SET application_name")
        holder.execute("BEGIN")
        holder.execute(f"SELECT * FROM {table}")
        after = await poll_ok(source)
    holder.execute("COMMIT")
    assert after.sessions[h]["state"] == "idle in transaction"
    backend = on_table(after.locks, h, table).backend
    assert backend.state == "idle in transaction"
    assert backend.query == f"SELECT * FROM {table}"
    assert backend.application == "billing-api"


async def test_sessions_are_read_after_the_locks_whatever_was_looked_at_before(
    pg: PgHarness,
) -> None:
    """The poll is held (on an advisory lock the test holds) after a look at
    pg_stat_activity in its transaction and before it reads the locks; meanwhile
    the holder takes its lock. The sessions the poll answers must show it in its
    transaction, with the query that took the lock."""
    table = pg.table()
    holder = pg.session("billing-api")
    h = holder.info.backend_pid
    holder.execute("SET application_name = 'billing-api'")
    key = (-7342, int(uuid.uuid4().int % 2**31))
    pg.admin.execute("SELECT pg_advisory_lock(%s, %s)", key)
    # Two results ahead of the poll's own: the look, and the stall.
    ahead = (
        "SELECT count(*) FROM pg_catalog.pg_stat_activity;"
        f" SELECT pg_catalog.pg_advisory_xact_lock({key[0]}, {key[1]});"
    )
    query = ahead + lock_query(pg.server_version, all_rows=True)
    conn = await psycopg.AsyncConnection.connect(pg.dsn, autocommit=True)
    try:
        cursor = conn.cursor(row_factory=tuple_row)
        polling = asyncio.ensure_future(cursor.execute(query))
        monitor_pid = conn.info.backend_pid
        await asyncio.to_thread(
            wait_until,
            lambda: polling.done() or waiting_on_lock(pg.admin, monitor_pid),
            "the poll to wait on the test's advisory lock",
        )
        assert not polling.done(), polling
        holder.execute("BEGIN")
        holder.execute(f"SELECT * FROM {table}")
        pg.admin.execute("SELECT pg_advisory_unlock(%s, %s)", key)
        await polling
        assert cursor.nextset() and cursor.nextset()  # past the look and the stall
        rows, pids, activity, _, _ = await read_answer(cursor)
    finally:
        await conn.close()
        holder.execute("ROLLBACK")
    assert h in pids
    assert any(row["pid"] == h and row["relation_name"] == table for row in rows)
    session = next(s for s in activity if s["pid"] == h)
    assert session["state"] == "idle in transaction"
    assert session["query"] == f"SELECT * FROM {table}"
