"""The Postgres source against a real server, with real contention.

Every scenario opens its own sessions (see conftest `PgHarness`), waits on server-side
conditions (pg_stat_activity) rather than sleeping, and looks only at the locks of its own
backends: the server may be shared with other work.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from lockwatch.clock import FrozenClock, SystemClock
from lockwatch.model.blocking import BlockingTree, BlockNode, build
from lockwatch.model.compact import Row
from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.postgres.dsn import display_name
from lockwatch.sources.postgres.facts import (
    INSUFFICIENT_PRIVILEGE,
    AdvisoryKey,
    AdvisoryNames,
    string_key,
)
from lockwatch.sources.postgres.source import PgSnapshot, PgSource, describe
from tests.conftest import NOW
from tests.facts_of import PgLock, pg_of
from tests.postgres.conftest import (
    WAIT_S,
    Cluster,
    PgHarness,
    connect,
    free_port,
    monitor,
    poll_ok,
    probe,
    wait_until,
)

pytestmark = pytest.mark.postgres

HOST = "testhost"
INT8_MAX, INT8_MIN = 2**63 - 1, -(2**63)
INT4_MAX, INT4_MIN = 2**31 - 1, -(2**31)


# --------------------------------------------------------------------------- helpers


def locks_of(snapshot: PgSnapshot, *pids: int) -> list[Lock]:
    return [
        lock
        for lock in snapshot.locks
        if isinstance(lock.facts, PgLock) and lock.facts.backend.pid in pids
    ]


def one(locks: Iterable[Lock], **want: object) -> Lock:
    """The single lock matching every criterion: pid, locktype, granted, mode, key, name."""

    def field(lock: Lock, name: str) -> object:
        assert isinstance(lock.facts, PgLock)
        if name == "pid":
            return pg_of(lock).backend.pid
        if name == "key":
            return pg_of(lock).advisory_key
        if name == "name":
            return lock.name
        return getattr(pg_of(lock), name)

    pool = list(locks)
    found = [lock for lock in pool if all(field(lock, k) == v for k, v in want.items())]
    assert len(found) == 1, f"{len(found)} locks match {want} among {[lk.id for lk in pool]}"
    return found[0]


def verdict(lock: Lock, clock: FrozenClock | SystemClock) -> Verdict:
    return evaluate(lock, StaticProcesses(), clock, HOST)


def tree_of(snapshot: PgSnapshot, pids: Iterable[int]) -> BlockingTree:
    """The blocking tree of these backends: {waiter: blocked_by} over their waiting rows."""
    ours = set(pids)
    waits_on: dict[int | str, set[int | str]] = {}
    for lock in snapshot.locks:
        pg = lock.facts
        if not isinstance(pg, PgLock) or pg.granted or pg.backend.pid not in ours:
            continue
        waits_on.setdefault(pg.backend.pid, set()).update(pg.blocked_by)
    return build(waits_on)


def root(tree: BlockingTree, node_id: int) -> BlockNode:
    found = [r for r in tree.roots if r.id == node_id]
    assert found, f"{node_id} is not a root of {tree.as_json()}"
    return found[0]


def adv(form_key: int | tuple[int, int]) -> AdvisoryKey:
    if isinstance(form_key, tuple):
        return AdvisoryKey("pair", key1=form_key[0], key2=form_key[1])
    return AdvisoryKey("bigint", key=form_key)


def client_of(pg: PgHarness, pid: int) -> str:
    return str(pg.activity(pid, "COALESCE(host(client_addr), 'local')")[0])


def assert_holder(lock: Lock, pg: PgHarness, pid: int, application: str, query: str) -> None:
    """The session fields of a record, against what pg_stat_activity says of `pid`."""
    assert isinstance(lock.facts, PgLock)
    backend = pg_of(lock).backend
    client = client_of(pg, pid)
    assert backend.pid == pid
    assert backend.user == pg.user
    assert backend.application == application
    assert backend.client == client
    assert backend.query == query
    assert backend.backend_type == "client backend"
    assert backend.prepared_gid is None
    assert lock.source == "postgres"
    assert lock.format == "pg_locks"
    assert lock.holder.pid == pid
    assert lock.holder.host == client
    assert lock.holder.actor == pg.user
    assert lock.holder.session == application
    assert lock.holder.operation == query
    # pg_locks has no database for transaction ids: the holder session's is shown.
    assert pg_of(lock).database == pg.dbname


# --------------------------------------------------------------------------- advisory locks


async def test_bigint_advisory_keys_held_and_awaited(pg: PgHarness, clock: FrozenClock) -> None:
    cache = string_key("refresh-cache")
    holder, waiter, waiter2 = pg.sessions("holder", "waiter", "waiter2")
    h, w1, w2 = (c.info.backend_pid for c in (holder, waiter, waiter2))
    hold = (
        f"SELECT pg_advisory_lock(-5), pg_advisory_lock({INT8_MAX}),"
        f" pg_advisory_lock({INT8_MIN}), pg_advisory_lock_shared({cache})"
    )
    holder.execute(hold)
    # The sleep comes before the lock wait: query_start and waitstart differ by 0.3 s.
    wait_minus5 = "SELECT pg_sleep(0.3), pg_advisory_lock(-5)"
    pg.block(waiter, wait_minus5)
    wait_min = f"SELECT pg_advisory_lock({INT8_MIN})"
    pg.block(waiter2, wait_min)

    names = AdvisoryNames.build(strings=["refresh-cache"])
    async with monitor(pg.dsn, names=names, clock=clock) as source:
        snapshot = await poll_ok(source)
    age_after = float(
        pg.scalar(
            "SELECT EXTRACT(epoch FROM clock_timestamp() - waitstart) FROM pg_locks"
            " WHERE pid = %s AND NOT granted",
            (w1,),
        )
        if pg.server_version >= 140000
        else 0.0
    )
    assert snapshot.polled_at == NOW
    assert snapshot.server == source.name == display_name(pg.dsn)

    held = locks_of(snapshot, h)
    assert len(held) == 4, [lock.id for lock in held]  # advisory only: an idle session
    minus5 = one(held, key=adv(-5))
    top = one(held, key=adv(INT8_MAX))
    bottom = one(held, key=adv(INT8_MIN))
    shared = one(held, key=adv(cache))
    for lock, name in ((minus5, "-5"), (top, str(INT8_MAX)), (bottom, str(INT8_MIN))):
        assert isinstance(lock.facts, PgLock) and lock.facts.advisory_key is not None
        assert pg_of(lock).locktype == "advisory"
        assert pg_of(lock).granted is True
        assert pg_of(lock).mode == "ExclusiveLock"
        assert lock.name == name
        assert lock.facts.advisory_key.as_json() == {"form": "bigint", "key": int(name)}
        assert pg_of(lock).server == source.name
        assert_holder(lock, pg, h, pg.application("holder"), hold)
    assert isinstance(shared.facts, PgLock) and shared.facts.mode == "ShareLock"
    assert shared.name == "refresh-cache"
    assert pg_of(shared).advisory_key == AdvisoryKey("bigint", key=cache)

    backend = pg_of(minus5).backend if pg_of(minus5) else None
    assert backend is not None
    assert backend.state == "idle"
    assert backend.xact_start is None  # autocommit, between statements
    assert backend.query_start is not None and backend.state_since is not None
    assert backend.query_start <= backend.state_since <= NOW
    assert (backend.wait_event_type, backend.wait_event) == ("Client", "ClientRead")

    # Both waiters wait on the holder; only w1 waits on -5 itself.
    assert isinstance(minus5.facts, PgLock) and minus5.facts.blocking == tuple(sorted((w1, w2)))
    assert pg_of(minus5).blocking_here == (w1,)
    assert isinstance(bottom.facts, PgLock) and bottom.facts.blocking_here == (w2,)
    assert isinstance(top.facts, PgLock) and top.facts.blocking_here == ()
    assert pg_of(minus5).blocked_by == ()
    v = verdict(minus5, clock)
    assert v.state is State.ACTIVE
    assert v.codes == ("blocking",)
    assert f"pid {w1}" in v.reasons[0].message
    assert v.next_change_at == backend.state_since + timedelta(seconds=60)
    assert verdict(top, clock).codes == ()
    assert verdict(top, clock).state is State.ACTIVE

    waiting = locks_of(snapshot, w1)
    assert len(waiting) == 1, [lock.id for lock in waiting]  # its own virtualxid is skipped
    lock = waiting[0]
    assert isinstance(lock.facts, PgLock)
    assert pg_of(lock).locktype == "advisory"
    assert pg_of(lock).granted is False
    assert pg_of(lock).mode == "ExclusiveLock"
    assert lock.name == "-5"
    assert pg_of(lock).advisory_key == adv(-5)
    assert pg_of(lock).blocked_by == (h,)
    assert pg_of(lock).blocking == ()
    assert_holder(lock, pg, w1, pg.application("waiter"), wait_minus5)
    assert pg_of(lock).backend.state == "active"
    assert (pg_of(lock).backend.wait_event_type, pg_of(lock).backend.wait_event) == (
        "Lock",
        "advisory",
    )
    assert (
        isinstance(lock.facts, PgLock)
        and lock.facts.wait_start is not None
        and lock.facts.backend.query_start is not None
    )
    waited_at_poll = (NOW - lock.facts.wait_start).total_seconds()
    if pg.server_version >= 140000:
        # From pg_locks.waitstart, not from query_start (0.3 s earlier).
        assert lock.facts.wait_start - lock.facts.backend.query_start >= timedelta(seconds=0.25)
        assert 0 <= waited_at_poll <= age_after
    assert isinstance(lock.facts, PgLock) and lock.acquired_at == lock.facts.wait_start

    clock.advance(90)
    v = verdict(lock, clock)
    waited = (clock.now() - lock.facts.wait_start).total_seconds()
    assert v.state is State.WAITING
    assert v.codes == ("waiting",)
    assert v.age_seconds == pytest.approx(waited)
    assert f"waiting for {duration(waited)}" in v.reasons[0].message
    assert f"blocked by pid {h}" in v.reasons[0].message

    other = one(locks_of(snapshot, w2), granted=False)
    assert other.name == str(INT8_MIN)
    assert isinstance(other.facts, PgLock) and other.facts.blocked_by == (h,)
    assert_holder(other, pg, w2, pg.application("waiter2"), wait_min)


async def test_pair_advisory_keys_held_and_awaited(pg: PgHarness, clock: FrozenClock) -> None:
    holder, waiter, waiter2 = pg.sessions("holder", "waiter", "waiter2")
    h, w1, w2 = (c.info.backend_pid for c in (holder, waiter, waiter2))
    # (1 << 32) + 42 has classid 1, objid 42 like the pair (1, 42): objsubid tells them apart.
    alias = (1 << 32) + 42
    hold = (
        f"SELECT pg_advisory_lock(1, 42), pg_advisory_lock(1, -42),"
        f" pg_advisory_lock(-1, {INT4_MIN}), pg_advisory_lock({INT4_MAX}, -7),"
        f" pg_advisory_lock({alias})"
    )
    holder.execute(hold)
    pg.block(waiter, "SELECT pg_advisory_lock(1, 42)")
    pg.block(waiter2, f"SELECT pg_advisory_lock(-1, {INT4_MIN})")

    names = AdvisoryNames.build(namespaces={1: "agent"})
    async with monitor(pg.dsn, names=names, clock=clock) as source:
        snapshot = await poll_ok(source)

    held = locks_of(snapshot, h)
    assert len(held) == 5, [lock.id for lock in held]
    expected = {
        (1, 42): "agent:42",
        (1, -42): "agent:-42",
        (-1, INT4_MIN): f"-1:{INT4_MIN}",
        (INT4_MAX, -7): f"{INT4_MAX}:-7",
    }
    for (key1, key2), name in expected.items():
        lock = one(held, key=adv((key1, key2)))
        assert isinstance(lock.facts, PgLock) and lock.facts.advisory_key is not None
        assert lock.facts.advisory_key.as_json() == {"form": "pair", "key1": key1, "key2": key2}
        assert lock.name == name
        assert pg_of(lock).granted is True and pg_of(lock).mode == "ExclusiveLock"
        assert_holder(lock, pg, h, pg.application("holder"), hold)
    aliased = one(held, key=adv(alias))
    assert aliased.name == str(alias)
    assert isinstance(aliased.facts, PgLock) and aliased.facts.advisory_key is not None
    assert aliased.facts.advisory_key.as_json() == {"form": "bigint", "key": alias}

    agent42 = one(held, key=adv((1, 42)))
    assert isinstance(agent42.facts, PgLock) and agent42.facts.blocking_here == (w1,)
    assert verdict(agent42, clock).codes == ("blocking",)
    assert pg_of(one(held, key=adv((-1, INT4_MIN)))).blocking_here == (w2,)
    assert pg_of(one(held, key=adv(alias))).blocking_here == ()

    for pid, key, name in ((w1, (1, 42), "agent:42"), (w2, (-1, INT4_MIN), f"-1:{INT4_MIN}")):
        lock = one(locks_of(snapshot, pid), granted=False)
        assert isinstance(lock.facts, PgLock)
        assert pg_of(lock).advisory_key == adv(key)
        assert lock.name == name
        assert pg_of(lock).blocked_by == (h,)
        v = verdict(lock, clock)
        assert v.state is State.WAITING and v.codes == ("waiting",)
        assert f"blocked by pid {h}" in v.reasons[0].message


# --------------------------------------------------------------------------- row locks


async def test_row_lock_chain_with_idle_in_transaction_holder(
    pg: PgHarness, clock: FrozenClock
) -> None:
    table = pg.table(rows=1)
    ctid = pg.scalar(
        sql.SQL("SELECT ctid::text FROM {} WHERE id = 1").format(sql.Identifier(table))
    )
    holder, first, second = pg.sessions("holder", "first", "second")
    h, w1, w2 = (c.info.backend_pid for c in (holder, first, second))
    update = f"UPDATE {table} SET v = v + 1 WHERE id = 1"
    holder.execute("BEGIN")
    holder.execute(update)
    # The first waiter takes the tuple lock and waits for the holder's transaction;
    # the second waits for that tuple lock.
    first_update = f"UPDATE {table} SET v = v + 10 WHERE id = 1"
    pg.block(first, first_update)
    second_update = f"UPDATE {table} SET v = v + 100 WHERE id = 1"
    pg.block(second, second_update)
    pg.wait_state(h, "idle in transaction", longer_than=0.3)
    xid = str(pg.scalar("SELECT backend_xid::text FROM pg_stat_activity WHERE pid = %s", (h,)))

    async with monitor(pg.dsn, idle_after=0.2, clock=clock) as source:
        snapshot = await poll_ok(source)
    # As if its client were on another host: nothing to check its idling against.
    async with monitor(pg.dsn, idle_after=0.2, clock=clock, client_finder=None) as source:
        unseen = await poll_ok(source)

    # The holder: only the row it blocks on; its uncontended table lock is left out.
    held = locks_of(snapshot, h)
    assert len(held) == 1, [lock.id for lock in held]
    xact = held[0]
    assert isinstance(xact.facts, PgLock)
    assert (pg_of(xact).locktype, pg_of(xact).mode, pg_of(xact).granted) == (
        "transactionid",
        "ExclusiveLock",
        True,
    )
    assert xact.name == f"xid {xid}"
    assert pg_of(xact).advisory_key is None
    assert pg_of(xact).blocking_here == (w1,)
    assert pg_of(xact).blocking == (w1,)
    assert_holder(xact, pg, h, pg.application("holder"), update)
    backend = pg_of(xact).backend
    assert backend.state == "idle in transaction"
    assert backend.xact_start is not None and backend.query_start is not None
    assert backend.state_since is not None
    assert backend.xact_start <= backend.query_start <= backend.state_since <= NOW
    assert (NOW - backend.state_since).total_seconds() > 0.3
    # Its client is this test, alive: idling alone does not make it stale.
    assert backend.client_process is not None and backend.client_process.alive
    assert backend.client_process.pid == os.getpid()
    v = verdict(xact, clock)
    assert v.state is State.ACTIVE
    assert v.codes == ("idle_in_transaction", "client_alive", "blocking")
    assert "idle in transaction" in v.reasons[0].message
    # With its client out of sight, idle time is all there is: stale, by inference.
    (remote,) = locks_of(unseen, h)
    v = verdict(remote, clock)
    assert v.state is State.STALE
    assert v.codes == ("idle_in_transaction", "inferred", "blocking")
    # The same holder under the default threshold (60 s) is not stale yet.
    assert isinstance(remote.facts, PgLock)
    patient = dataclasses.replace(remote, facts=dataclasses.replace(remote.facts, idle_after=60.0))
    v = verdict(patient, clock)
    assert v.state is State.ACTIVE and v.codes == ("blocking",)
    assert isinstance(remote.facts, PgLock) and remote.facts.backend.state_since is not None
    assert v.next_change_at == remote.facts.backend.state_since + timedelta(seconds=60)
    # No grant time: bounds only. Its row lock is its transaction's, and it has
    # held it at least since the session went idle.
    assert xact.acquired_at is None and verdict(xact, clock).age_seconds is None
    assert pg_of(xact).level == "transaction"
    assert pg_of(xact).known_held_at == backend.state_since
    assert pg_of(xact).acquired_after == backend.xact_start

    # The first waiter: waits on the holder's xid, holds the tuple lock the second wants.
    waits = one(locks_of(snapshot, w1), granted=False)
    assert isinstance(waits.facts, PgLock)
    assert (pg_of(waits).locktype, pg_of(waits).mode) == ("transactionid", "ShareLock")
    assert waits.name == f"xid {xid}"
    assert pg_of(waits).blocked_by == (h,)
    assert (pg_of(waits).backend.wait_event_type, pg_of(waits).backend.wait_event) == (
        "Lock",
        "transactionid",
    )
    assert_holder(waits, pg, w1, pg.application("first"), first_update)
    assert verdict(waits, clock).state is State.WAITING
    tuple_lock = one(locks_of(snapshot, w1), granted=True)
    assert isinstance(tuple_lock.facts, PgLock)
    assert (pg_of(tuple_lock).locktype, pg_of(tuple_lock).mode) == ("tuple", "ExclusiveLock")
    assert tuple_lock.name == f"public.{table} {ctid}"
    assert pg_of(tuple_lock).blocking_here == (w2,)
    assert verdict(tuple_lock, clock).codes == ("blocking",)

    # The second waiter: waits on the tuple lock of the first.
    behind = locks_of(snapshot, w2)
    assert len(behind) == 1, [lock.id for lock in behind]
    assert isinstance(behind[0].facts, PgLock)
    assert (pg_of(behind[0]).locktype, pg_of(behind[0]).mode, pg_of(behind[0]).granted) == (
        "tuple",
        "ExclusiveLock",
        False,
    )
    assert behind[0].name == f"public.{table} {ctid}"
    assert pg_of(behind[0]).blocked_by == (w1,)
    assert pg_of(behind[0]).backend.wait_event == "tuple"

    tree = tree_of(snapshot, (h, w1, w2))
    top = root(tree, h)
    assert [n.id for n in top.waiters] == [w1]
    assert [n.id for n in top.waiters[0].waiters] == [w2]
    assert (top.direct, top.total) == (1, 2)
    assert tree.cycles == ()


async def test_idle_session_still_holding_advisory_lock_is_stale(
    pg: PgHarness, clock: FrozenClock
) -> None:
    leaked, in_xact, bystander = pg.sessions("leaked", "in-xact", "bystander")
    p, x, b = (c.info.backend_pid for c in (leaked, in_xact, bystander))
    leaked.execute("SELECT pg_advisory_lock(1, 7)")
    in_xact.execute("BEGIN")
    in_xact.execute("SELECT pg_advisory_xact_lock(1, 8)")
    bystander.execute("SELECT 1")
    pg.wait_state(p, "idle", longer_than=0.3)
    pg.wait_state(x, "idle in transaction", longer_than=0.3)
    pg.wait_state(b, "idle", longer_than=0.3)

    async with monitor(pg.dsn, idle_after=0.2, clock=clock, client_finder=None) as source:
        snapshot = await poll_ok(source)
    async with monitor(pg.dsn, idle_after=0.2, clock=clock) as seeing_source:
        seeing = await poll_ok(seeing_source)
    async with monitor(pg.dsn, clock=clock, client_finder=None) as patient_source:
        patient = await poll_ok(patient_source)

    lock = one(locks_of(snapshot, p), key=adv((1, 7)))
    assert isinstance(lock.facts, PgLock) and lock.facts.backend.state == "idle"
    assert pg_of(lock).level == "session"  # no transaction, yet held
    v = verdict(lock, clock)
    assert v.state is State.STALE
    assert v.codes == ("idle_holder", "inferred")
    assert "session advisory lock" in v.reasons[0].message

    xact_lock = one(locks_of(snapshot, x), key=adv((1, 8)))
    v = verdict(xact_lock, clock)
    assert v.state is State.STALE and v.codes == ("idle_in_transaction", "inferred")

    # Seen from here, both clients (this test) are alive: neither is a leak.
    for pid, key, code in ((p, (1, 7), "idle_holder"), (x, (1, 8), "idle_in_transaction")):
        v = verdict(one(locks_of(seeing, pid), key=adv(key)), clock)
        assert v.state is State.ACTIVE and v.codes == (code, "client_alive")

    assert locks_of(snapshot, b) == []  # idle but holding nothing: nothing to report

    lock = one(locks_of(patient, p), key=adv((1, 7)))
    assert isinstance(lock.facts, PgLock) and lock.facts.backend.state_since is not None
    v = verdict(lock, clock)
    assert v.state is State.ACTIVE and v.codes == ()
    assert v.next_change_at == lock.facts.backend.state_since + timedelta(seconds=60)


# --------------------------------------------------------------------------- chains and cycles


async def test_three_deep_chain_makes_a_blocking_tree(pg: PgHarness, clock: FrozenClock) -> None:
    a_conn, b_conn, c_conn = pg.sessions("a", "b", "c")
    a, b, c = (conn.info.backend_pid for conn in (a_conn, b_conn, c_conn))
    a_conn.execute("SELECT pg_advisory_lock(7001)")
    b_conn.execute("SELECT pg_advisory_lock(7002)")
    pg.block(b_conn, "SELECT pg_advisory_lock(7001)")
    pg.block(c_conn, "SELECT pg_advisory_lock(7002)")

    async with monitor(pg.dsn, clock=clock) as source:
        snapshot = await poll_ok(source)

    assert pg_of(one(locks_of(snapshot, b), granted=False)).blocked_by == (a,)
    assert pg_of(one(locks_of(snapshot, c), granted=False)).blocked_by == (b,)
    a_lock = one(locks_of(snapshot, a), key=adv(7001))
    assert isinstance(a_lock.facts, PgLock) and a_lock.facts.blocking_here == (b,)
    assert verdict(a_lock, clock).codes == ("blocking",)
    b_held = one(locks_of(snapshot, b), key=adv(7002), granted=True)
    assert isinstance(b_held.facts, PgLock) and b_held.facts.blocking_here == (c,)
    assert pg_of(b_held).blocked_by == (a,)  # the session waits, whatever this row is
    assert verdict(b_held, clock).codes == ("blocking",)
    assert verdict(one(locks_of(snapshot, b), granted=False), clock).state is State.WAITING

    tree = tree_of(snapshot, (a, b, c))
    assert [r.id for r in tree.roots] == [a]
    top = tree.roots[0]
    assert (top.direct, top.total) == (1, 2)
    (middle,) = top.waiters
    assert middle.id == b and (middle.direct, middle.total) == (1, 1)
    (leaf,) = middle.waiters
    assert leaf.id == c and (leaf.direct, leaf.total, leaf.waiters) == (0, 0, ())
    assert tree.cycles == ()
    assert tree.as_json()["roots"][0]["blocks_in_total"] == 2  # type: ignore[index]


async def test_deadlock_pair_is_reported_as_a_cycle_until_broken(
    pg: PgHarness, clock: FrozenClock
) -> None:
    one_conn, two_conn = pg.sessions("one", "two")
    s1, s2 = one_conn.info.backend_pid, two_conn.info.backend_pid
    for conn in (one_conn, two_conn):
        # Keep the server's deadlock detector out of the way while we look.
        conn.execute("SET deadlock_timeout = '30s'")
    one_conn.execute("SELECT pg_advisory_lock(8001)")
    two_conn.execute("SELECT pg_advisory_lock(8002)")
    first = pg.block(one_conn, "SELECT pg_advisory_lock(8002)")
    pg.block(two_conn, "SELECT pg_advisory_lock(8001)")

    async with monitor(pg.dsn, clock=clock) as source:
        started = time.monotonic()
        snapshot = await poll_ok(source, timeout=5)
        assert time.monotonic() - started < 5
        assert pg_of(one(locks_of(snapshot, s1), granted=False)).blocked_by == (s2,)
        assert pg_of(one(locks_of(snapshot, s2), granted=False)).blocked_by == (s1,)
        tree = tree_of(snapshot, (s1, s2))
        assert tree.cycles == ((min(s1, s2), max(s1, s2)),)
        assert tree.roots == ()  # a cycle has no root, and is never walked forever

        pg.admin.execute("SELECT pg_cancel_backend(%s)", (s1,))
        first.wait_done()
        assert isinstance(first.error, psycopg.errors.QueryCanceled)

        snapshot = await poll_ok(source, timeout=5)
    tree = tree_of(snapshot, (s1, s2))
    assert tree.cycles == ()
    # s1 still holds 8001 (a session lock): s2 now simply waits on it.
    top = root(tree, s1)
    assert [n.id for n in top.waiters] == [s2]
    assert pg_of(one(locks_of(snapshot, s1), key=adv(8001))).blocking_here == (s2,)
    assert [
        lock for lock in locks_of(snapshot, s1) if pg_of(lock) and not pg_of(lock).granted
    ] == []


# --------------------------------------------------------------------------- rows of interest


async def test_uncontended_relation_and_own_virtualxid_only_with_all_rows(
    pg: PgHarness, clock: FrozenClock
) -> None:
    table = pg.table(rows=3)
    reader = pg.session("reader")
    r = reader.info.backend_pid
    reader.execute("BEGIN")
    reader.execute(f"SELECT count(*) FROM {table}")
    vxid = pg.scalar(
        "SELECT virtualxid FROM pg_locks WHERE pid = %s AND locktype = 'virtualxid'", (r,)
    )

    async with monitor(pg.dsn, clock=clock) as source:
        default = await poll_ok(source)
    async with monitor(pg.dsn, all_rows=True, clock=clock) as source:
        everything = await poll_ok(source)
        me = source._conn.info.backend_pid if source._conn else None

    assert locks_of(default, r) == []
    relation = one(locks_of(everything, r), locktype="relation", name=f"public.{table}")
    assert isinstance(relation.facts, PgLock)
    assert (pg_of(relation).mode, pg_of(relation).granted) == ("AccessShareLock", True)
    assert pg_of(relation).blocking_here == ()
    assert verdict(relation, clock).state is State.ACTIVE
    own = one(locks_of(everything, r), locktype="virtualxid")
    assert own.name == f"vxid {vxid}"
    assert (pg_of(own).mode, pg_of(own).granted) == ("ExclusiveLock", True)

    # The monitor's own backend never shows, not even with all rows.
    assert me is not None
    assert [lock for lock in everything.locks if lock.holder.pid == me] == []


async def test_contended_relation_lock_shows_holder_and_waiter(
    pg: PgHarness, clock: FrozenClock
) -> None:
    table = pg.table(rows=1)
    reader, locker = pg.sessions("reader", "locker")
    r, w = reader.info.backend_pid, locker.info.backend_pid
    reader.execute("BEGIN")
    reader.execute(f"SELECT count(*) FROM {table}")
    locker.execute("BEGIN")
    pg.block(locker, f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")

    async with monitor(pg.dsn, clock=clock) as source:
        snapshot = await poll_ok(source)

    (held,) = [lock for lock in locks_of(snapshot, r) if pg_of(lock) and pg_of(lock).blocking_here]
    assert isinstance(held.facts, PgLock)
    assert (pg_of(held).locktype, pg_of(held).mode, held.name) == (
        "relation",
        "AccessShareLock",
        f"public.{table}",
    )
    assert pg_of(held).blocking_here == (w,)
    # Only the row someone waits on: not the reader's virtualxid nor an index lock.
    assert len(locks_of(snapshot, r)) == 1
    waiting = one(locks_of(snapshot, w), granted=False)
    assert isinstance(waiting.facts, PgLock)
    assert (pg_of(waiting).locktype, pg_of(waiting).mode, waiting.name) == (
        "relation",
        "AccessExclusiveLock",
        f"public.{table}",
    )
    assert pg_of(waiting).blocked_by == (r,)
    assert pg_of(waiting).backend.wait_event == "relation"


# --------------------------------------------------------------------------- the monitor itself


async def test_monitoring_session_is_quiet_and_read_only(pg: PgHarness) -> None:
    holder = pg.session("holder")
    holder.execute("SELECT pg_advisory_lock(9001)")
    async with monitor(pg.dsn, all_rows=True) as source:
        first = await poll_ok(source)
        assert source._conn is not None
        me = source._conn.info.backend_pid
        second = await poll_ok(source)
        assert source._conn.info.backend_pid == me  # one connection, reused

        conn = source._conn
        assert conn.autocommit is True
        settings = {}
        for name in (
            "application_name",
            "statement_timeout",
            "lock_timeout",
            "default_transaction_read_only",
            "transaction_read_only",
        ):
            cursor = await conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name)))
            row = await cursor.fetchone()
            assert row is not None
            settings[name] = next(iter(row.values()))
        assert settings == {
            "application_name": "lockwatch",
            "statement_timeout": "2s",
            "lock_timeout": "500ms",
            "default_transaction_read_only": "on",
            "transaction_read_only": "on",
        }
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            await conn.execute("CREATE TABLE lockwatch_must_not_write (x int)")

        # As another session sees it: named, idle outside any transaction, holding nothing.
        application, state, xid, xmin = pg.activity(
            me, "application_name", "state", "backend_xid", "backend_xmin"
        )
        assert (application, state, xid, xmin) == ("lockwatch", "idle", None, None)
        assert pg.scalar("SELECT count(*) FROM pg_locks WHERE pid = %s", (me,)) == 0

    for snapshot in (first, second):
        assert [lock for lock in snapshot.locks if lock.holder.pid == me] == []
        assert all(
            not isinstance(lock.facts, PgLock) or pg_of(lock).backend.pid != me
            for lock in snapshot.locks
        )
        assert one(locks_of(snapshot, holder.info.backend_pid), key=adv(9001))


async def test_a_poll_is_one_round_trip_with_the_port_and_the_lock_tables_catalog(
    pg: PgHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connecting asks nothing, and a poll sends one query: the server's port (for
    client lookups) and the lock tables' catalog come in its answer. Only the lock
    tables found (other tests' knex or Liquibase tables) are read by one more."""
    holder = pg.session("holder")
    holder.execute("SELECT pg_advisory_lock(9002)")
    sent: list[str] = []
    execute = psycopg.AsyncCursor.execute

    async def counted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if "to_jsonb(t)" not in str(query):  # not a found lock table's rows
            sent.append(str(query))
        return await execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", counted)
    port = int(str(pg.scalar("SELECT current_setting('port')")))
    async with monitor(pg.dsn) as source:
        first = await poll_ok(source)
        assert len(sent) == 1 and "pg_stat_clear_snapshot" in sent[0], sent
        assert "databasechangeloglock" in sent[0]  # the catalog, in the same query
        assert source._server_port == port
        source._server_port = 1  # each answer says the port again
        await poll_ok(source)
        assert len(sent) == 2 and source._server_port == port
    assert one(locks_of(first, holder.info.backend_pid), key=adv(9002))


