"""What `lockwatch serve` says about its sources when they are slow to answer,
never answer, or stop answering: `/healthz` is not ready until every source's
first full look is in (a tree's first scan hands over locks in pieces before
its statuses), and every configured source has a `lockwatch_source_up` series,
0 for one that has not answered yet (a remote that drips from the start) or
that has gone quiet past its interval (a poll that hangs).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import orjson
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from lockwatch.clock import FrozenClock, SystemClock
from lockwatch.model.changes import ChangeSet
from lockwatch.model.status import SourceStatus
from lockwatch.serve.access import Access
from lockwatch.serve.document import document
from lockwatch.serve.http import Endpoints, Server
from lockwatch.serve.metrics import BoardCollector
from lockwatch.serve.watcher import STALL_SECONDS, Watcher
from lockwatch.sources.feed import Emit
from lockwatch.sources.remote.endpoints import Remote
from lockwatch.sources.remote.plugin import SelectedRemotes
from tests.adversarial.test_serve_abuse import get, sample
from tests.conftest import LOCAL_HOST, NOW

BOUND_S = 20.0


class Quiet:
    """A feed the test hands change sets for, through `watcher.receive`: the
    shapes real feeds send (named in each test), with nothing running."""

    def __init__(self, name: str, interval: float | None = None) -> None:
        self.name = name
        if interval is not None:
            self.interval = interval

    async def run(self, emit: Emit) -> None:
        return None

    async def close(self) -> None:
        return None


def scrape(watcher: Watcher) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BoardCollector(watcher, max_series=10))
    return generate_latest(registry).decode()


def test_health_waits_for_the_first_scan_to_be_whole() -> None:
    clock = FrozenClock(NOW)
    watcher = Watcher([("file", Quiet("files"))], host=LOCAL_HOST, clock=clock)
    watcher.tick()  # collection runs
    # As FileFeed's first scan: pieces of locks first, with no statuses ...
    watcher.receive(ChangeSet("files", NOW))
    ok, why = watcher.health()
    assert not ok and why == "starting: waiting for files"
    # ... then its last change set, with every root's status: the scan is whole.
    watcher.receive(ChangeSet("files", NOW, (SourceStatus("file", "/srv/locks", "watching"),)))
    assert watcher.health() == (True, "ok")


def test_health_waits_for_a_server_still_connecting() -> None:
    clock = FrozenClock(NOW)
    feed = Quiet("pg:monitor@db1:5432/app", interval=2.0)
    watcher = Watcher([("postgres", feed)], host=LOCAL_HOST, clock=clock)
    watcher.tick()
    connecting = SourceStatus("postgres", "monitor@db1:5432/app", "connecting")
    watcher.receive(ChangeSet(feed.name, NOW, (connecting,)))
    assert not watcher.health()[0]
    # A refusal is a look finished too: the source is down (and named), serve is ready.
    refused = SourceStatus("postgres", "monitor@db1:5432/app", "error", reason="refused")
    watcher.receive(ChangeSet(feed.name, NOW, (refused,)))
    assert watcher.health() == (True, "ok; down: postgres:monitor@db1:5432/app (error: refused)")


def test_healthz_answers_503_then_200() -> None:
    watcher = Watcher([("file", Quiet("files"))], host=LOCAL_HOST, clock=FrozenClock(NOW))
    watcher.tick()
    watcher.receive(ChangeSet("files", NOW))
    endpoints = Endpoints(
        Access(), metrics=lambda a: (b"", "text/plain"), locks=lambda: b"", health=watcher.health
    )
    server = Server(("127.0.0.1", 0), socket.AF_INET, endpoints)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        status, body = get(server.port, "/healthz")
        assert status == 503 and body == b"starting: waiting for files\n"
        watcher.receive(ChangeSet("files", NOW, (SourceStatus("file", "/srv", "watching"),)))
        assert get(server.port, "/healthz") == (200, b"ok\n")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(BOUND_S)


@pytest.fixture
def mute_remote() -> Iterator[str]:
    """A loopback 'remote' that takes connections (the kernel's backlog does)
    and never says a byte: a remote that drips, at its slowest."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(16)
        yield f"http://127.0.0.1:{listening.getsockname()[1]}"


def test_a_remote_that_never_answered_is_down_from_the_start(mute_remote: str) -> None:
    # The real remote source's feed, as `serve --remote` makes it, against a
    # server that never answers.
    selected = SelectedRemotes((Remote(mute_remote),), timeout=1.0, refresh=0.5)
    (feed,) = selected.feeds(SystemClock(), LOCAL_HOST)
    watcher = Watcher([("remote", feed)], host=LOCAL_HOST, tick_seconds=0.05)
    watcher.start()
    try:
        deadline = time.monotonic() + BOUND_S
        while watcher.health()[1] == "collection is not running":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        text = scrape(watcher)
        assert sample(text, "lockwatch_source_up", source="remote", name=mute_remote) == 0
        assert watcher.health() == (False, f"starting: waiting for remote:{mute_remote}")
        doc = orjson.loads(document(watcher, watcher.clock.now(), LOCAL_HOST))
        assert {"kind": "remote", "name": mute_remote, "status": "connecting"}.items() <= (
            doc["sources"][0].items()
        )
    finally:
        watcher.stop()


@dataclass
class Health:
    up: bool


def test_a_polled_source_gone_quiet_is_down_and_comes_back() -> None:
    clock = FrozenClock(NOW)
    feed = Quiet("redis:cache:6379", interval=2.0)
    watcher = Watcher([("redis", feed)], host=LOCAL_HOST, clock=clock)
    connected = SourceStatus("redis", "cache:6379", "connected", updated_at=NOW)
    watcher.receive(ChangeSet(feed.name, NOW, (connected,)))
    assert sample(scrape(watcher), "lockwatch_source_up", source="redis", name="cache:6379") == 1
    # Its poll hangs: nothing comes for its interval and the stall margin.
    clock.advance(2.0 + STALL_SECONDS + 1)
    text = scrape(watcher)
    assert sample(text, "lockwatch_source_up", source="redis", name="cache:6379") == 0
    with watcher.reading(clock.now()) as board:
        (status,) = watcher.statuses(board, clock.now())
    assert status.state == "error" and status.reason == "stalled: nothing from it for 33 s"
    # It answers again: up again.
    watcher.receive(ChangeSet(feed.name, clock.now(), (connected,)))
    assert sample(scrape(watcher), "lockwatch_source_up", source="redis", name="cache:6379") == 1


def test_a_feed_that_says_it_is_stalled_is_down_at_once() -> None:
    clock = FrozenClock(NOW)
    feed = Quiet("remote:http://db7:9464", interval=2.0)
    health = Health(up=True)
    feed.health = health  # type: ignore[attr-defined]
    watcher = Watcher([("remote", feed)], host=LOCAL_HOST, clock=clock)
    connected = SourceStatus("remote", "http://db7:9464", "connected", updated_at=NOW)
    watcher.receive(ChangeSet(feed.name, NOW, (connected,)))
    assert sample(scrape(watcher), "lockwatch_source_up", source="remote") == 1
    health.up = False
    clock.advance(timedelta(seconds=1).total_seconds())
    assert sample(scrape(watcher), "lockwatch_source_up", source="remote") == 0
