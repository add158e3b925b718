"""A deadline for a server's whole answer, for the clients that only have one
per read (redis-py, PyMySQL, httpx): a server that answers one byte a second
never trips a per-read timeout, and would hold a poll for ever.

For a client on a socket, `whole_answer` has one watchdog thread shut the
socket down (shutdown(2): the read blocked in another thread returns at once,
where close(2) would leave it waiting) when the deadline passes; the client
then fails as on a lost connection, and `whole_answer` says what happened:
`DeadlineMissed`, "stalled after N s". The connection is gone: the poller drops
it and its next poll connects afresh. For httpx, `DeadlineTransport` gives
every network operation at most what is left of the deadline.

psycopg's async connections need neither: asyncio's own timeout cancels them
(sources/postgres/source.py).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

    import httpcore
    import httpx

# What a socket getter may answer: socket objects, raw descriptors (libpq's), or
# None where there is no connection yet.
SocketLike = socket.socket | int | None


def stalled(seconds: float) -> str:
    """The words of a missed deadline, the same for every polled source (here,
    not in polled.py: PostgreSQL's source uses them and polls nothing else)."""
    return f"stalled after {seconds:g} s"


class DeadlineMissed(Exception):
    """The server's whole answer did not come within the deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"{stalled(seconds)}: no whole answer in time")
        self.seconds = seconds


class _Watchdog:
    """One daemon thread for every deadline in the process: a heap of (when,
    what to do), and a condition to wake it when an earlier one comes."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._actions: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, due: float, action: Callable[[], None]) -> int:
        with self._cond:
            token = next(self._ids)
            self._actions[token] = action
            heapq.heappush(self._heap, (due, token))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="deadlines", daemon=True)
                self._thread.start()
            self._cond.notify()
            return token

    def cancel(self, token: int) -> None:
        with self._cond:
            self._actions.pop(token, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][1] not in self._actions:
                        heapq.heappop(self._heap)  # cancelled
                    if self._heap and self._heap[0][0] <= time.monotonic():
                        _, token = heapq.heappop(self._heap)
                        action = self._actions.pop(token)
                        break
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(timeout)
            # Outside the lock: a shutdown may take a moment, and must not hold up
            # the registering of the next deadline.
            with contextlib.suppress(Exception):
                action()


_WATCHDOG = _Watchdog()


def _shut(sock: SocketLike) -> None:
    if sock is None:
        return
    if isinstance(sock, int):
        # libpq's descriptor: a socket object of our own on a copy of it, so that
        # closing ours leaves libpq's open (shutdown acts on the socket itself).
        if sock < 0:
            return
        with contextlib.suppress(OSError), socket.socket(fileno=os.dup(sock)) as copy:
            copy.shutdown(socket.SHUT_RDWR)
        return
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def whole_answer(seconds: float, sockets: Callable[[], Iterable[SocketLike]]) -> Iterator[None]:
    """Everything in the block (connecting, asking, reading) done within `seconds`,
    or `sockets()` (asked when the deadline passes) shut down and DeadlineMissed
    raised, whatever the client raised instead. A block that ended just as the
    deadline passed has lost its connection all the same: DeadlineMissed too."""
    fired = threading.Event()

    def cut() -> None:
        fired.set()
        for sock in sockets():
            _shut(sock)

    token = _WATCHDOG.add(time.monotonic() + seconds, cut)
    try:
        yield
    except Exception as exc:
        if fired.is_set():
            raise DeadlineMissed(seconds) from exc
        raise
    finally:
        _WATCHDOG.cancel(token)
    if fired.is_set():
        raise DeadlineMissed(seconds)


# -- httpx ------------------------------------------------------------------------------


class Deadline:
    """The monotonic instant the answer being read must be whole by."""

    def __init__(self) -> None:
        self._at: float | None = None
        self.seconds = 0.0

    def start(self, seconds: float) -> None:
        self.seconds = seconds
        self._at = time.monotonic() + seconds

    def stop(self) -> None:
        self._at = None

    def missed(self) -> bool:
        """Whether it has passed (a timeout this close to it was its doing)."""
        return self._at is not None and time.monotonic() >= self._at - _SLACK

    def left(self, timeout: float | None) -> float | None:
        """The timeout for one operation: `timeout`, or less when the deadline is
        nearer; DeadlineMissed once it has passed."""
        if self._at is None:
            return timeout
        remaining = self._at - time.monotonic()
        if remaining <= 0:
            raise DeadlineMissed(self.seconds)
        return remaining if timeout is None else min(timeout, remaining)

    @contextlib.contextmanager
    def running(self, seconds: float) -> Iterator[None]:
        """The block's network operations all end by `seconds` from now; a timeout
        that the deadline caused is DeadlineMissed."""
        import httpcore
        import httpx

        self.start(seconds)
        try:
            yield
        except (httpx.TimeoutException, httpcore.TimeoutException) as exc:
            # (a timeout the deadline cut short: what is left of it had run out)
            if self.missed():
                raise DeadlineMissed(seconds) from exc
            raise
        finally:
            self.stop()