# --------------------------------------------------------------------------- prepared transactions


@pytest.mark.parametrize(
    "recovered",
    [
        # Prepared in a live session, its locks keep that session's vxid ('4/2')…
        pytest.param(False, id="prepared-now"),
        # …re-taken in recovery after a restart, they show as '-1/<xid>'.
        pytest.param(True, id="recovered-after-restart"),
    ],
)
async def test_prepared_transaction_holder_is_named_never_pid_zero(
    throwaway_cluster: Cluster, clock: FrozenClock, recovered: bool
) -> None:
    tag = uuid.uuid4().hex[:10]
    table, gid = f"lw_{tag}", f"lw-gid-{tag}"
    with connect(throwaway_cluster.dsn, f"lw-setup-{tag}") as setup:
        setup.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v int)")
        setup.execute(f"INSERT INTO {table} VALUES (1, 0)")
        setup.execute("BEGIN")
        setup.execute(f"UPDATE {table} SET v = 1 WHERE id = 1")
        setup.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))
    try:
        if recovered:
            # Prepared transactions survive a restart, re-taking their locks in recovery.
            throwaway_cluster.stop()
            throwaway_cluster.start()
        pg = PgHarness(throwaway_cluster.dsn)
        try:
            await check_prepared_transaction(pg, clock, table, gid)
        finally:
            pg.close()
    finally:
        if probe(throwaway_cluster.dsn) is not None:
            throwaway_cluster.start()
        with connect(throwaway_cluster.dsn, f"lw-setup-{tag}") as cleanup:
            with contextlib.suppress(psycopg.Error):
                cleanup.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
            cleanup.execute(f"DROP TABLE IF EXISTS {table}")


