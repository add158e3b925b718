"""The listener itself, in this process on a free loopback port: read-only,
the token where it is needed, gzip when asked, nothing else."""

from __future__ import annotations

import gzip
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from lockwatch.serve.access import Access
from lockwatch.serve.http import Endpoints, Server

TOKEN = "t0ken-for-tests"
LOCKS = b'{"schema":"lockwatch.ls/1","locks":[' + b'{"id":"file:/x"},' * 200 + b"{}]}"


def serve(access: Access, healthy: bool = True) -> Iterator[str]:
    endpoints = Endpoints(
        access,
        metrics=lambda accept: (b"lockwatch_up 1\n" * 100, "text/plain; version=0.0.4"),
        locks=lambda: LOCKS,
        health=lambda: (healthy, "ok" if healthy else "starting: waiting for files"),
    )
    server = Server(("127.0.0.1", 0), socket.AF_INET, endpoints)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
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
