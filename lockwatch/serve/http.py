"""The listener: the standard library's ThreadingHTTPServer, one thread per
connection, GET and HEAD only (nothing can be changed through it).

Endpoints: /metrics (Prometheus text, or OpenMetrics when asked), /v1/locks
(the lockwatch.ls/1 document), /healthz, and / (what is here). Bodies are
gzipped for clients that accept it.
"""

from __future__ import annotations

import gzip
import socket
import socketserver
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from lockwatch import __version__
from lockwatch.serve.access import HEALTH, LOCKS, METRICS, Access

# Bodies smaller than this go out as they are: gzip would save nothing worth its time.
_GZIP_FROM = 1024
_READ_ONLY = "GET, HEAD"


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    compressible: bool = False


@dataclass(frozen=True)
class Endpoints:
    """What each path answers; the handler only speaks HTTP."""

    access: Access
    metrics: Callable[[str | None], tuple[bytes, str]]  # Accept header -> body, content type
    locks: Callable[[], bytes]
    health: Callable[[], tuple[bool, str]]

    def answer(self, path: str, authorization: str | None, accept: str | None) -> Response:
        if path not in (HEALTH, METRICS, LOCKS, "/"):
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
        if path == LOCKS:
            return Response(200, self.locks(), "application/json", compressible=True)
        return Response(
            200,
            b"lockwatch serve (read-only)\n"
            b"  /metrics   Prometheus metrics\n"
            b"  /v1/locks  the lockwatch.ls/1 document (lockwatch ls --json)\n"
            b"  /healthz   ok while collection runs\n",
        )


class _Handler(BaseHTTPRequestHandler):
    server_version = f"lockwatch/{__version__}"
    sys_version = ""
    protocol_version = "HTTP/1.1"  # keep-alive: Prometheus scrapes over one connection
    timeout = 30  # an idle or slow client gives its thread back

    server: Server

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def _refuse_method(self) -> None:
        self._send(Response(405, b"read-only: GET or HEAD\n", headers={"Allow": _READ_ONLY}))

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method

    def _serve(self, head: bool) -> None:
        path = urlsplit(self.path).path
        try:
            response = self.server.endpoints.answer(
                path, self.headers.get("Authorization"), self.headers.get("Accept")
            )
        except Exception as exc:  # noqa: BLE001 - a bug answers 500, the server goes on
            print(f"lockwatch serve: {path}: {type(exc).__name__}: {exc}", file=sys.stderr)
            response = Response(500, b"internal error\n")
        self._send(response, head)

    def _send(self, response: Response, head: bool = False) -> None:
        body = response.body
        encoding = None
        if (
            response.compressible
            and len(body) >= _GZIP_FROM
            and "gzip" in (self.headers.get("Accept-Encoding") or "").lower()
        ):
            body = gzip.compress(body, compresslevel=1)
            encoding = "gzip"
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        if response.compressible:
            self.send_header("Vary", "Accept-Encoding")
        if encoding:
            self.send_header("Content-Encoding", encoding)
        for name, value in response.headers.items():
            self.send_header(name, value)
        if self.headers.get("Content-Length") or self.headers.get("Transfer-Encoding"):
            # A body nobody here reads: the connection ends with this answer, so its
            # bytes are never taken for the next request.
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None  # a scrape every few seconds is no news; errors are printed


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(
        self, address: tuple[str, int], family: socket.AddressFamily, endpoints: Endpoints
    ) -> None:
        self.address_family = family
        self.endpoints = endpoints
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer's own asks DNS for the host's full name: not needed, and slow
        # where DNS is.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    @property
    def port(self) -> int:
        return int(self.server_address[1])