async def check_prepared_transaction(
    pg: PgHarness, clock: FrozenClock, table: str, gid: str
) -> None:
    waiter = pg.session("waiter")
    w = waiter.info.backend_pid
    update = f"UPDATE {table} SET v = 2 WHERE id = 1"
    pg.block(waiter, update)
    xid = str(pg.scalar("SELECT transaction::text FROM pg_prepared_xacts WHERE gid = %s", (gid,)))

    async with monitor(pg.dsn, clock=clock) as source:
        snapshot = await poll_ok(source)

    assert all(lock.holder.pid != 0 for lock in snapshot.locks)
    assert all(
        not isinstance(lock.facts, PgLock) or pg_of(lock).backend.pid != 0
        for lock in snapshot.locks
    )
    prepared = [
        lock for lock in snapshot.locks if pg_of(lock) and pg_of(lock).backend.prepared_gid == gid
    ]
    assert len(prepared) == 1, [lock.id for lock in snapshot.locks]
    held = prepared[0]
    assert isinstance(held.facts, PgLock)
    assert pg_of(held).backend.pid is None
    assert held.holder.pid is None
    assert pg_of(held).backend.label == f"prepared transaction {gid}"
    assert held.holder.actor == f"prepared transaction {gid}"
    assert (pg_of(held).locktype, pg_of(held).mode, pg_of(held).granted) == (
        "transactionid",
        "ExclusiveLock",
        True,
    )
    assert held.name == f"xid {xid}"
    assert pg_of(held).blocking_here == (w,)
    assert f"prepared:{gid}" in held.id and ":0:" not in held.id
    v = verdict(held, clock)
    assert v.state is State.ACTIVE
    assert set(v.codes) == {"blocking", "prepared_transaction"}
    assert v.alive is None
    (prepared_reason,) = [r for r in v.reasons if r.code == "prepared_transaction"]
    assert gid in prepared_reason.message
    assert f"COMMIT PREPARED '{gid}'" in prepared_reason.message
    assert f"ROLLBACK PREPARED '{gid}'" in prepared_reason.message
    # Its age is known exactly: when it was prepared.
    prepared_age = float(
        pg.scalar(
            "SELECT EXTRACT(epoch FROM now() - prepared) FROM pg_prepared_xacts WHERE gid = %s",
            (gid,),
        )
    )
    assert v.age_seconds is not None and 0 <= prepared_age - v.age_seconds < 5
    assert pg_of(held).backend.prepared_at == held.acquired_at

    waiting = one(locks_of(snapshot, w), granted=False)
    assert isinstance(waiting.facts, PgLock)
    assert pg_of(waiting).blocked_by_prepared == (gid,)
    v = verdict(waiting, clock)
    assert v.state is State.WAITING and v.codes == ("waiting",)
    assert f"prepared transaction {gid!r}" in v.reasons[0].message
    assert "pid 0" not in v.reasons[0].message


