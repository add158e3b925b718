"""Clients that ask for /v1/locks and never read cost serve a bounded amount of
memory (issue 47, item 9): with 50,000 pid files, 300 such clients took serve's
RSS from 125 MB to 1.59 GB, never released, and scrapes took 15 s. Now one
rendering of the document (and one gzip of it) is shared by every reader of
the same generation, each connection holds at most one piece of it beyond what
the kernel buffers, and it is written with back-pressure and a deadline.

Scaled down: a real `lockwatch serve` on 5,000 pid files and 50 clients that
never read (their receive buffers small, so the kernel holds little for them).
Memory is measured against the same serve's own baseline after a full scrape;
a scrape among the stalled clients still answers whole. No wall-time bound:
the waits are for events (bytes arriving), bounded only to end a broken run.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import select
import socket
import threading
from pathlib import Path

import httpx

from lockwatch.serve.access import Access
from lockwatch.serve.clients import ClientErrors
from lockwatch.serve.http import Endpoints, Limits, Server
from tests.serve.conftest import WAIT_S, dead_pid, serving

FILES = 5_000
CLIENTS = 50
# What 50 stalled readers may add to serve's RSS: a shared document and its gzip
# (about 3 MB and 0.3 MB here) and a piece of either per client.
GROWTH_LIMIT_KB = 48 * 1024


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def pid_files(root: Path, count: int) -> None:
    root.mkdir()
    gone = dead_pid()
    for n in range(count):
        (root / f"job-{n:05d}.pid").write_text(f"{gone}\n")


def stalled_reader(port: int, gzip: bool) -> socket.socket:
    """A connection that asks for /v1/locks and never reads the answer."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
    sock.settimeout(WAIT_S)
    sock.connect(("127.0.0.1", port))
    encoding = b"gzip" if gzip else b"identity"
    sock.sendall(b"GET /v1/locks HTTP/1.1\r\nHost: x\r\nAccept-Encoding: " + encoding + b"\r\n\r\n")
    return sock


def wait_answered(socks: list[socket.socket]) -> None:
    """Until each connection has the start of its answer waiting (serve is writing to it)."""
    waiting = set(socks)
    while waiting:
        ready, _, _ = select.select(list(waiting), [], [], WAIT_S)
        assert ready, f"{len(waiting)} stalled readers got no byte in {WAIT_S:.0f} s"
        waiting -= set(ready)


def test_stalled_readers_of_v1_locks_cost_bounded_memory(tmp_path: Path) -> None:
    pid_files(tmp_path / "locks", FILES)
    with serving([str(tmp_path / "locks")], tmp_path) as served:
        url = served.wait_healthy()
        port = int(url.rsplit(":", 1)[1])
        pid = served.process.pid
        for encoding in ("identity", "gzip"):  # the baseline has rendered both once
            answer = httpx.get(
                f"{url}/v1/locks", headers={"Accept-Encoding": encoding}, timeout=WAIT_S
            )
            assert len(answer.json()["locks"]) == FILES
        baseline = rss_kb(pid)
        socks = [stalled_reader(port, gzip=n % 2 == 0) for n in range(CLIENTS)]
        try:
            wait_answered(socks)
            # A reader among them is answered whole.
            scrape = httpx.get(f"{url}/v1/locks", timeout=WAIT_S)
            assert scrape.status_code == 200
            assert len(json.loads(scrape.content)["locks"]) == FILES
            growth = rss_kb(pid) - baseline
            assert growth < GROWTH_LIMIT_KB, f"RSS grew {growth:,} KB over {baseline:,} KB"
        finally:
            for sock in socks:
                sock.close()


BODY = 16 * 1024 * 1024  # far past what the kernel buffers for a connection


def test_stalled_readers_of_old_generations_are_dropped_past_the_cap() -> None:
    """Each request a new generation (a new body): stalled readers of the
    oldest are dropped once the bodies held for writers pass max_pinned_bytes.
    The listener is the real one, in this process, over a stand-in document."""
    made = itertools.count()

    def locks() -> bytes:
        return bytes([65 + next(made) % 26]) * BODY  # a new body each time

    endpoints = Endpoints(
        Access(),
        metrics=lambda accept: (b"", "text/plain"),
        locks=locks,
        health=lambda: (True, "ok"),
    )
    said: list[str] = []
    limits = Limits(max_pinned_bytes=BODY + BODY // 2, write_seconds=WAIT_S * 3)
    server = Server(
        ("127.0.0.1", 0),
        socket.AF_INET,
        endpoints,
        limits=limits,
        errors=ClientErrors(say=said.append),
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        first = stalled_reader(server.port, gzip=False)
        wait_answered([first])
        later = [stalled_reader(server.port, gzip=False)]  # the next generation's
        wait_answered(later)
        # The first reader's connection was dropped: what it gets ends short.
        got = 0
        with contextlib.suppress(ConnectionResetError):
            while chunk := first.recv(1 << 20):
                got += len(chunk)
        assert got < BODY
        # A reader that reads is answered whole.
        answer = httpx.get(f"http://127.0.0.1:{server.port}/v1/locks", timeout=WAIT_S)
        assert answer.status_code == 200 and len(answer.content) == BODY
        for sock in [first, *later]:
            sock.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT_S)
