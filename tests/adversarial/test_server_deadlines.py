"""Servers that drip: Redis, etcd, PostgreSQL and MySQL each give a poll a
deadline for the whole answer (connecting, asking, every byte of it), not per
read. A server that answers one byte every half second trips no per-read
timeout (2-3 s); the poll must still end at its deadline with one line,
"stalled after N s", and the next poll, once the server answers again, succeeds.

The servers are the real ones (the machine's Redis, MariaDB and PostgreSQL),
seen through a loopback proxy in the test that passes their answers on whole,
or one byte at a time (`Proxy.drip`). etcd is not installed here: a small HTTP
server in the test stands in for its JSON gateway (an imitation: the same
/v3/kv/range answer etcd gives for an empty prefix), whole or dripping.

Deadlines are 1.5 s so each test takes a few seconds; each wait has a bound
that only keeps a broken run (no deadline at all) from hanging the suite.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from lockwatch.clock import SystemClock
from lockwatch.sources.deadline import DeadlineMissed, whole_answer

DEADLINE = 1.5
# A poll past its deadline by more than this has no deadline: only keeps a broken
# run from hanging, and leaves room for a loaded machine.
BOUND = 6.0
DRIP_EVERY = 0.5  # under every per-read timeout
STALLED = f"stalled after {DEADLINE:g} s"


class Proxy:
    """A loopback TCP proxy to `upstream`: answers passed on whole, or, while
    `drip` is set, one byte every DRIP_EVERY seconds (requests always whole)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.drip = threading.Event()
        self._stop = threading.Event()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.2)
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            for source, sink, answers in ((client, server, False), (server, client, True)):
                thread = threading.Thread(
                    target=self._pump, args=(source, sink, answers), daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def _pump(self, source: socket.socket, sink: socket.socket, answers: bool) -> None:
        source.settimeout(None)
        # A broken run (no deadline) would wait for every byte of a large answer:
        # past BOUND the rest goes whole, and the run fails on its time instead.
        dripped_until = time.monotonic() + BOUND
        try:
            while not self._stop.is_set():
                data = source.recv(65536)
                if not data:
                    break
                while data:
                    if answers and self.drip.is_set() and time.monotonic() < dripped_until:
                        sink.sendall(data[:1])
                        data = data[1:]
                        self._stop.wait(DRIP_EVERY)
                    else:
                        sink.sendall(data)
                        data = b""
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # (close alone would not wake a pump)
            sock.close()
        for thread in self._threads:
            thread.join(timeout=BOUND)


@contextlib.contextmanager
def proxy_to(host: str, port: int, what: str) -> Iterator[Proxy]:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError as exc:
        require = {"redis": "PG", "mysql": "MYSQL", "postgres": "PG"}[what]
        if os.environ.get(f"LOCKWATCH_REQUIRE_{require}") == "1":
            pytest.fail(f"LOCKWATCH_REQUIRE_{require}=1 but no {what} at {host}:{port}: {exc}")
        pytest.skip(f"no {what} at {host}:{port}: {exc}")
    proxy = Proxy((host, port))
    try:
        yield proxy
    finally:
        proxy.close()


def timed(poll: Any) -> tuple[Any, float]:
    start = time.monotonic()
    answer = poll()
    return answer, time.monotonic() - start


def state(poller: Any) -> str:
    """Its status's state (a plain str: the checks compare it before and after)."""
    return str(poller.status.state)


def assert_stalled(reason: str | None, took: float) -> None:
    assert reason is not None and reason.startswith(STALLED), reason
    assert "\n" not in reason
    assert DEADLINE - 0.1 <= took < DEADLINE + BOUND, took


# ------------------------------------------------------------------------ the mechanism


def test_a_read_that_never_ends_is_cut_at_the_deadline() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        start = time.monotonic()
        with (
            pytest.raises(DeadlineMissed, match=r"stalled after 0\.3 s"),
            whole_answer(0.3, lambda: [ours]),
        ):
            while ours.recv(1):  # the peer never writes: only the deadline ends this
                pass
        assert time.monotonic() - start < BOUND


def test_a_block_done_in_time_is_left_alone() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(b"x")
        with whole_answer(5.0, lambda: [ours]):
            assert ours.recv(1) == b"x"
        theirs.sendall(b"y")
        assert ours.recv(1) == b"y"  # still open: nothing was cut


# --------------------------------------------------------------------------------- Redis


def test_redis_stalls_at_its_deadline_and_comes_back() -> None:
    from lockwatch.sources.redis.endpoint import parse
    from lockwatch.sources.redis.server import RedisServer

    with proxy_to("127.0.0.1", 6379, "redis") as proxy:
        endpoint = parse(f"redis://127.0.0.1:{proxy.port}/13", {})
        server = RedisServer(endpoint, ("lock:*",), timeout=3.0, deadline=DEADLINE)
        try:
            assert server.poll() is not None, server.status
            proxy.drip.set()
            snapshot, took = timed(server.poll)
            assert snapshot is None and state(server) == "disconnected"
            assert_stalled(server.status.reason, took)
            assert server.last is not None  # the last picture is kept, dated
            proxy.drip.clear()
            assert server.poll() is not None, server.status
            assert state(server) == "connected"
        finally:
            server.close()


def test_redis_connecting_to_a_dripping_server_stalls_too() -> None:
    from lockwatch.sources.redis.endpoint import parse
    from lockwatch.sources.redis.server import RedisServer

    with proxy_to("127.0.0.1", 6379, "redis") as proxy:
        proxy.drip.set()
        # A password makes the connection's first exchange (AUTH) an answer to wait for.
        endpoint = parse(f"redis://127.0.0.1:{proxy.port}/13", {"REDISCLI_AUTH": "x"})
        server = RedisServer(endpoint, ("lock:*",), timeout=3.0, deadline=DEADLINE)
        try:
            snapshot, took = timed(server.poll)
            assert snapshot is None
            assert_stalled(server.status.reason, took)
        finally:
            server.close()


# ---------------------------------------------------------------------------------- etcd


class Gateway(BaseHTTPRequestHandler):
    """etcd's JSON gateway, as far as an empty /locks prefix goes (an imitation)."""

    drip: threading.Event
    stop: threading.Event
    body = b'{"header":{"cluster_id":"1","member_id":"2","revision":"7","raft_term":"2"}}'

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        if not self.drip.is_set():
            self.wfile.write(self.body)
            return
        for byte in self.body:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            if self.stop.wait(DRIP_EVERY):
                return

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def gateway() -> Iterator[tuple[ThreadingHTTPServer, threading.Event]]:
    drip, stop = threading.Event(), threading.Event()
    handler = type("Handler", (Gateway,), {"drip": drip, "stop": stop})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, drip
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=BOUND)