# --------------------------------------------------------------------------- privileges


def probe_role(pg: PgHarness) -> str:
    """A LOGIN role without pg_read_all_stats; its DSN. Dropped at teardown."""
    return pg.login_role("probe", password=f"pw-{pg.tag}")


async def test_without_pg_read_all_stats_queries_are_hidden_and_the_role_named(
    pg: PgHarness, clock: FrozenClock
) -> None:
    dsn = probe_role(pg)
    holder, waiter = pg.sessions("holder", "waiter")
    h, w = holder.info.backend_pid, waiter.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(1, 99)")
    pg.block(waiter, "SELECT pg_advisory_lock(1, 99)")

    async with monitor(dsn, clock=clock) as source:
        snapshot = await poll_ok(source)
        status = source.status
    held = one(locks_of(snapshot, h), key=adv((1, 99)))
    assert isinstance(held.facts, PgLock)
    backend = pg_of(held).backend
    assert backend.query == INSUFFICIENT_PRIVILEGE
    assert backend.hidden
    assert backend.state is None
    assert (backend.xact_start, backend.query_start, backend.state_since) == (None, None, None)
    assert backend.user == pg.user  # who it is stays visible; what it does does not
    assert backend.application == pg.application("holder")
    v = verdict(held, clock)
    # Whether it idles holding its lock is what is hidden: unknown, never active.
    assert v.state is State.UNKNOWN
    assert v.codes == ("insufficient_privilege", "blocking")
    (hint,) = [r for r in v.reasons if r.code == "insufficient_privilege"]
    role = conninfo.conninfo_to_dict(dsn)["user"]
    assert f"GRANT pg_read_all_stats TO {role};" in hint.message
    # Its client's address is hidden too: nothing to look a process up by.
    assert backend.client is None and backend.client_process is None
    waiting = one(locks_of(snapshot, w), granted=False)
    assert isinstance(waiting.facts, PgLock) and waiting.facts.advisory_key == adv((1, 99))
    assert verdict(waiting, clock).state is State.WAITING
    assert status.state == "connected"
    assert status.reason is not None and "pg_read_all_stats" in status.reason

    # Granted the role, the same poll shows everything and the hint goes away.
    pg.admin.execute(sql.SQL("GRANT pg_read_all_stats TO {}").format(sql.Identifier(str(role))))
    async with monitor(dsn, clock=clock) as source:
        snapshot = await poll_ok(source)
        assert source.status.reason is None
    held = one(locks_of(snapshot, h), key=adv((1, 99)))
    assert isinstance(held.facts, PgLock)
    assert pg_of(held).backend.query == "SELECT pg_advisory_lock(1, 99)"
    assert pg_of(held).backend.state == "idle"
    assert verdict(held, clock).state is State.ACTIVE
    assert "insufficient_privilege" not in verdict(held, clock).codes


