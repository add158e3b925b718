"""The listener: one event loop for every connection, a few worker threads for
the answers, GET and HEAD only (nothing can be changed through it).

Endpoints: /metrics (Prometheus text, or OpenMetrics when asked), /v1/locks
(the lockwatch.ls/1 document), /healthz, and / (what is here). Bodies are
gzipped for clients that accept it.

Slow and vanishing clients cost a scrape nothing: connections are read on the
event loop (h11 parses them), so one waiting for a client's bytes holds no
thread; only a complete request takes a worker. Every connection has deadlines
(its request's line and headers, an idle kept-alive wait, the writing of an
answer) and there are at most `max_connections` of them: past it, the one that
has waited longest for a request is dropped. The listen backlog is deep, so a
burst of connections does not leave a scrape's SYN unanswered. Answers go out
in one write on a TCP_NODELAY socket: a kept-alive request is not held back by
Nagle's algorithm waiting for a delayed ACK (44 ms).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11

from lockwatch.model.text import terminal_safe
from lockwatch.serve.access import HISTORY, METRICS
from lockwatch.serve.answers import (
    Endpoints,
    Packed,
    Response,
    Stream,
    answer_bytes,
    answer_safely,
)
from lockwatch.serve.clients import (
    BAD_REQUEST,
    CLOSED_EARLY,
    EVICTED,
    RESET,
    TIMEOUT,
    ClientErrors,
)

_READ_ONLY = "GET, HEAD"
# Where the listener's users take them from (the answers are answers.py's).
__all__ = ["THREAD_NAME", "Endpoints", "Limits", "Response", "Server", "Stream"]

# The event loop's thread and the workers' (at most 15 characters: the kernel's limit).
THREAD_NAME = "lockwatch-http"
# Answers up to this size go out in one write; larger ones in pieces this size,
# so a client that reads slowly holds no more than one piece of ours in memory
# (4,096 connections: 256 MiB at most, beside the bodies they share).
_PIECE = 64 * 1024


@dataclass(frozen=True)
class Limits:
    """What a client may take; past a deadline its connection is closed."""

    head_seconds: float = 10.0  # a request's line and headers, from its first byte (or connect)
    idle_seconds: float = 60.0  # waiting for the next request on a kept-alive connection
    write_seconds: float = 30.0  # the writing of one answer
    linger_seconds: float = 2.0  # a request body nobody reads, drained before the close
    max_head_bytes: int = 64 * 1024  # a request's line and headers, however they arrive
    max_headers: int = 100  # as Apache's LimitRequestFields
    max_connections: int = 4096
    # Answers' bodies held for the connections writing them, in all (the document
    # of one generation is one body however many read it): past it the slowest go.
    max_pinned_bytes: int = 256 * 1024 * 1024
    workers: int = 4  # threads that make answers (metrics, the document)
    backlog: int = 4096  # the kernel caps it at net.core.somaxconn


# What makes two requests' answers the same: path, allowed or not, Accept (for
# /metrics), gzip or not.
_Key = tuple[str, bool, str | None, bool]


class _Ended(Exception):
    """A connection ends for a client's fault: `reason` is counted."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.evicted = False