def test_etcd_stalls_at_its_deadline_and_comes_back(
    gateway: tuple[ThreadingHTTPServer, threading.Event],
) -> None:
    from lockwatch.sources.etcd.endpoint import parse
    from lockwatch.sources.etcd.server import EtcdServer

    server_, drip = gateway
    endpoint = parse(f"http://127.0.0.1:{server_.server_address[1]}")
    server = EtcdServer(endpoint, ("/locks",), clock=SystemClock(), deadline=DEADLINE)
    try:
        assert server.poll() is not None, server.status
        drip.set()
        snapshot, took = timed(server.poll)
        assert snapshot is None and state(server) == "disconnected"
        assert_stalled(server.status.reason, took)
        drip.clear()
        assert server.poll() is not None, server.status
        assert state(server) == "connected"
    finally:
        server.close()


# ----------------------------------------------------------------------------- MySQL


def test_mysql_stalls_at_its_deadline_and_comes_back() -> None:
    from lockwatch.sources.mysql.dsn import parse
    from lockwatch.sources.mysql.server import MyServer

    with proxy_to("127.0.0.1", 3306, "mysql") as proxy:
        endpoint = parse(f"mysql://root@127.0.0.1:{proxy.port}/test", {"USER": "root"})
        server = MyServer(endpoint, timeout=3.0, deadline=DEADLINE, client_finder=None)
        try:
            polled = server.poll()
            assert polled.locks is not None, server.status
            proxy.drip.set()
            polled, took = timed(server.poll)
            assert polled.locks is None and state(server) == "disconnected"
            assert_stalled(server.status.reason, took)
            proxy.drip.clear()
            assert server.poll().locks is not None, server.status
            assert state(server) == "connected"
        finally:
            server.close()


def test_mysql_connecting_to_a_dripping_server_stalls_too() -> None:
    from lockwatch.sources.mysql.dsn import parse
    from lockwatch.sources.mysql.server import MyServer

    with proxy_to("127.0.0.1", 3306, "mysql") as proxy:
        proxy.drip.set()  # the server's greeting, a byte at a time
        endpoint = parse(f"mysql://root@127.0.0.1:{proxy.port}/test", {"USER": "root"})
        server = MyServer(endpoint, timeout=3.0, deadline=DEADLINE, client_finder=None)
        try:
            polled, took = timed(server.poll)
            assert polled.locks is None
            assert_stalled(server.status.reason, took)
        finally:
            server.close()


def test_mysql_statements_are_limited_on_the_server_too() -> None:
    from lockwatch.sources.mysql.dsn import parse
    from lockwatch.sources.mysql.server import MyServer

    with proxy_to("127.0.0.1", 3306, "mysql"):
        endpoint = parse("mysql://root@127.0.0.1:3306/test", {"USER": "root"})
        server = MyServer(endpoint, timeout=3.0, client_finder=None)
        try:
            with server.connect().cursor() as cursor:
                cursor.execute("SELECT @@max_statement_time")
                (limit,) = cursor.fetchone() or (None,)
            assert float(str(limit)) == 3.0
        finally:
            server.close()


# ------------------------------------------------------------------------ PostgreSQL


def test_postgres_stalls_at_its_deadline_and_comes_back() -> None:
    from lockwatch.sources.postgres.source import PgSource

    with proxy_to("127.0.0.1", 5432, "postgres") as proxy:
        dsn = (
            f"host=127.0.0.1 port={proxy.port} user=postgres dbname=postgres"
            " sslmode=disable gssencmode=disable"
        )
        source = PgSource(dsn, deadline_s=DEADLINE, client_finder=None)

        async def polls() -> None:
            try:
                assert await source.poll() is not None, source.status
                proxy.drip.set()
                start = time.monotonic()
                snapshot = await source.poll()
                took = time.monotonic() - start
                assert snapshot is None and state(source) == "disconnected"
                assert_stalled(source.status.reason, took)
                proxy.drip.clear()
                assert await source.poll() is not None, source.status
                assert state(source) == "connected"
            finally:
                await source.close()

        asyncio.run(polls())
