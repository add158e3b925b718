"""A stale holder stays listed once nobody waits on it (issue 46, item 2): a
session idle in a transaction past the idle limit, its client out of sight,
was listed only while a waiter named it, and vanished from the default view
when its waiters were cancelled. Real sessions on a real server."""

from __future__ import annotations

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, evaluate
from tests.conftest import NOW
from tests.facts_of import PgLock
from tests.postgres.conftest import PgHarness, monitor, poll_ok

pytestmark = pytest.mark.postgres


def held_by(locks: list[Lock], pid: int) -> list[Lock]:
    return [
        lock
        for lock in locks
        if isinstance(lock.facts, PgLock) and lock.facts.backend.pid == pid and lock.facts.granted
    ]


async def test_stale_idle_in_transaction_holder_stays_after_its_waiters_are_cancelled(
    pg: PgHarness,
) -> None:
    table = pg.table(rows=1)
    holder, waiter = pg.sessions("billing-worker", "migrate")
    h = holder.info.backend_pid
    holder.execute("BEGIN")
    holder.execute(f"SELECT * FROM {table} WHERE id = 1 FOR UPDATE")
    blocked = pg.block(waiter, f"ALTER TABLE {table} ADD COLUMN x int")
    pg.wait_state(h, "idle in transaction", longer_than=0.3)
    clock = FrozenClock(NOW)

    # Its client out of sight (as from another host): stale by idle time.
    async with monitor(pg.dsn, idle_after=0.2, clock=clock, client_finder=None) as source:
        snapshot = await poll_ok(source)
        before = held_by(snapshot.locks, h)
        source.remember(snapshot)  # as the dashboard's feed does after each poll
        assert len(before) == 1, [lock.id for lock in before]
        pg.scalar("SELECT pg_cancel_backend(%s)", (blocked.pid,))
        blocked.wait_done()
        after = held_by((await poll_ok(source)).locks, h)
    # Nobody waits on it now; it stays, the same row, still stale.
    assert [lock.id for lock in after] == [before[0].id]
    verdict = evaluate(after[0], StaticProcesses(), clock, "testhost")
    assert verdict.state is State.STALE, verdict
    assert verdict.codes[:2] == ("idle_in_transaction", "inferred")

    # A one-shot look (no memory of earlier polls) lists it too: one row for the session.
    async with monitor(pg.dsn, idle_after=0.2, clock=clock, client_finder=None) as source:
        fresh = held_by((await poll_ok(source)).locks, h)
    assert len(fresh) == 1 and fresh[0].name == f"public.{table}", [x.id for x in fresh]

    # Its client seen alive (this test): not stale, nobody waits: not listed, as before.
    async with monitor(pg.dsn, idle_after=0.2, clock=clock) as source:
        assert held_by((await poll_ok(source)).locks, h) == []
    # Under the default limit (60 s) it is not idle long enough to be stale.
    async with monitor(pg.dsn, clock=clock, client_finder=None) as source:
        assert held_by((await poll_ok(source)).locks, h) == []