async def test_without_pg_read_all_stats_blocking_is_still_known(
    pg: PgHarness, clock: FrozenClock
) -> None:
    """pg_stat_activity hides other users' wait_event from such a role, but pg_locks and
    pg_blocking_pids() do not: who blocks whom must not depend on the role."""
    dsn = probe_role(pg)
    holder, waiter = pg.sessions("holder", "waiter")
    h, w = holder.info.backend_pid, waiter.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(1, 98)")
    pg.block(waiter, "SELECT pg_advisory_lock(1, 98)")

    async with monitor(dsn, clock=clock) as source:
        snapshot = await poll_ok(source)
    waiting = one(locks_of(snapshot, w), granted=False)
    assert isinstance(waiting.facts, PgLock)
    assert pg_of(waiting).blocked_by == (h,)
    held = one(locks_of(snapshot, h), key=adv((1, 98)))
    assert isinstance(held.facts, PgLock) and held.facts.blocking_here == (w,)
    assert "blocking" in verdict(held, clock).codes


# --------------------------------------------------------------------------- resilience


async def test_server_down_at_start_is_a_status_not_an_exception() -> None:
    port = free_port()  # bound and released: nothing listens there
    source = PgSource(f"postgresql://postgres@127.0.0.1:{port}/postgres", connect_timeout_s=2)
    assert source.status.state == "connecting"
    assert await asyncio.wait_for(source.poll(), WAIT_S) is None
    status = source.status
    assert status.kind == "postgres"
    assert status.name == f"postgres@127.0.0.1:{port}/postgres"
    assert status.state == "disconnected"
    assert status.reason and str(port) in status.reason
    assert status.updated_at is None and source.last is None
    assert status.next_retry_at is not None
    assert 0.8 <= source.retry_in <= 1.2
    assert await asyncio.wait_for(source.poll(), WAIT_S) is None
    assert source.failures == 2
    assert 1.6 <= source.retry_in <= 2.4
    await source.close()


