"""/v1/locks streamed (issue 35, item 6): from STREAM_FROM locks on the document
is rendered a batch at a time as it is written, chunked (and gzipped as it
goes), never made whole; what arrives is the very document `document()` makes."""

from __future__ import annotations

import gzip
import socket
import threading
import zlib
from collections.abc import Iterator
from datetime import timedelta

import httpx
import orjson

from lockwatch.clock import FrozenClock
from lockwatch.model.changes import ChangeSet, judge
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.status import SourceStatus
from lockwatch.serve import document as documents_module
from lockwatch.serve.access import Access
from lockwatch.serve.document import Documents, document
from lockwatch.serve.http import Endpoints, Server
from lockwatch.serve.watcher import Watcher
from tests.conftest import LOCAL_HOST, NOW

FEED = "redis:cache1:6379/0"


def watching(count: int) -> Watcher:
    watcher = Watcher([], host=LOCAL_HOST, clock=FrozenClock(NOW))
    locks = [
        Lock(
            id=f"file:/srv/locks/job-{n:06d}.lock",
            source="file",
            format="generic",
            name=f"job-{n}",
            path=f"/srv/locks/job-{n:06d}.lock",
            holder=Holder(session=f"token-{n}"),
            acquired_at=NOW - timedelta(seconds=n % 600),
        )
        for n in range(count)
    ]
    entries = judge(locks, StaticProcesses(), NOW, LOCAL_HOST)
    status = SourceStatus("file", "/srv/locks", "watching")
    watcher.receive(ChangeSet(FEED, NOW, (status,), upserts=tuple(entries), full=True))
    return watcher


def test_a_large_document_is_a_stream_rendered_in_batches_a_small_one_bytes() -> None:
    small = Documents(watching(10), LOCAL_HOST)
    assert isinstance(small.get(NOW), bytes)
    watcher = watching(documents_module.STREAM_FROM)
    made = Documents(watcher, LOCAL_HOST).get(NOW)
    assert callable(made)
    pieces = list(made())
    # Many pieces, none holding more than a batch of records.
    assert len(pieces) >= documents_module.STREAM_FROM // documents_module.BATCH
    assert max(piece.count(b'"id":') for piece in pieces) <= documents_module.BATCH
    assert b"".join(pieces) == document(watcher, NOW, LOCAL_HOST)
    assert b"".join(made()) == b"".join(pieces)  # each call renders it anew


def serving(endpoints: Endpoints) -> Iterator[str]:
    server = Server(("127.0.0.1", 0), socket.AF_INET, endpoints)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_streamed_document_goes_out_chunked_plain_and_gzipped() -> None:
    watcher = watching(documents_module.STREAM_FROM + 7)
    documents = Documents(watcher, LOCAL_HOST)
    whole = document(watcher, NOW, LOCAL_HOST)
    endpoints = Endpoints(
        Access(None),
        metrics=lambda accept: (b"", "text/plain"),
        locks=lambda: documents.get(NOW),
        health=lambda: (True, "ok"),
    )
    for url in serving(endpoints):
        with httpx.Client(base_url=url, timeout=20) as client:
            plain = client.get("/v1/locks", headers={"Accept-Encoding": "identity"})
            assert plain.status_code == 200
            assert plain.headers["Transfer-Encoding"] == "chunked"
            assert "Content-Length" not in plain.headers
            assert plain.content == whole
            assert len(orjson.loads(plain.content)["locks"]) == documents_module.STREAM_FROM + 7

            with client.stream("GET", "/v1/locks", headers={"Accept-Encoding": "gzip"}) as packed:
                assert packed.headers["Content-Encoding"] == "gzip"
                raw = b"".join(packed.iter_raw())
            assert gzip.decompress(raw) == whole
            assert zlib.decompress(raw, 31) == whole

            head = client.head("/v1/locks")
            assert head.status_code == 200 and head.content == b""
            # The connection is still good for the next request (the stream ended well).
            assert client.get("/healthz").status_code == 200
