"""serve's pace (issue 35, item 6): with nobody asking, the feeds that take a
pace poll at the idle pace; the first request for data wakes them and waits for
their fresh look. The kernel feed stops at reading /proc/locks when it reads as
before, and a lock renumbered by another's coming is not sent again."""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from lockwatch.clock import SystemClock
from lockwatch.model.changes import ChangeSet
from lockwatch.model.status import SourceStatus
from lockwatch.serve.pace import Pace
from lockwatch.serve.watcher import Watcher
from lockwatch.sources.feed import Emit
from lockwatch.sources.kernel import feed as kernel_feed
from lockwatch.sources.kernel.feed import KernelFeed
from tests.conftest import LOCAL_HOST

OK = SourceStatus("kernel", "/proc/locks", "ok")
BOUND_S = 10.0  # only keeps a broken run from hanging


def eventually(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


class Polling:
    """Polls (emits) every 10 ms between waits of its `sleep`."""

    name = "kernel"
    interval = 0.01

    def __init__(self) -> None:
        self.polls = 0
        self.paced_waits = 0  # waits begun in the pace's sleep
        self.sleep: Callable[[float], object] | None = None

    async def run(self, emit: Emit) -> None:
        while True:
            self.polls += 1
            emit(ChangeSet(self.name, SystemClock().now(), (OK,)))
            if self.sleep is None:
                await asyncio.sleep(self.interval)
            else:
                self.paced_waits += 1
                await self.sleep(self.interval)  # type: ignore[misc]

    async def close(self) -> None:
        return None


@contextmanager
def watching(feed: Polling, pace: Pace | None) -> Iterator[Watcher]:
    watcher = Watcher([("kernel", feed)], host=LOCAL_HOST, pace=pace)
    watcher.start()
    try:
        yield watcher
    finally:
        watcher.stop()


def test_an_idle_serve_polls_at_the_idle_pace_and_a_request_wakes_it() -> None:
    feed = Polling()
    pace = Pace(idle_seconds=3600)
    with watching(feed, pace) as watcher:
        # Parked after its first look in the pace's wait, which an idle pace ends after
        # an hour or at a request: no wall-time wait stands in for "it did not poll".
        eventually(lambda: feed.paced_waits == 1, "the first look, then the pace's wait")
        assert feed.polls == 1 and pace.idle() and pace.interval(feed.interval) == 3600
        watcher.asked()  # a scrape: it wakes the feed and waits for its look
        assert feed.polls >= 2
        eventually(lambda: feed.polls >= 20, "the feed's own interval, someone asking")


def test_without_a_pace_feeds_poll_at_their_interval() -> None:
    feed = Polling()
    with watching(feed, None):
        eventually(lambda: feed.polls >= 20, "the feed's own interval")


def test_an_unchanged_proc_locks_is_read_not_looked_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "locks"
    table.write_bytes(b"1: FLOCK  ADVISORY  WRITE 1 00:00:1 0 EOF\n")
    monkeypatch.setattr(kernel_feed, "PROC_LOCKS", str(table))
    looks = 0
    real = kernel_feed.locks_now  # type: ignore[attr-defined]

    def counted(
        roots: tuple[str, ...], *, joined: tuple[str, ...] = (), live: bool = False
    ) -> object:
        nonlocal looks
        looks += 1
        return real(roots, joined=joined, live=live)

    monkeypatch.setattr(kernel_feed, "locks_now", counted)
    feed = KernelFeed((str(tmp_path),), host=LOCAL_HOST)
    feed.poll(full=False)
    assert looks == 1  # nothing seen yet: a full look
    for _ in range(kernel_feed.FULL_EVERY - 1):
        change = feed.poll(full=False)
        assert change.statuses[0].state == "ok" and change.statuses[0].updated_at is not None
    assert looks == 1
    feed.poll(full=False)
    assert looks == 2  # every FULL_EVERY polls a full look all the same
    feed.poll(full=True)
    assert looks == 3  # woken by someone asking
    table.write_bytes(b"")
    feed.poll(full=False)
    assert looks == 4  # a lock came or went


def test_a_lock_renumbered_by_another_is_not_sent_again(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    fds = [os.open(path, os.O_RDWR | os.O_CREAT) for path in (first, second)]
    try:
        feed = KernelFeed((str(tmp_path),), host=LOCAL_HOST)
        fcntl.flock(fds[0], fcntl.LOCK_EX)
        change = feed.poll()
        (held,) = [entry.lock for entry in change.upserts]
        assert held.path == str(first)
        fcntl.flock(fds[1], fcntl.LOCK_EX)  # listed before it: the first one renumbered
        change = feed.poll()
        assert [entry.lock.path for entry in change.upserts] == [str(second)]
        assert not change.removed
    finally:
        for fd in fds:
            os.close(fd)
