"""Redis and etcd in the dashboard: polled on one connection each, with backoff
while the server is away (its last locks kept, their age in the status), and
waiters under their holder in the Contention view."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis
from textual.pilot import Pilot
from textual.widgets.tree import TreeNode

from lockwatch.clock import FrozenClock, SystemClock
from lockwatch.model.board import Board
from lockwatch.model.verdict import State
from lockwatch.sources.etcd.endpoint import parse as etcd_endpoint
from lockwatch.sources.etcd.poller import EtcdPoller
from lockwatch.sources.etcd.server import EtcdServer
from lockwatch.sources.polled import PolledFeed, same_but_for_countdown
from lockwatch.sources.redis.endpoint import parse as redis_endpoint
from lockwatch.sources.redis.poll import RedisPoller
from lockwatch.ui.contention import ContentionTree
from tests.conftest import LOCAL_HOST, NOW
from tests.stores.conftest import WAIT_S, Etcd, RedisHarness, Throwaway, start_redis
from tests.ui.fakes import make_app
from tests.ui.fakes import until as until_within

FAST = 0.2


def redis_feed(
    url: str, patterns: tuple[str, ...], clock: Any, interval: float = FAST
) -> PolledFeed:
    poller = RedisPoller.of((redis_endpoint(url, {}),), patterns, clock)
    return PolledFeed(poller, host=LOCAL_HOST, interval=interval, settle=same_but_for_countdown)


@pytest.fixture
def own_redis() -> Iterator[Throwaway]:
    server = start_redis()
    try:
        yield server
    finally:
        server.stop()


def test_a_server_that_goes_away_keeps_its_locks_and_backs_off(own_redis: Throwaway) -> None:
    clock = FrozenClock(NOW)
    client = redis.Redis.from_url(own_redis.url)
    client.set("deploy:lock", "tok", ex=600)
    feed = redis_feed(own_redis.url, ("*lock",), clock, interval=2.0)
    board = Board(LOCAL_HOST)

    change, wait = feed.poll()
    board.apply(change)
    assert wait == 2.0
    assert [entry.lock.name for entry in change.upserts] == ["deploy:lock"]
    (status,) = change.statuses
    assert (status.state, status.updated_at) == ("connected", NOW)

    # Polled again with nothing changed but the TTL counting down: nothing sent.
    change, _ = feed.poll()
    assert change.upserts == () and change.removed == ()
    # Renewed (a holder extending its lock): sent again, with its new expiry.
    client.expire("deploy:lock", 900)
    change, _ = feed.poll()
    assert [entry.lock.ttl_seconds for entry in change.upserts] == [pytest.approx(900, abs=2)]
    clock.advance(2.0)

    own_redis.stop()
    clock.advance(2.0)
    waits = []
    for _ in range(3):
        change, wait = feed.poll()
        board.apply(change)
        waits.append(wait)
        (status,) = change.statuses
        assert status.state == "disconnected" and status.reason
        # The last good poll's time: what is on screen is that old.
        assert status.updated_at == NOW
        assert status.next_retry_at == NOW + timedelta(seconds=4 + wait)
        assert change.upserts == () and change.removed == ()
    # 1, 2, 4 s, give or take a fifth.
    for wait, base in zip(waits, (1.0, 2.0, 4.0), strict=True):
        assert base * 0.8 <= wait <= base * 1.2
    # The lock stays on the board while its server is away.
    assert [entry.lock.name for entry in board.entries.values()] == ["deploy:lock"]
    feed.poller.close()


async def test_the_run_loop_sleeps_the_interval_or_the_backoff(
    own_redis: Throwaway, monkeypatch: pytest.MonkeyPatch
) -> None:

    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 1:
            own_redis.stop()
        if len(slept) == 3:
            raise asyncio.CancelledError

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    feed = redis_feed(own_redis.url, ("*lock",), SystemClock(), interval=5.0)
    emitted: list[Any] = []
    with pytest.raises(asyncio.CancelledError):
        await feed.run(emitted.append)
    await feed.close()
    assert slept[0] == 5.0
    assert 0.8 <= slept[1] <= 1.2 and 1.6 <= slept[2] <= 2.4
    assert [c.statuses[0].state for c in emitted] == ["connected", "disconnected", "disconnected"]


def tree_lines(tree: ContentionTree) -> Iterator[tuple[int, str]]:
    stack: list[tuple[int, TreeNode[str | None]]] = [
        (0, node) for node in reversed(tree.root.children)
    ]
    while stack:
        depth, node = stack.pop()
        yield depth, str(node.label)
        stack.extend((depth + 1, child) for child in reversed(node.children))


async def until(pilot: Pilot[Any], condition: Callable[[], bool], what: str) -> None:
    await until_within(pilot, condition, what, WAIT_S)


async def test_dashboard_shows_etcd_and_redis_waiters_under_their_holders(
    etcd: Etcd, redis_harness: RedisHarness
) -> None:
    import redis_lock

    h = redis_harness
    holder = etcd.lock("/locks/dash")
    assert holder.stdout is not None
    holder_key = holder.stdout.readline().strip()
    waiter = etcd.lock("/locks/dash")
    redis_held = redis_lock.Lock(h.client, f"{h.prefix}-dash", expire=30)
    assert redis_held.acquire(blocking=False)
    h.cleanups.append(redis_held.release)
    h.client.set(f"{h.prefix}:forever:lock", "x")

    clock = SystemClock()
    etcd_feed = PolledFeed(
        EtcdPoller(EtcdServer(etcd_endpoint(etcd.url), ("/locks/",), clock=clock)),
        host=LOCAL_HOST,
        interval=FAST,
        settle=same_but_for_countdown,
    )
    patterns = (f"lock:{h.prefix}*", f"{h.prefix}*lock")
    app = make_app(feeds=[etcd_feed, redis_feed(h.url, patterns, clock)], clock=clock)
    async with app.run_test(size=(140, 36)) as pilot:

        def states() -> dict[str, State]:
            return {
                entry.lock.id: app.board.verdict(entry.lock.id).state
                for entry in app.board.entries.values()
            }

        await until(
            pilot,
            lambda: sum(s is State.WAITING for s in states().values()) == 1,
            "the etcd waiter",
        )
        held_id = next(i for i in states() if i.endswith(holder_key))
        assert states()[held_id] is State.ACTIVE
        # The two feeds poll on their own: Redis's first poll may come later.
        await until(
            pilot,
            lambda: any(e.lock.name.endswith("forever:lock") for e in app.board.entries.values()),
            "the redis lock without expiry",
        )
        forever = next(
            e for e in app.board.entries.values() if e.lock.name.endswith("forever:lock")
        )
        assert app.board.verdict(forever.lock.id).codes == ("no_expiry",)
        assert {s.kind for s in app.board.all_statuses()} >= {"etcd", "redis"}

        await pilot.press("tab")
        tree = app.screen.query_one(ContentionTree)
        lease = holder_key.rsplit("/", 1)[1]
        await until(
            pilot,
            lambda: any(lease in text and "blocks 1" in text for _, text in tree_lines(tree)),
            "the etcd holder in the Contention view",
        )
        lines = list(tree_lines(tree))
        at = next(n for n, (_, text) in enumerate(lines) if lease in text)
        depth = lines[at][0]
        below = lines[at + 1]
        assert below[0] == depth + 1 and "waiting" in below[1] and "/locks/dash" in below[1]

        waiter.terminate()  # etcdctl closes its session: its key goes at once
        waiter.communicate(timeout=WAIT_S)
        await until(pilot, lambda: State.WAITING not in states().values(), "the waiter to go")
    holder.kill()


def test_the_detail_pane_shows_a_store_lock_s_own_facts() -> None:
    from rich.console import Console

    from lockwatch.model.process import StaticProcesses
    from lockwatch.model.verdict import evaluate
    from lockwatch.sources.etcd.gateway import KeyValue
    from lockwatch.sources.etcd.records import to_locks
    from lockwatch.sources.etcd.server import EtcdSnapshot
    from lockwatch.ui.detail import describe

    snapshot = EtcdSnapshot(
        "etcd1:2379",
        NOW,
        42,
        [
            KeyValue("/locks/deploy/1a", "", 10, 10, 1, 0x1A),
            KeyValue("/locks/deploy/2b", "", 11, 11, 1, 0x2B),
        ],
        {0x1A: (7, 10), 0x2B: (9, 10)},
    )
    holder = to_locks(snapshot)[0]
    verdict = evaluate(holder, StaticProcesses(), FrozenClock(NOW), LOCAL_HOST)
    console = Console(width=100, record=True, color_system=None)
    console.print(describe(holder, verdict, [], NOW))
    text = console.export_text()
    assert "\netcd\n" in text
    for fact in (
        "lease       1a",
        "granted ttl 10 s",
        "create rev  10",
        "blocking    2b",
        "holds it",
    ):
        assert fact in text, fact
