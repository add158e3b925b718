"""Request heads over serve's 64 KiB, or with more than 100 header fields, are
431 however they are written (issue 47, item 20): h11 bounds a head only while
it is incomplete, so one written whole in one `send` was parsed at any size (a
70 KB header and 10,000 headers were 200; a 100 KB URL was 404).

The listener is the real one (h11, asyncio, loopback sockets) of
test_serve_abuse.py, over trivial endpoints.
"""

from __future__ import annotations

import socket

import pytest

from lockwatch.serve.http import Limits, Server
from tests.adversarial.test_serve_abuse import BOUND_S, listener

__all__ = ["listener"]  # the fixture, imported for these tests

LIMITS = Limits()


def ask_in_one_write(port: int, head: bytes) -> bytes:
    """`head` sent in one write; what came back before the close (or reset)."""
    with socket.create_connection(("127.0.0.1", port), timeout=BOUND_S) as sock:
        sock.sendall(head)
        got = b""
        try:
            while chunk := sock.recv(65536):
                got += chunk
        except ConnectionResetError:
            pass  # closed with our bytes unread: what it said came first
        return got


HEADS = {
    "a 70 KB header": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n",
    "10,000 headers": b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    + b"".join(b"X-%d: 1\r\n" % n for n in range(10_000))
    + b"\r\n",
    "a 100 KB URL": b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    "101 headers": b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    + b"".join(b"X-%d: 1\r\n" % n for n in range(LIMITS.max_headers))
    + b"\r\n",
}


@pytest.mark.parametrize("what", sorted(HEADS))
def test_a_head_over_the_limits_in_one_write_is_431(
    listener: tuple[Server, list[str]], what: str
) -> None:
    server, _ = listener
    got = ask_in_one_write(server.port, HEADS[what])
    assert got.startswith(b"HTTP/1.1 431 "), got[:200]
    assert b"Connection: close" in got


def test_a_head_within_the_limits_is_answered(listener: tuple[Server, list[str]]) -> None:
    server, _ = listener
    head = (
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: "
        + b"a" * (LIMITS.max_head_bytes - 2048)
        + b"\r\n"
        + b"".join(b"X-%d: 1\r\n" % n for n in range(LIMITS.max_headers - 3))
        + b"\r\n"
    )
    got = ask_in_one_write(server.port, head)
    assert got.startswith(b"HTTP/1.1 200 "), got[:200]