async def test_a_long_outage_keeps_failing_cleanly() -> None:
    """Past 1024 consecutive failures (8.5 h at the 30 s cap) a poll is still just a None."""
    source = PgSource(f"postgresql://postgres@127.0.0.1:{free_port()}/postgres")
    for _ in range(1100):
        assert await source.poll() is None
        assert source.retry_in <= 30.0
    assert source.status.state == "disconnected"


async def test_terminated_backend_disconnects_keeps_last_then_reconnects(pg: PgHarness) -> None:
    holder = pg.session("holder")
    holder.execute("SELECT pg_advisory_lock(9101)")
    async with monitor(pg.dsn) as source:
        good = await poll_ok(source)
        assert source._conn is not None
        me = source._conn.info.backend_pid
        pg.admin.execute("SELECT pg_terminate_backend(%s)", (me,))
        wait_until(
            lambda: (
                not pg.admin.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (me,)
                ).fetchone()
            ),
            f"the monitor's backend {me} to exit",
        )

        assert await asyncio.wait_for(source.poll(), WAIT_S) is None
        assert source.status.state == "disconnected"
        assert source.status.reason
        assert source.last is good  # the last good snapshot stays
        assert source.status.updated_at == good.polled_at  # …marked with its age
        assert source.status.next_retry_at is not None

        again = await poll_ok(source)
        after = source.status  # read afresh: the poll replaced it
        assert after.state == "connected" and after.reason is None
        assert source.last is again and source.failures == 0
        assert source._conn is not None and source._conn.info.backend_pid != me
        assert one(locks_of(again, holder.info.backend_pid), key=adv(9101))


