"""The listener itself, in this process on a free loopback port: read-only,
the token where it is needed, gzip when asked, nothing else."""

from __future__ import annotations

import contextlib
import gzip
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from lockwatch.serve.access import Access
from lockwatch.serve.clients import ClientErrors
from lockwatch.serve.http import Endpoints, Limits, Server

TOKEN = "t0ken-for-tests"
BOUND_S = 20.0  # only keeps a broken run from hanging the suite
LOCKS = b'{"schema":"lockwatch.ls/1","locks":[' + b'{"id":"file:/x"},' * 200 + b"{}]}"


def serve(access: Access, healthy: bool = True) -> Iterator[str]:
    endpoints = Endpoints(
        access,
        metrics=lambda accept: (b"lockwatch_up 1\n" * 100, "text/plain; version=0.0.4"),
        locks=lambda: LOCKS,
        health=lambda: (healthy, "ok" if healthy else "starting: waiting for files"),
    )
    server = Server(("127.0.0.1", 0), socket.AF_INET, endpoints)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def guarded() -> Iterator[str]:
    yield from serve(Access(TOKEN))


def test_the_token_guards_locks_and_metrics(guarded: str) -> None:
    with httpx.Client(base_url=guarded) as client:
        for path in ("/v1/locks", "/metrics"):
            refused = client.get(path)
            assert refused.status_code == 401
            assert refused.headers["WWW-Authenticate"].startswith("Bearer")
            assert client.get(path, headers={"Authorization": "Bearer nope"}).status_code == 401
        answer = client.get("/v1/locks", headers={"Authorization": f"Bearer {TOKEN}"})
        assert answer.status_code == 200
        assert answer.content == LOCKS
        assert answer.headers["Content-Type"] == "application/json"
        assert answer.headers["Cache-Control"] == "no-store"
        assert client.get("/healthz").status_code == 200


def test_nothing_can_be_changed_through_it(guarded: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=guarded, headers=headers) as client:
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            answer = client.request(method, "/v1/locks", content=b"{}")
            assert answer.status_code == 405
            assert answer.headers["Allow"] == "GET, HEAD"
        assert client.get("/v1/locks/../../etc/passwd").status_code == 404
        assert client.get("/admin").status_code == 404
        head = client.head("/v1/locks", headers={"Accept-Encoding": "identity"})
        assert head.status_code == 200 and head.content == b""
        assert head.headers["Content-Length"] == str(len(LOCKS))


def test_gzip_only_when_asked() -> None:
    for url in serve(Access()):
        plain = httpx.get(f"{url}/v1/locks", headers={"Accept-Encoding": "identity"})
        assert "Content-Encoding" not in plain.headers and plain.content == LOCKS
        raw = httpx.get(f"{url}/metrics", headers={"Accept-Encoding": "gzip"})
        assert raw.headers["Content-Encoding"] == "gzip"
        assert raw.headers["Vary"] == "Accept-Encoding"
        # httpx has undone it; the bytes on the wire were gzip.
        assert raw.content == b"lockwatch_up 1\n" * 100
        assert int(raw.headers["Content-Length"]) < len(raw.content)
        assert gzip.decompress(gzip.compress(raw.content)) == raw.content


def test_health_says_503_until_collection_runs() -> None:
    for url in serve(Access(), healthy=False):
        answer = httpx.get(f"{url}/healthz")
        assert answer.status_code == 503
        assert "starting" in answer.text


@contextlib.contextmanager
def listening(limits: Limits, locks: bytes = LOCKS) -> Iterator[Server]:
    endpoints = Endpoints(
        Access(),
        metrics=lambda accept: (b"lockwatch_up 1\n", "text/plain; version=0.0.4"),
        locks=lambda: locks,
        health=lambda: (True, "ok"),
    )
    server = Server(
        ("127.0.0.1", 0), socket.AF_INET, endpoints, limits=limits, errors=ClientErrors(say=print)
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(BOUND_S)


def read_to_close(sock: socket.socket) -> bytes:
    sock.settimeout(BOUND_S)
    got = b""
    while chunk := sock.recv(1 << 20):
        got += chunk
    return got


def counted(server: Server, reason: str, at_least: int = 1) -> int:
    """The count of `reason`, once it reaches `at_least` (bounded wait: the
    listener counts as the connection ends, in its own thread)."""
    deadline = time.monotonic() + BOUND_S
    while server.errors.totals[reason] < at_least and time.monotonic() < deadline:
        time.sleep(0.01)
    return server.errors.totals[reason]


def test_a_large_answer_arrives_whole_before_the_close() -> None:
    big = b"x" * (3 * 1024 * 1024 + 17)
    with listening(Limits(), locks=big) as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(b"GET /v1/locks HTTP/1.1\r\nHost: lo\r\nConnection: close\r\n\r\n")
        got = read_to_close(sock)
        sock.close()
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\nContent-Length: %d\r\n" % len(big) in head + b"\r\n"
    assert body == big


def test_a_client_that_does_not_read_is_dropped_at_the_write_deadline() -> None:
    big = b"x" * (32 * 1024 * 1024)
    with listening(Limits(write_seconds=0.3), locks=big) as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"GET /v1/locks HTTP/1.1\r\nHost: lo\r\n\r\n")
        assert counted(server, "timeout") == 1
        sock.close()


def test_at_the_connection_cap_the_longest_waiting_is_dropped() -> None:
    with listening(Limits(max_connections=3, head_seconds=60)) as server:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
        # Every one of them taken in before the next connects.
        deadline = time.monotonic() + BOUND_S
        while server.errors.open_connections < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert httpx.get(f"http://127.0.0.1:{server.port}/healthz").status_code == 200
        assert counted(server, "evicted") == 1
        # The first to connect is the one dropped; the others wait on.
        assert read_to_close(idle[0]) == b""
        idle[1].setblocking(False)
        with pytest.raises(BlockingIOError):
            idle[1].recv(1)
        for sock in idle:
            sock.close()


def test_http_1_0_and_pipelined_requests() -> None:
    with listening(Limits()) as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        assert read_to_close(sock).startswith(b"HTTP/1.1 200 OK\r\n")
        sock.close()
        sock = socket.create_connection(("127.0.0.1", server.port))
        two = b"GET /healthz HTTP/1.1\r\nHost: lo\r\n\r\n" * 2
        sock.sendall(two + b"GET / HTTP/1.1\r\nHost: lo\r\nConnection: close\r\n\r\n")
        got = read_to_close(sock)
        sock.close()
        assert got.count(b"HTTP/1.1 200 OK\r\n") == 3


def test_what_is_not_http_is_400_and_counted() -> None:
    with listening(Limits()) as server:
        for junk in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", b"GET /\r\n\r\n"):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(junk)
            assert read_to_close(sock).startswith(b"HTTP/1.1 400 Bad Request\r\n")
            sock.close()
        assert counted(server, "bad_request", 2) == 2
