"""The headless collection: feeds into one Board on a loop of its own, a feed
that fails started again (its sources saying `error` meanwhile), health that
tells starting from running."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from lockwatch.model.changes import ChangeSet
from lockwatch.model.status import SourceStatus
from lockwatch.serve.watcher import Watcher
from lockwatch.sources.feed import Emit
from tests.conftest import LOCAL_HOST

WATCHING = SourceStatus("file", "/srv/locks", "watching")


def eventually(condition: Callable[[], object], what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


class Flaky:
    """Fails on its first run, after reporting; then runs until cancelled."""

    name = "files"

    def __init__(self) -> None:
        self.runs = 0
        self.closed = False

    async def run(self, emit: Emit) -> None:
        self.runs += 1
        from lockwatch.clock import SystemClock

        emit(ChangeSet(self.name, SystemClock().now(), (WATCHING,)))
        if self.runs == 1:
            raise RuntimeError("inotify limit reached")
        await asyncio.Event().wait()

    async def close(self) -> None:
        self.closed = True


class Silent:
    name = "pg:monitor@db1:5432/app"

    async def run(self, emit: Emit) -> None:
        await asyncio.Event().wait()

    async def close(self) -> None:
        return None


def test_a_failed_feed_is_started_again_and_says_so_meanwhile() -> None:
    flaky = Flaky()
    watcher = Watcher([("file", flaky)], host=LOCAL_HOST, tick_seconds=0.05)
    watcher.start()
    try:
        eventually(lambda: flaky.runs >= 1, "the first run")

        def status() -> SourceStatus:
            with watcher.reading(watcher.clock.now()) as board:
                return board.statuses["files"][0]

        eventually(lambda: status().state == "error", "the error shown")
        assert "inotify limit reached" in (status().reason or "")
        assert "started again" in (status().reason or "")
        eventually(lambda: flaky.runs == 2 and status().state == "watching", "a second run")
        eventually(lambda: watcher.health() == (True, "ok"), "healthy")
        assert ("file", "/srv/locks") in watcher.last_success
        assert "file" in watcher.durations
    finally:
        watcher.stop()
    assert flaky.closed


def test_health_waits_for_every_feed() -> None:
    watcher = Watcher([("postgres", Silent())], host=LOCAL_HOST, tick_seconds=0.05)
    assert watcher.health() == (False, "collection is not running")
    watcher.start()
    try:
        eventually(lambda: watcher.health()[1] != "collection is not running", "a tick")
        assert watcher.health() == (False, "starting: waiting for pg:monitor@db1:5432/app")
    finally:
        watcher.stop()