async def test_server_stopped_and_restarted_under_a_running_source(
    throwaway_cluster: Cluster,
) -> None:
    async with monitor(throwaway_cluster.dsn) as source:
        good = await poll_ok(source)
        try:
            throwaway_cluster.stop()
            assert await asyncio.wait_for(source.poll(), WAIT_S) is None
            assert source.status.state == "disconnected"
            assert source.status.reason
            assert source.last is good and source.status.updated_at == good.polled_at
            # Still down: refused at connect, and backing off further.
            assert await asyncio.wait_for(source.poll(), WAIT_S) is None
            assert source.status.state == "disconnected"
            assert source.failures == 2 and 1.6 <= source.retry_in <= 2.4
        finally:
            throwaway_cluster.start()
        again = await poll_ok(source)
        after = source.status  # read afresh: the poll replaced it
        assert after.state == "connected"
        assert again.polled_at >= good.polled_at


async def test_statement_timeout_is_an_error_and_leaves_nothing_running(pg: PgHarness) -> None:
    slow = f"SELECT pg_sleep(5) /* {pg.tag} */"
    async with monitor(pg.dsn, statement_timeout_ms=100, query=slow) as source:
        started = time.monotonic()
        assert await asyncio.wait_for(source.poll(), WAIT_S) is None
        assert time.monotonic() - started < 3
        assert source.status.state == "error"
        assert source.status.reason and "statement_timeout" in source.status.reason
        assert source.last is None
    wait_until(
        lambda: (
            not pg.admin.execute(
                "SELECT 1 FROM pg_stat_activity WHERE query = %s AND state = 'active'", (slow,)
            ).fetchone()
        ),
        "the timed-out poll to stop running",
    )


