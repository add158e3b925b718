"""/v1/locks rendered a batch of records at a time (issue 35, item 6), once for
every reader of the same generation (issue 47, item 9: a rendering per stalled
reader cost 1.5 GB), and gzipped once for all of them; the listener still
streams a body made in pieces (chunked, gzipped as it goes) where an endpoint
hands it one. What arrives is the very document `document()` makes."""

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


LARGE = 5_007


def test_a_large_document_is_rendered_in_batches_once_for_every_reader() -> None:
    watcher = watching(LARGE)
    documents = Documents(watcher, LOCAL_HOST)
    made = documents.get(NOW)
    assert made == document(watcher, NOW, LOCAL_HOST)
    assert documents.get(NOW) is made  # shared, not rendered (and held) once per reader
    gathered = documents_module._gather(watcher, NOW, LOCAL_HOST)
    pieces = list(documents_module._arrays(gathered))
    assert len(pieces) >= LARGE // documents_module.BATCH
    assert max(piece.count(b'"id":') for piece in pieces) <= documents_module.BATCH


def serving(endpoints: Endpoints) -> Iterator[str]:
    server = Server(("127.0.0.1", 0), socket.AF_INET, endpoints)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_large_document_goes_out_whole_plain_and_gzipped_once() -> None:
    watcher = watching(LARGE)
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
            assert plain.status_code == 200 and plain.content == whole
            assert len(orjson.loads(plain.content)["locks"]) == LARGE
            packed = []
            for _ in range(2):
                with client.stream(
                    "GET", "/v1/locks", headers={"Accept-Encoding": "gzip"}
                ) as answer:
                    assert answer.headers["Content-Encoding"] == "gzip"
                    packed.append(b"".join(answer.iter_raw()))
            assert gzip.decompress(packed[0]) == whole
            assert packed[0] == packed[1]  # the one gzip of the shared document


def test_a_body_made_in_pieces_goes_out_chunked_plain_and_gzipped() -> None:
    whole = document(watching(LARGE), NOW, LOCAL_HOST)

    def pieces() -> Iterator[bytes]:
        for at in range(0, len(whole), 100_000):
            yield whole[at : at + 100_000]

    endpoints = Endpoints(
        Access(None),
        metrics=lambda accept: (b"", "text/plain"),
        locks=lambda: pieces,
        health=lambda: (True, "ok"),
    )
    for url in serving(endpoints):
        with httpx.Client(base_url=url, timeout=20) as client:
            plain = client.get("/v1/locks", headers={"Accept-Encoding": "identity"})
            assert plain.status_code == 200
            assert plain.headers["Transfer-Encoding"] == "chunked"
            assert "Content-Length" not in plain.headers
            assert plain.content == whole

            with client.stream("GET", "/v1/locks", headers={"Accept-Encoding": "gzip"}) as packed:
                assert packed.headers["Content-Encoding"] == "gzip"
                raw = b"".join(packed.iter_raw())
            assert gzip.decompress(raw) == whole
            assert zlib.decompress(raw, 31) == whole

            head = client.head("/v1/locks")
            assert head.status_code == 200 and head.content == b""
            # The connection is still good for the next request (the stream ended well).
            assert client.get("/healthz").status_code == 200
