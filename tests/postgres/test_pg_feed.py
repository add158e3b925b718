"""PgFeed against a real server: change sets for advisory locks, a waiter, a release,
and a server that cannot be reached.

The feed runs in an asyncio task with a short interval; the test waits (bounded) for the
picture its change sets add up to, and looks only at its own sessions' locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from lockwatch.model.changes import ChangeSet, Entry
from lockwatch.model.verdict import State
from lockwatch.sources.postgres.dsn import display_name
from lockwatch.sources.postgres.feed import PgFeed
from lockwatch.sources.postgres.source import PgSource
from tests.facts_of import PgLock, pg_of
from tests.postgres.conftest import WAIT_S, PgHarness, free_port

pytestmark = pytest.mark.postgres

HOST = "testhost"
INTERVAL = 0.05


class Seen:
    """The emit: every ChangeSet, and the picture they add up to."""

    def __init__(self) -> None:
        self.changes: list[ChangeSet] = []
        self.current: dict[str, Entry] = {}

    def __call__(self, change: ChangeSet) -> None:
        self.changes.append(change)
        for lock_id in change.removed:
            self.current.pop(lock_id, None)
        for entry in change.upserts:
            self.current[entry.lock.id] = entry

    def of(self, pid: int) -> list[Entry]:
        return [
            e
            for e in self.current.values()
            if isinstance(e.lock.facts, PgLock) and e.lock.facts.backend.pid == pid
        ]

    def polls(self) -> int:
        return len(self.changes)


async def until(predicate: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def running(feed: PgFeed) -> AsyncIterator[tuple[Seen, asyncio.Task[None]]]:
    seen = Seen()
    task = asyncio.create_task(feed.run(seen))
    try:
        yield seen, task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await feed.close()


def unique_key() -> int:
    return int(uuid.uuid4().int % (2**62)) + 1


async def test_advisory_holder_waiter_and_release(pg: PgHarness) -> None:
    key = unique_key()
    holder, waiter = pg.sessions("holder", "waiter")
    h, w = holder.info.backend_pid, waiter.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(%s)", (key,))
    blocked = pg.block(waiter, f"SELECT pg_advisory_lock({key})")

    source = PgSource(pg.dsn)
    feed = PgFeed(source, host=HOST, interval=INTERVAL)
    assert feed.name == f"pg:{display_name(pg.dsn)}"
    async with running(feed) as (seen, task):
        await until(lambda: seen.of(h) and seen.of(w), "the holder's and the waiter's locks")
        await until(lambda: seen.polls() >= 3, "a few polls")
        assert not task.done()

        for change in seen.changes:
            assert change.feed == feed.name
            (status,) = change.statuses
            assert (status.kind, status.name, status.state) == (
                "postgres",
                source.name,
                "connected",
            )
            assert status.updated_at == change.at
        first = seen.changes[0]
        assert not first.removed

        (held,) = seen.of(h)
        assert held.lock.source == "postgres"
        assert isinstance(held.lock.facts, PgLock)
        assert pg_of(held.lock).locktype == "advisory" and pg_of(held.lock).granted
        assert held.lock.name == str(key)
        assert pg_of(held.lock).blocking_here == (w,)
        assert held.verdict.state is State.ACTIVE
        assert "blocking" in held.verdict.codes

        (waiting,) = seen.of(w)
        assert isinstance(waiting.lock.facts, PgLock)
        assert pg_of(waiting.lock).locktype == "advisory" and not pg_of(waiting.lock).granted
        assert waiting.lock.name == str(key)
        assert pg_of(waiting.lock).blocked_by == (h,)
        assert waiting.verdict.state is State.WAITING
        assert waiting.verdict.codes == ("waiting",)
        wait_id = waiting.lock.id

        # Released: the waiter gets the lock; the holder's and the wait's rows go.
        holder.execute("SELECT pg_advisory_unlock(%s)", (key,))
        blocked.wait_done()
        assert blocked.error is None
        mark = seen.polls()
        await until(
            lambda: (
                not seen.of(h)
                and [pg_of(e.lock) and pg_of(e.lock).granted for e in seen.of(w)] == [True]
            ),
            "the release",
        )
        removed = {i for c in seen.changes[mark:] for i in c.removed}
        assert {held.lock.id, wait_id} <= removed
        (now_held,) = seen.of(w)
        assert now_held.verdict.state is State.ACTIVE
        assert now_held.verdict.codes == ()

        waiter.execute("SELECT pg_advisory_unlock(%s)", (key,))
        await until(lambda: not seen.of(w), "the last lock to go")
        assert not task.done()


async def test_unchanged_polls_send_nothing_again(pg: PgHarness) -> None:
    key = unique_key()
    holder, waiter = pg.sessions("holder", "waiter")
    h, w = holder.info.backend_pid, waiter.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(%s)", (key,))
    pg.block(waiter, f"SELECT pg_advisory_lock({key})")
    feed = PgFeed(PgSource(pg.dsn), host=HOST, interval=INTERVAL)
    async with running(feed) as (seen, _):
        await until(lambda: seen.of(h) and seen.of(w), "the holder's and the waiter's locks")
        mark = seen.polls()
        await until(lambda: seen.polls() >= mark + 5, "five more polls")
        ours = {e.lock.id for e in seen.of(h) + seen.of(w)}
        again = [e.lock.id for c in seen.changes[mark:] for e in c.upserts if e.lock.id in ours]
        assert again == []


async def test_a_live_feed_lets_go_of_each_poll_s_rows(pg: PgHarness) -> None:
    """Between polls the feed keeps what it made of a poll, not the poll: holding a
    large server's rows while the next poll's come in was two polls at once
    (benchmarks/bench_memory.py: 359 MB at 50,000 locks, 302 MB without)."""
    key = unique_key()
    (holder,) = pg.sessions("holder")
    holder.execute("SELECT pg_advisory_lock(%s)", (key,))
    source = PgSource(pg.dsn)
    feed = PgFeed(source, host=HOST, interval=INTERVAL)
    sent: list[ChangeSet] = []
    polled_at = None
    try:
        for _ in range(2):
            snapshot = await source.poll()
            assert snapshot is not None and source.last is snapshot
            polled_at = snapshot.polled_at
            await feed._emit(snapshot, sent.append)
            assert source.last is None
    finally:
        await feed.close()
    assert any(pg_of(e.lock) and pg_of(e.lock).advisory_key for e in sent[0].upserts)
    # What the header says of the server still has the last poll's time.
    status = sent[-1].statuses[0]
    assert status.state == "connected" and status.updated_at == polled_at


@pytest.mark.parametrize("kind", ["nothing listens", "invalid dsn"])
async def test_unreachable_server_is_a_status_and_the_feed_goes_on(kind: str) -> None:
    if kind == "nothing listens":
        dsn = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
        expected = "disconnected"
    else:
        # Two '@' before the host: refused before any connection is tried.
        dsn = "postgresql://postgres:p@ss@127.0.0.1:1/postgres"
        expected = "error"
    source = PgSource(dsn, connect_timeout_s=2)
    feed = PgFeed(source, host=HOST, interval=INTERVAL)
    async with running(feed) as (seen, task):
        await until(lambda: seen.changes, "a change set")
        await asyncio.sleep(0)
        assert not task.done()  # still running: it retries after its backoff
        change = seen.changes[0]
        assert change.feed == f"pg:{source.name}"
        assert change.upserts == () and change.removed == ()
        (status,) = change.statuses
        assert (status.kind, status.state) == ("postgres", expected)
        assert status.reason
        assert "p@ss" not in status.reason and "p@ss" not in status.name
        assert status.updated_at is None
        if expected == "disconnected":
            assert status.next_retry_at is not None