async def test_lock_timeout_is_an_error_naming_it(pg: PgHarness) -> None:
    table = pg.table(rows=1)
    owner = pg.session("owner")
    owner.execute("BEGIN")
    owner.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
    async with monitor(pg.dsn, query=f"SELECT count(*) FROM {table}") as source:
        started = time.monotonic()
        assert await asyncio.wait_for(source.poll(), WAIT_S) is None
        assert time.monotonic() - started < 2
        assert source.status.state == "error"
        assert source.status.reason and "lock_timeout" in source.status.reason


# --------------------------------------------------------------------------- passwords

PASSWORD = "sekret-pw"


@pytest.mark.parametrize(
    ("dsn", "secrets"),
    [
        (f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/postgres", [PASSWORD]),
        (f"host=127.0.0.1 port=1 user=postgres password={PASSWORD} dbname=postgres", [PASSWORD]),
        ("host=127.0.0.1 port=1 user=postgres password='sekret pw' dbname=postgres", ["sekret pw"]),
        ("postgresql://postgres:sekret%2Dpw@127.0.0.1:1/postgres", [PASSWORD, "sekret%2Dpw"]),
        (f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/postgres?sslmode=bogus", [PASSWORD]),
        (f"host=127.0.0.1 port=1 password={PASSWORD} bogus", [PASSWORD]),
        # libpq rejects this DSN quoting the raw token: 'invalid percent-encoded token'.
        pytest.param(
            "postgresql://postgres:sek%zzret@127.0.0.1:1/postgres",
            ["sek%zzret", "zzret"],
            id="bad-percent-encoding",
        ),
    ],
)
async def test_password_never_shown(dsn: str, secrets: list[str]) -> None:
    source = PgSource(dsn, connect_timeout_s=2)
    assert await asyncio.wait_for(source.poll(), WAIT_S) is None
    status = source.status
    assert status.state in ("disconnected", "error")
    assert status.reason
    shown = [
        source.name,
        status.name,
        status.reason,
        str(status),
        repr(status),
        str(status.as_json()),
        describe(psycopg.OperationalError(f"could not connect with {dsn}"), dsn),
        describe(psycopg.ProgrammingError(f'bad option in "{dsn}"'), dsn),
    ]
    for text in shown:
        for secret in secrets:
            assert secret not in text, f"{secret!r} shown in {text!r}"
    await source.close()


async def test_password_never_shown_on_a_working_connection(pg: PgHarness) -> None:
    # Trust authentication ignores the password, so the poll works and we see its output.
    dsn = conninfo.make_conninfo(pg.dsn, password=PASSWORD)
    holder = pg.session("holder")
    holder.execute("SELECT pg_advisory_lock(9201)")
    async with monitor(dsn) as source:
        snapshot = await poll_ok(source)
        texts = [source.name, snapshot.server, str(source.status), str(source.status.as_json())]
    assert one(locks_of(snapshot, holder.info.backend_pid), key=adv(9201))
    for lock in snapshot.locks:
        assert isinstance(lock.facts, PgLock)
        texts += [lock.id, lock.name, pg_of(lock).server, repr(lock)]
    for text in texts:
        assert PASSWORD not in text, text


async def test_a_polls_rows_are_compact_and_share_their_repeating_values(
    pg: PgHarness, clock: FrozenClock
) -> None:
    """A large server's locks each keep their pg_locks row: as `Row`s of one shared
    set of columns, each repeating value (type, mode, pid) one object (model/compact.py)."""
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(k) FROM generate_series(9100, 9102) AS k")
    async with monitor(pg.dsn, clock=clock) as source:
        snapshot = await poll_ok(source)
    a, b, c = sorted(locks_of(snapshot, h), key=lambda lock: lock.name)
    rows = [lock.content for lock in (a, b, c)]
    assert all(type(row) is Row for row in rows)
    assert [row["objid"] for row in rows] == [9100, 9101, 9102]
    assert rows[0]._columns is rows[1]._columns is rows[2]._columns
    for column in ("locktype", "mode", "pid", "virtualtransaction", "held_kinds"):
        assert rows[0][column] is rows[1][column] is rows[2][column], column
    assert rows[0]["target"] is not rows[1]["target"]  # what differs is each row's own
    assert dict(rows[0])["mode"] == "ExclusiveLock" and rows[0]["pid"] == h
    assert all(type(s) is Row for s in snapshot.sessions.values())