class Server:
    """Bound and listening from construction (an address in use fails here);
    answering from `serve_forever` (in a thread of its own) until `shutdown`."""

    def __init__(
        self,
        address: tuple[str, int],
        family: socket.AddressFamily,
        endpoints: Endpoints,
        *,
        limits: Limits | None = None,
        errors: ClientErrors | None = None,
    ) -> None:
        self.endpoints = endpoints
        self.limits = limits or Limits()
        self.errors = errors or ClientErrors()
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(self.limits.backlog)
        except OSError:
            sock.close()
            raise
        self.socket = sock
        self.server_address = sock.getsockname()
        # Open connections, and those waiting for a request (the longest waiting first).
        self._open: set[_Connection] = set()
        self._waiting: dict[_Connection, None] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stopping = threading.Event()
        self._running = threading.Event()
        self._done = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._slots: asyncio.Semaphore | None = None
        self._flights: dict[_Key, asyncio.Future[Response]] = {}
        self._packed = Packed()
        # Bodies being written, by id, oldest first: their size and their writers.
        self._pinned: dict[int, tuple[int, set[_Connection]]] = {}

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    # -- running ---------------------------------------------------------------------

    def serve_forever(self) -> None:
        self._running.set()
        _name_thread()
        try:
            asyncio.run(self._main())
        finally:
            self._done.set()

    def shutdown(self) -> None:
        self._stopping.set()
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has ended already
                loop.call_soon_threadsafe(stop.set)
        if self._running.is_set():
            self._done.wait(10)

    def server_close(self) -> None:
        self.socket.close()

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(self._loop_trouble)
        self._stop = asyncio.Event()
        self._loop = loop
        if self._stopping.is_set():
            return
        limits = self.limits
        self._pool = ThreadPoolExecutor(
            limits.workers, thread_name_prefix=THREAD_NAME, initializer=_name_thread
        )
        self._slots = asyncio.Semaphore(limits.workers)
        server = await asyncio.start_server(
            self._connected, sock=self.socket, backlog=limits.backlog
        )
        flushing = asyncio.create_task(self._flush_errors())
        try:
            await self._stop.wait()
        finally:
            flushing.cancel()
            server.close()
            for conn in list(self._open):
                conn.writer.transport.abort()
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def _flush_errors(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.errors.flush()

    def _loop_trouble(self, loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        """asyncio's own reports (a transport's error, accept out of file
        descriptors): one line on the errors' schedule, never a traceback."""
        exc = context.get("exception")
        if isinstance(exc, ConnectionError):
            self.errors.count(RESET)
            return
        message = str(context.get("message") or "listener trouble")
        if isinstance(exc, BaseException):
            message = f"{message}: {type(exc).__name__}: {exc}"
        self.errors.note(terminal_safe(message)[:300])

    # -- one connection ------------------------------------------------------------------

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Connection(reader, writer)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # A write is waited for until all of it is with the kernel: an answer is
        # whole within its deadline, and nothing of it is left behind at the close.
        writer.transport.set_write_buffer_limits(high=0)
        if len(self._open) >= self.limits.max_connections:
            self._make_room()
        self._open.add(conn)
        self.errors.open_connections = len(self._open)
        reason: str | None = None
        try:
            await self._converse(conn)
        except _Ended as ended:
            reason = ended.reason
        except TimeoutError:  # an OSError too: before it
            reason = TIMEOUT
        except OSError:
            reason = RESET
        except asyncio.CancelledError:
            # The listener stops: the connection ends with it. Not raised on:
            # asyncio's stream callback would report a cancelled task as an error.
            pass
        finally:
            self._open.discard(conn)
            self._waiting.pop(conn, None)
            self.errors.open_connections = len(self._open)
            writer.transport.abort()
        if conn.evicted:
            reason = EVICTED
        if reason is not None:
            self.errors.count(reason)

    def _make_room(self) -> None:
        """Drop the connection that has waited longest for its request (none
        being answered is dropped: its client did nothing wrong)."""
        for conn in self._waiting:
            conn.evicted = True
            self._waiting.pop(conn)
            conn.writer.transport.abort()
            return

    async def _converse(self, conn: _Connection) -> None:
        limits = self.limits
        h = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.max_head_bytes)
        first = True
        while True:
            self._waiting[conn] = None
            try:
                request = await self._request(conn, h, first)
            finally:
                self._waiting.pop(conn, None)
            if request is None:
                return
            close = await self._respond(conn, h, request)
            if close or h.our_state is not h11.DONE or h.their_state is not h11.DONE:
                if close:
                    await self._linger(conn)
                return
            h.start_next_cycle()
            first = False

    async def _request(
        self, conn: _Connection, h: h11.Connection, first: bool
    ) -> tuple[h11.Request, bool] | None:
        """The next request, and whether a body follows it; None: the client
        closed between requests, or stayed idle past the idle deadline."""
        loop = asyncio.get_running_loop()
        limits = self.limits
        now = loop.time()
        # The first request's deadline runs from the connect; a later one's from
        # its first byte, after an idle wait of its own.
        started: float | None = now if first else None
        idle_until = now + limits.idle_seconds
        eof = False
        request: h11.Request | None = None
        while True:
            try:
                event = h.next_event()
            except h11.RemoteProtocolError as exc:
                if eof:
                    raise _Ended(CLOSED_EARLY) from None
                await self._refuse(conn, h, exc)
                raise _Ended(BAD_REQUEST) from None
            if isinstance(event, h11.Request):
                too_large = self._head_too_large(event)
                if too_large is not None:
                    await self._refuse(conn, h, too_large)
                    raise _Ended(BAD_REQUEST)
                request = event
                framing = {name for name, _ in event.headers}
                if b"content-length" in framing or b"transfer-encoding" in framing:
                    # A body nobody here reads: answered now, the connection
                    # closed after it, so its bytes are never taken for a request.
                    return request, True
                continue
            if isinstance(event, h11.EndOfMessage) and request is not None:
                return request, False
            if isinstance(event, h11.ConnectionClosed):
                return None  # between requests: as keep-alive allows
            if event is not h11.NEED_DATA:
                raise _Ended(BAD_REQUEST)  # cannot happen for a request; ends it if it does
            if started is None:
                deadline, late = idle_until, None
            else:
                deadline, late = started + limits.head_seconds, TIMEOUT
            try:
                async with asyncio.timeout_at(deadline):
                    data = await conn.reader.read(65536)
            except TimeoutError:
                if late is None:
                    return None  # idle for long: closed, as keep-alive allows
                raise _Ended(late) from None
            if not data:
                eof = True
                if first and h.their_state is h11.IDLE and not _buffered(h):
                    return None  # connected and closed without a word: a port probe
            elif started is None:
                started = loop.time()
            h.receive_data(data)

    def _head_too_large(self, event: h11.Request) -> h11.RemoteProtocolError | None:
        """Why a request's head is over the limits (a 431), or None. h11 bounds a
        head only while it is incomplete: one that arrives whole in one read is
        parsed whatever its size, so it is measured here as parsed."""
        limits = self.limits
        if len(event.headers) > limits.max_headers:
            why = f"more than {limits.max_headers} header fields"
            return h11.RemoteProtocolError(why, error_status_hint=431)
        # The request line and each "name: value\r\n", as they were on the wire
        # (give or take the spaces h11 strips).
        size = len(event.method) + len(event.target) + 12
        size += sum(len(name) + len(value) + 4 for name, value in event.headers)
        if size > limits.max_head_bytes:
            why = f"request line and headers over {limits.max_head_bytes >> 10} KiB"
            return h11.RemoteProtocolError(why, error_status_hint=431)
        return None

    async def _respond(
        self, conn: _Connection, h: h11.Connection, request: tuple[h11.Request, bool]
    ) -> bool:
        """Answer the request; whether the connection ends after it."""
        event, has_body = request
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in event.headers}
        method = event.method
        if method not in (b"GET", b"HEAD"):
            response = Response(405, b"read-only: GET or HEAD\n", headers={"Allow": _READ_ONLY})
        else:
            target = urlsplit(event.target.decode("latin-1"))
            path = target.path
            if path == HISTORY and target.query:
                path = f"{path}?{target.query}"  # its time range: a key of its own
            answered = await self._answer(conn, path, headers)
            if answered is None:
                raise _Ended(CLOSED_EARLY)
            response = answered
        head = method == b"HEAD"
        pieces = answer_bytes(h, response, head=head, close=has_body)
        with self._pinning(conn, b"" if head else response.body):
            await self._write(conn, pieces)
        if response.stream is not None and not head:
            if not await self._stream(conn, h, response.stream):
                return True
            await self._write(conn, [piece for piece in [h.send(h11.EndOfMessage())] if piece])
        return has_body

    @contextlib.contextmanager
    def _pinning(self, conn: _Connection, body: bytes) -> Iterator[None]:
        """While `conn` writes `body`, the body is held for it. Bodies held so
        stay within `max_pinned_bytes` in all: past it, the connections still
        writing the oldest (the slowest readers) are dropped, so that stalled
        readers of old generations never hold more than that, however many."""
        if len(body) <= _PIECE:
            yield
            return
        key = id(body)
        _, writers = self._pinned.setdefault(key, (len(body), set()))
        writers.add(conn)
        total = sum(held for held, _ in self._pinned.values())
        for older in list(self._pinned):
            if total <= self.limits.max_pinned_bytes or older == key:
                break
            held, slow = self._pinned.pop(older)
            total -= held
            for dropped in slow:
                dropped.evicted = True
                dropped.writer.transport.abort()
        try:
            yield
        finally:
            entry = self._pinned.get(key)
            if entry is not None:
                entry[1].discard(conn)
                if not entry[1]:
                    del self._pinned[key]

    async def _stream(self, conn: _Connection, h: h11.Connection, stream: Stream) -> bool:
        """A streamed body's pieces, each made in a worker and written (the
        client taking it) before the next is made; False when making one
        failed: the connection is cut, so the client sees a broken answer, never
        a short one it could take for whole."""
        assert self._pool is not None
        loop = asyncio.get_running_loop()
        pieces = stream()
        while True:
            try:
                piece = await loop.run_in_executor(self._pool, next, pieces, None)
            except Exception as exc:  # noqa: BLE001 - a bug cuts this answer, the server goes on
                said = terminal_safe(f"a streamed answer: {type(exc).__name__}: {exc}")[:500]
                print(f"lockwatch serve: {said}", file=sys.stderr, flush=True)
                conn.writer.transport.abort()
                return False
            if piece is None:
                return True
            if piece:
                await self._write(conn, [h.send(h11.Data(data=piece)) or b""])

    async def _answer(
        self, conn: _Connection, path: str, headers: dict[str, str]
    ) -> Response | None:
        """The endpoint's answer, made in a worker thread; None if the client
        has gone already. Requests alike that come while one is being answered
        share its answer: a flood of them costs one answer, and a scrape among
        them waits for nothing more."""
        if conn.writer.transport.is_closing():
            return None
        authorization = headers.get("authorization")
        accept = headers.get("accept") if path == METRICS else None
        gzip_ok = "gzip" in headers.get("accept-encoding", "").lower()
        allowed = self.endpoints.access.allows(path, authorization)
        key = (path, allowed, accept, gzip_ok)
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._make(path, authorization, accept, gzip_ok))
            self._flights[key] = flight

            def landed(done: asyncio.Future[Response], key: _Key = key) -> None:
                if self._flights.get(key) is done:
                    del self._flights[key]

            flight.add_done_callback(landed)
        return await asyncio.shield(flight)

    async def _make(
        self, path: str, authorization: str | None, accept: str | None, gzip_ok: bool
    ) -> Response:
        assert self._slots is not None and self._pool is not None
        async with self._slots:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                self._pool,
                answer_safely,
                self.endpoints,
                path,
                authorization,
                accept,
                gzip_ok,
                self._packed,
            )

    async def _write(self, conn: _Connection, pieces: list[bytes]) -> None:
        writer = conn.writer
        total = sum(len(piece) for piece in pieces)
        try:
            async with asyncio.timeout(self.limits.write_seconds):
                if total <= _PIECE:
                    writer.write(b"".join(pieces))  # one write: nothing for Nagle to hold back
                else:
                    for piece in pieces:
                        view = memoryview(piece)
                        for at in range(0, len(view), _PIECE):
                            writer.write(view[at : at + _PIECE])
                            await writer.drain()
                await writer.drain()
        except TimeoutError:
            raise _Ended(TIMEOUT) from None

    async def _refuse(
        self, conn: _Connection, h: h11.Connection, exc: h11.RemoteProtocolError
    ) -> None:
        """A 400 (or what h11 says fits: 431, 501) to what is not HTTP we answer."""
        if h.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        status = exc.error_status_hint if 400 <= exc.error_status_hint < 600 else 400
        body = f"bad request: {exc}\n".encode("ascii", "replace")
        with contextlib.suppress(h11.LocalProtocolError):
            response = Response(status, body)
            await self._write(conn, answer_bytes(h, response, head=False, close=True))

    async def _linger(self, conn: _Connection) -> None:
        """After an answer to a request with a body: say we are done writing and
        read what the client still sends, for a while, so our answer is not
        lost to a reset that unread bytes would cause."""
        writer, reader = conn.writer, conn.reader
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()
        read = 0
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(self.limits.linger_seconds):
                while read < 16 * 1024 * 1024:
                    data = await reader.read(65536)
                    if not data:
                        return
                    read += len(data)


def _name_thread() -> None:
    """The listener's threads by name where `top -H` and /proc/PID/task/*/comm
    show them (Python names its threads for itself only)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, THREAD_NAME.encode(), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def _buffered(h: h11.Connection) -> bool:
    return bool(h.trailing_data[0])
