"""A remote that drips: `--remote` gives every answer a deadline for the whole of
it (connect, headers, body), and a polled source that misses its deadline is
down ("stalled after N s"), keeps its last data marked with its age, and comes
back by itself when a poll answers again.

The remote is a loopback HTTP server in the test (one event-driven thread, a
selector and a stop event): it answers a real lockwatch.ls/1 document, all at
once or one byte per second from a given offset. Deadlines are configured short
so each test ends in a few seconds; each wait has a bound that only keeps a
broken run from hanging the suite.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from lockwatch.clock import FrozenClock, SystemClock
from lockwatch.model.changes import ChangeSet
from lockwatch.model.status import LIVE_STATES
from lockwatch.sources.polled import Polled, PolledFeed
from lockwatch.sources.remote import ids
from lockwatch.sources.remote.client import Fetcher, RemoteProblem
from lockwatch.sources.remote.endpoints import Remote
from lockwatch.sources.remote.poller import RemotePoller
from tests.conftest import LOCAL_HOST, NOW

# Only keeps a broken run (no deadline at all) from hanging the suite.
BOUND_S = 15.0
HOST = os.uname().nodename


def lock_record(lock_id: str = "file:/srv/locks/deploy.pid", **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": lock_id,
        "source": "file",
        "format": "generic",
        "name": lock_id.rsplit("/", 1)[-1].split(".")[0],
        "path": lock_id.removeprefix("file:"),
        "state": "stale",
        "reasons": [{"code": "holder_dead", "message": "holder pid 4242 is not running"}],
        "holder": {"pid": 4242, "host": None, "alive": False},
        "acquired_at": "2026-11-21T11:50:00Z",
        "age_seconds": 600.0,
        "scope": [],
        "blocking": [],
        "sha256": "ab" * 32,
    }
    record.update(fields)
    return record


def ls_document(*records: Any, host: str = "db7") -> bytes:
    return orjson.dumps(
        {
            "schema": "lockwatch.ls/1",
            "generated_at": "2026-11-21T12:00:00Z",
            "host": host,
            "sources": [{"kind": "file", "name": "/srv/locks", "status": "ok"}],
            "locks": list(records),
            "errors": [],
            "blocking": [],
        }
    )


def http_answer(body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@dataclass
class Answer:
    """What the server sends to each request: `data`, the first `drip_from`
    bytes at once and the rest one byte every `interval` seconds."""

    data: bytes
    drip_from: int | None = None  # None: all at once
    interval: float = 1.0


@dataclass
class _Conn:
    sock: socket.socket
    inbox: bytes = b""
    out: bytes = b""
    dripping: bool = False
    interval: float = 1.0
    next_at: float = 0.0


@dataclass
class Remote_:
    """A loopback 'lockwatch serve' that answers `answer` to every request."""

    answer: Answer
    requests: int = 0
    url: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)

    def serve(self) -> Iterator[Remote_]:
        listener = socket.create_server(("127.0.0.1", 0))
        listener.setblocking(False)
        self.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        thread = threading.Thread(target=self._loop, args=(listener,), daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(BOUND_S)
            listener.close()

    def _loop(self, listener: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ, None)
        conns: dict[int, _Conn] = {}
        while not self._stop.is_set():
            now = time.monotonic()
            due = [c.next_at for c in conns.values() if c.out and c.dripping]
            wait = max(0.0, min([*due, now + 0.05]) - now)
            for key, _ in selector.select(wait):
                if key.data is None:
                    sock, _ = listener.accept()
                    sock.setblocking(False)
                    conns[sock.fileno()] = _Conn(sock)
                    selector.register(sock, selectors.EVENT_READ, sock.fileno())
                    continue
                conn = conns[key.data]
                try:
                    chunk = conn.sock.recv(65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    selector.unregister(conn.sock)
                    conns.pop(key.data).sock.close()
                    continue
                conn.inbox += chunk
                if b"\r\n\r\n" in conn.inbox and not conn.out:
                    conn.inbox = conn.inbox.partition(b"\r\n\r\n")[2]
                    self.requests += 1
                    answer = self.answer
                    conn.out = answer.data
                    conn.interval = answer.interval
                    cut = len(answer.data) if answer.drip_from is None else answer.drip_from
                    self._send(conn, conn.out[:cut])
                    conn.out = conn.out[cut:]
                    conn.dripping = True
                    conn.next_at = time.monotonic()  # the first byte at once
            now = time.monotonic()
            for conn in list(conns.values()):
                if conn.out and conn.dripping and conn.next_at <= now:
                    self._send(conn, conn.out[:1])
                    conn.out = conn.out[1:]
                    conn.next_at = now + conn.interval
        for conn in conns.values():
            conn.sock.close()
        selector.close()

    @staticmethod
    def _send(conn: _Conn, data: bytes) -> None:
        conn.sock.setblocking(True)
        try:
            conn.sock.sendall(data)
        except OSError:
            pass
        finally:
            conn.sock.setblocking(False)


GOOD = http_answer(ls_document(lock_record()))
DRIP_ALL = Answer(GOOD, drip_from=0)
# Headers and the first bytes of the body at once, then a byte a second.
DRIP_BODY = Answer(GOOD, drip_from=GOOD.index(b"\r\n\r\n") + 10)


@pytest.fixture
def remote() -> Iterator[Remote_]:
    yield from Remote_(Answer(GOOD)).serve()


def fetch_within_bound(fetcher: Fetcher) -> tuple[bytes | RemoteProblem | None, float]:
    """The fetch's outcome and how long it took; None if it did not end within
    the bound (a fetch with no deadline)."""
    outcome: list[bytes | RemoteProblem] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append(fetcher.fetch())
        except RemoteProblem as problem:
            outcome.append(problem)
        done.set()

    started = time.monotonic()
    threading.Thread(target=run, daemon=True).start()
    finished = done.wait(BOUND_S)
    took = time.monotonic() - started
    return (outcome[0] if finished else None), took


@pytest.mark.parametrize("answer", [DRIP_ALL, DRIP_BODY], ids=["headers", "body"])
def test_a_dripping_remote_fails_within_the_deadline(remote: Remote_, answer: Answer) -> None:
    remote.answer = answer
    fetcher = Fetcher(Remote(remote.url), timeout=1.5)
    try:
        outcome, took = fetch_within_bound(fetcher)
    finally:
        fetcher.close()
    assert outcome is not None, f"a remote dripping a byte a second held the fetch {took:.0f}s"
    assert isinstance(outcome, RemoteProblem)
    assert outcome.state == "disconnected"
    assert outcome.reason.startswith("stalled after 1.5 s"), outcome.reason
    # The deadline is for the whole answer, with a scheduling margin only.
    assert took < 1.5 + 1.0


def test_a_good_answer_within_the_deadline_is_read(remote: Remote_) -> None:
    fetcher = Fetcher(Remote(remote.url), timeout=1.5)
    try:
        assert fetcher.fetch() == GOOD.partition(b"\r\n\r\n")[2]
        # Kept alive: the second request on the same connection, within its own deadline.
        assert fetcher.fetch() == GOOD.partition(b"\r\n\r\n")[2]
    finally:
        fetcher.close()


def test_ls_remote_against_a_dripping_remote_ends(remote: Remote_, tmp_path: Path) -> None:
    remote.answer = DRIP_ALL
    config = tmp_path / "lockwatch.toml"
    config.write_text("[remote]\ntimeout = 2\n")
    config.chmod(0o600)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--config", str(config), "--remote", remote.url],
        capture_output=True,
        text=True,
        timeout=BOUND_S + 30,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert f"remote {remote.url}: stalled after 2 s" in done.stderr
    assert took < BOUND_S


class Gate:
    """A poller whose polls wait for the test to let them answer: a stalled
    server, imitated (what stalls it is not the point: the feed's deadline is)."""

    name = "remote:http://db7:9464"

    def __init__(self) -> None:
        self.clock = FrozenClock(NOW)
        self.go = threading.Event()
        self.answer: Polled | None = None

    def poll(self) -> Polled:
        assert self.go.wait(BOUND_S)
        self.go.clear()
        assert self.answer is not None
        return self.answer

    def close(self) -> None:
        self.go.set()


async def changes_until(
    seen: list[ChangeSet], event: asyncio.Event, count: int, bound: float = BOUND_S
) -> None:
    while len(seen) < count:
        event.clear()
        await asyncio.wait_for(event.wait(), bound)


async def test_a_poll_past_its_deadline_is_a_stall_and_recovers_by_itself() -> None:
    from lockwatch.model.lock import Lock
    from lockwatch.model.status import SourceStatus

    gate = Gate()
    lock = Lock(id="remote:http://db7:9464#x", source="file", format="generic", name="x", path="/x")
    good = SourceStatus("remote", "http://db7:9464", "connected", "host db7", updated_at=NOW)
    gate.answer = Polled(NOW, (good,), [lock])
    feed = PolledFeed(gate, host=LOCAL_HOST, interval=0.05, deadline=0.3, clock=gate.clock)
    seen: list[ChangeSet] = []
    arrived = asyncio.Event()

    def emit(change: ChangeSet) -> None:
        seen.append(change)
        arrived.set()

    gate.go.set()  # the first poll answers at once
    task = asyncio.create_task(feed.run(emit))
    try:
        await changes_until(seen, arrived, 1)
        assert seen[0].statuses[0].state == "connected" and len(seen[0].upserts) == 1
        assert feed.health.up
        # The next poll does not answer: at its deadline the source is down,
        # its data kept (nothing removed) and dated.
        gate.clock.advance(41)
        await changes_until(seen, arrived, 2)
        stalled = seen[1]
        (status,) = stalled.statuses
        assert status.state not in LIVE_STATES
        assert status.reason is not None and status.reason.startswith("stalled after 0.3 s")
        assert status.updated_at == NOW  # what is shown is that old: "data from 41s ago"
        assert stalled.upserts == () and stalled.removed == ()
        down = feed.health
        assert not down.up and down.stalled_since == NOW + _seconds(41)
        assert down.last_success == NOW
        # It answers again: up, by itself.
        gate.answer = Polled(gate.clock.now(), (good,), [lock])
        gate.go.set()
        await changes_until(seen, arrived, 3)
        assert seen[2].statuses[0].state == "connected"
        back = feed.health
        assert back.up and back.stalled_since is None
    finally:
        task.cancel()
        gate.close()


def _seconds(n: float) -> Any:
    from datetime import timedelta

    return timedelta(seconds=n)


async def test_a_remote_that_answered_then_drips_is_stalled_not_connected(
    remote: Remote_,
) -> None:
    clock = SystemClock()
    poller = RemotePoller(Remote(remote.url), clock=clock, timeout=1.0, host=LOCAL_HOST)
    feed = PolledFeed(poller, host=LOCAL_HOST, interval=0.1, deadline=1.0, clock=clock)
    seen: list[ChangeSet] = []
    arrived = asyncio.Event()

    def emit(change: ChangeSet) -> None:
        seen.append(change)
        arrived.set()

    task = asyncio.create_task(feed.run(emit))
    try:
        await changes_until(seen, arrived, 1)
        first = seen[0]
        assert first.statuses[0].state == "connected"
        (entry,) = first.upserts
        assert entry.lock.id == ids.remote_id(remote.url, "file:/srv/locks/deploy.pid")
        remote.answer = DRIP_BODY
        # Polls go on every 0.1 s: the first that meets the drip stalls.
        while not any(c.statuses[0].state not in LIVE_STATES for c in seen):
            await changes_until(seen, arrived, len(seen) + 1)
        down = next(c for c in seen if c.statuses[0].state not in LIVE_STATES)
        assert (down.statuses[0].reason or "").startswith("stalled after 1 s")
        assert down.statuses[0].updated_at is not None
        assert down.removed == ()  # the last locks stay, dated
        assert not feed.health.up
        remote.answer = Answer(GOOD)
        while seen[-1].statuses[0].state not in LIVE_STATES:
            await changes_until(seen, arrived, len(seen) + 1)
        assert feed.health.up
    finally:
        task.cancel()
        await feed.close()


class Stuck:
    """A server poller whose poll never answers until the test ends: a server
    that stalls, imitated (the generic deadline of `ls` is the point)."""

    name = "redis:cache:6379/0"
    server = "cache:6379/0"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.closed = False

    def poll(self) -> Polled:
        self.release.wait(BOUND_S)
        raise AssertionError("released only when the test is over")

    def close(self) -> None:
        self.closed = True


def test_ls_gives_a_stalled_poll_up_at_its_deadline() -> None:
    from lockwatch.sources.contract import ListingRequest
    from lockwatch.sources.polled import collect_polled

    stuck = Stuck()
    started = time.monotonic()
    try:
        out = collect_polled([stuck], ListingRequest(NOW, LOCAL_HOST, False, 1), "redis", 0.5)
    finally:
        stuck.release.set()
    assert time.monotonic() - started < 0.5 + 1.0
    (status,) = out.statuses
    assert (status.kind, status.name, status.state) == ("redis", "cache:6379/0", "disconnected")
    assert out.warnings == ["redis cache:6379/0: stalled after 0.5 s: no answer to its poll"]
    assert out.assessed == []