# A socket's timeout ends a little after it was due, never much before.
_SLACK = 0.05


def deadline_transport(
    deadline: Deadline, ssl_context: ssl.SSLContext | None = None
) -> httpx.BaseTransport:
    """An httpx transport whose every connect, read and write ends by `deadline`
    (httpx's HTTPTransport takes no network backend: its pool, built here).
    `ssl_context`: the TLS settings (a private CA, a client certificate) where the
    system's trust store is not the one (a Kubernetes API server's)."""
    return _pooled_transport(_deadline_backend(deadline), ssl_context)


def _deadline_backend(deadline: Deadline) -> httpcore.NetworkBackend:
    """httpcore's sync network backend with every operation's timeout cut to what
    is left of `deadline`."""
    import httpcore

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner: httpcore.NetworkStream) -> None:
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self._inner.read(max_bytes, deadline.left(timeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._inner.write(buffer, deadline.left(timeout))

        def close(self) -> None:
            self._inner.close()

        def start_tls(
            self,
            ssl_context: ssl.SSLContext,
            server_hostname: str | None = None,
            timeout: float | None = None,
        ) -> httpcore.NetworkStream:
            return Stream(
                self._inner.start_tls(ssl_context, server_hostname, deadline.left(timeout))
            )

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    class Backend(httpcore.NetworkBackend):
        def __init__(self) -> None:
            self._inner = httpcore.SyncBackend()

        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
        ) -> httpcore.NetworkStream:
            return Stream(
                self._inner.connect_tcp(
                    host, port, deadline.left(timeout), local_address, socket_options
                )
            )

        def connect_unix_socket(
            self,
            path: str,
            timeout: float | None = None,
            socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
        ) -> httpcore.NetworkStream:
            return Stream(
                self._inner.connect_unix_socket(path, deadline.left(timeout), socket_options)
            )

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    return Backend()


def _error_map() -> list[tuple[type[Exception], type[httpx.TransportError]]]:
    """httpcore's errors and the httpx errors they become (what HTTPTransport does)."""
    import httpcore
    import httpx

    # Each has the same name in both: one list of names, not two of classes.
    names = (
        "ConnectTimeout",
        "ReadTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "ConnectError",
        "ReadError",
        "WriteError",
        "RemoteProtocolError",
        "LocalProtocolError",
        "UnsupportedProtocol",
        "TimeoutException",
        "NetworkError",
        "ProtocolError",
    )
    return [(getattr(httpcore, name), getattr(httpx, name)) for name in names]


def _pooled_transport(
    backend: httpcore.NetworkBackend, ssl_context: ssl.SSLContext | None
) -> httpx.BaseTransport:
    """An httpx transport over a one-connection httpcore pool on `backend`
    (`ssl_context`: the TLS settings, else the system's trust store)."""
    import httpcore
    import httpx

    # httpcore's errors as httpx's (what HTTPTransport does): callers catch httpx's.
    mapped = _error_map()

    @contextlib.contextmanager
    def as_httpx() -> Iterator[None]:
        try:
            yield
        except httpcore.ConnectionNotAvailable as exc:
            raise httpx.ConnectError(str(exc)) from exc
        except Exception as exc:
            for theirs, ours in mapped:
                if isinstance(exc, theirs):
                    raise ours(str(exc)) from exc
            raise

    class Body(httpx.SyncByteStream):
        def __init__(self, inner: Iterable[bytes]) -> None:
            self._inner = inner

        def __iter__(self) -> Iterator[bytes]:
            with as_httpx():
                yield from self._inner

        def close(self) -> None:
            close = getattr(self._inner, "close", None)
            if close is not None:
                close()

    class Transport(httpx.BaseTransport):
        def __init__(self) -> None:
            self._pool = httpcore.ConnectionPool(
                ssl_context=ssl_context or httpx.create_ssl_context(trust_env=False),
                max_connections=1,
                max_keepalive_connections=1,
                network_backend=backend,
            )

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            assert isinstance(request.stream, httpx.SyncByteStream)
            with as_httpx():
                answer = self._pool.handle_request(
                    httpcore.Request(
                        method=request.method,
                        url=httpcore.URL(
                            scheme=request.url.raw_scheme,
                            host=request.url.raw_host,
                            port=request.url.port,
                            target=request.url.raw_path,
                        ),
                        headers=request.headers.raw,
                        content=request.stream,
                        extensions=request.extensions,
                    )
                )
            assert isinstance(answer.stream, Iterable)
            return httpx.Response(
                status_code=answer.status,
                headers=answer.headers,
                stream=Body(answer.stream),
                extensions=answer.extensions,
            )

        def close(self) -> None:
            self._pool.close()

    return Transport()
