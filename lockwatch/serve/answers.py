"""What the listener answers: each endpoint's Response, made in a worker thread
(Endpoints), gzipped for clients that accept it, and put on the wire by h11.
A body shared by many answers (the document of one generation) is gzipped once
for all of them (Packed). The listener (http.py) only speaks HTTP.
"""

from __future__ import annotations

import email.utils
import gzip
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http import HTTPStatus

import h11

from lockwatch import __version__
from lockwatch.model.text import terminal_safe
from lockwatch.serve.access import HEALTH, HISTORY, LOCKS, METRICS, Access

# Bodies smaller than this go out as they are: gzip would save nothing worth its time.
_GZIP_FROM = 1024
_SERVER = f"lockwatch/{__version__}".encode()


# An answer's body made as it is written: each call renders it anew, in pieces.
Stream = Callable[[], Iterator[bytes]]


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    compressible: bool = False
    # Instead of `body`: the body in pieces, each made in a worker and written
    # before the next is made (chunked: the length is not known beforehand).
    stream: Stream | None = None


@dataclass(frozen=True)
class Endpoints:
    """What each path answers; the listener only speaks HTTP."""

    access: Access
    metrics: Callable[[str | None], tuple[bytes, str]]  # Accept header -> body, content type
    locks: Callable[[], bytes | Stream]
    health: Callable[[], tuple[bool, str]]
    # The recorded episodes for a query string (`since=&until=`); None: no history.
    history: Callable[[str], Response] | None = None

    def answer(self, path: str, authorization: str | None, accept: str | None) -> Response:
        path, _, query = path.partition("?")
        if path not in (HEALTH, METRICS, LOCKS, HISTORY, "/"):
            return Response(404, b"not found: try /metrics, /v1/locks or /healthz\n")
        if not self.access.allows(path, authorization):
            return Response(
                401,
                b"a bearer token is required (Authorization: Bearer <token>)\n",
                headers={"WWW-Authenticate": 'Bearer realm="lockwatch"'},
            )
        if path == HEALTH:
            ok, why = self.health()
            return Response(200 if ok else 503, why.encode() + b"\n")
        if path == METRICS:
            body, content_type = self.metrics(accept)
            return Response(200, body, content_type, compressible=True)
        if path == HISTORY:
            if self.history is None:
                return Response(404, b"no history: lockwatch serve runs with --no-history\n")
            return self.history(query)
        if path == LOCKS:
            document = self.locks()
            if isinstance(document, bytes):
                return Response(200, document, "application/json", compressible=True)
            return Response(200, b"", "application/json", compressible=True, stream=document)
        return Response(
            200,
            b"lockwatch serve (read-only)\n"
            b"  /metrics   Prometheus metrics\n"
            b"  /v1/locks  the lockwatch.ls/1 document (lockwatch ls --json)\n"
            b"  /v1/history?since=&until=  recorded episodes (lockwatch history --json)\n"
            b"  /healthz   ok once every source has been read through, while collection runs\n",
        )


class Packed:
    """The last body gzipped, and its gzip: every reader of one shared body (the
    document of one generation) gets the one gzip of it, not a copy each."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._last: tuple[bytes, bytes] | None = None

    def gzip(self, body: bytes) -> bytes:
        with self._guard:
            last = self._last
            if last is not None and last[0] is body:
                return last[1]
            self._last = None  # let the last go before the next is made
            packed = gzip.compress(body, compresslevel=1)
            self._last = (body, packed)
            return packed


def prepared(response: Response, gzip_ok: bool, packed: Packed | None = None) -> Response:
    """`response` as it goes out: gzipped for a client that accepts it (in a
    worker thread, as the answer is made: not on the event loop); `packed`
    keeps the gzip of a body shared between answers."""
    if not response.compressible:
        return response
    headers = {**response.headers, "Vary": "Accept-Encoding"}
    stream = response.stream
    if stream is not None:
        if not gzip_ok:
            return replace(response, headers=headers)
        return replace(
            response,
            stream=lambda: gzipped(stream()),
            headers={**headers, "Content-Encoding": "gzip"},
        )
    if gzip_ok and len(response.body) >= _GZIP_FROM:
        body = (packed or Packed()).gzip(response.body)
        return replace(response, body=body, headers={**headers, "Content-Encoding": "gzip"})
    return replace(response, headers=headers)


def gzipped(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """`pieces` as one gzip stream, compressed as they come."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)  # 31: gzip's header and trailer
    for piece in pieces:
        packed = packer.compress(piece)
        if packed:
            yield packed
    yield packer.flush()


def answer_bytes(
    conn: h11.Connection, response: Response, *, head: bool, close: bool
) -> list[bytes]:
    """The whole answer on the wire: its status line and headers, and its body
    (a streamed one's head only: its pieces follow, then its end)."""
    body = response.body
    streamed = response.stream is not None
    headers: list[tuple[bytes, bytes]] = [
        (b"Server", _SERVER),
        (b"Date", email.utils.formatdate(usegmt=True).encode()),
        (b"Content-Type", response.content_type.encode()),
        *(() if streamed else ((b"Content-Length", str(len(body)).encode()),)),
        (b"Cache-Control", b"no-store"),
        (b"X-Content-Type-Options", b"nosniff"),
    ]
    headers.extend(
        (name.encode("latin-1"), value.encode("latin-1"))
        for name, value in response.headers.items()
    )
    if close:
        headers.append((b"Connection", b"close"))
    try:
        reason = HTTPStatus(response.status).phrase.encode()
    except ValueError:
        reason = b""
    out = [conn.send(h11.Response(status_code=response.status, headers=headers, reason=reason))]
    if streamed and not head:
        return [piece for piece in out if piece]
    if not head and body:
        out.extend(conn.send_with_data_passthrough(h11.Data(data=body)) or ())
    out.append(conn.send(h11.EndOfMessage()))
    return [piece for piece in out if piece]


def answer_safely(
    endpoints: Endpoints,
    path: str,
    authorization: str | None,
    accept: str | None,
    gzip_ok: bool,
    packed: Packed,
) -> Response:
    try:
        answer = endpoints.answer(path, authorization, accept)
        # The document is shared (one per generation); /metrics is made anew each time.
        return prepared(answer, gzip_ok, packed if path == LOCKS else None)
    except Exception as exc:  # noqa: BLE001 - a bug answers 500, the server goes on
        said = terminal_safe(f"{path[:200]}: {type(exc).__name__}: {exc}")[:500]
        print(f"lockwatch serve: {said}", file=sys.stderr, flush=True)
        return Response(500, b"internal error\n")
