"""A beacon server: the lease service the beacon source (tests/shape/beacon/)
polls and breaks, over real HTTP on a free loopback port.

Beacon is made up, so this is its one real implementation: the tests start it,
lockwatch talks to it as it would to any server (a socket, a deadline, bounded
answers), and the tests read what it was asked. Its protocol:

- `GET /v1/leases` → `{"leases": [{"key", "owner", "fence", "lapses_at"}]}`
  (`lapses_at`: seconds since the epoch; a lease past it has lapsed, and stays
  until someone drops it);
- `DELETE /v1/leases/<key>` with `If-Match: <fence>` and `Authorization: Bearer
  <token>` → 204; 409 when the lease is gone or has another fence (someone took
  it again), 401 for a wrong token: compare-and-swap on the fence;
- `POST /v1/leases/<key>/renew?seconds=N` with the same headers → 200: the lease
  lapses N seconds from now, its fence kept.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

PREFIX = "/v1/leases"


@dataclass
class Lease:
    owner: str
    fence: int
    lapses_at: float  # seconds since the epoch


@dataclass(frozen=True)
class Request:
    """One request the server was sent, as the tests look at it."""

    method: str
    path: str
    if_match: str | None
    token: str | None


@dataclass
class BeaconServer:
    token: str
    leases: dict[str, Lease] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Set by every request, for a test to wait on (never on wall time).
    asked: threading.Condition = field(default_factory=threading.Condition)
    address: tuple[str, int] = ("127.0.0.1", 0)

    @property
    def name(self) -> str:
        """host:port, as lock ids carry it."""
        return f"{self.address[0]}:{self.address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.name}"

    def put(self, key: str, owner: str, fence: int, lasts: float) -> None:
        """A lease on `key`, lapsing `lasts` seconds from now (negative: lapsed)."""
        with self.lock:
            self.leases[key] = Lease(owner, fence, time.time() + lasts)

    def deletes(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.method == "DELETE"]

    def wait_for(self, count: int, method: str, timeout: float = 30.0) -> bool:
        """Whether `count` requests of `method` came (waiting on the server's
        condition, with `timeout` only as the failing test's bound)."""

        def enough() -> bool:
            with self.lock:
                return sum(r.method == method for r in self.requests) >= count

        with self.asked:
            return self.asked.wait_for(enough, timeout)


def _handler(server: BeaconServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return None  # quiet: the tests read `requests`

        def _note(self) -> None:
            auth = self.headers.get("Authorization") or ""
            token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
            request = Request(self.command, self.path, self.headers.get("If-Match"), token)
            with server.lock:
                server.requests.append(request)

        def _answer(self, status: int, body: object | None = None) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            with server.asked:
                server.asked.notify_all()

        def do_GET(self) -> None:
            self._note()
            if urlsplit(self.path).path != PREFIX:
                return self._answer(404, {"error": "no such path"})
            with server.lock:
                leases = [
                    {"key": k, "owner": v.owner, "fence": v.fence, "lapses_at": v.lapses_at}
                    for k, v in sorted(server.leases.items())
                ]
            self._answer(200, {"leases": leases})

        def _changing(self) -> tuple[str, Lease] | None:
            """The lease a change names, when the token and fence allow it; else
            the refusal is sent and None returned."""
            self._note()
            if self.headers.get("Authorization") != f"Bearer {server.token}":
                self._answer(401, {"error": "bad token"})
                return None
            path = urlsplit(self.path).path.removeprefix(PREFIX + "/").removesuffix("/renew")
            key = unquote(path)
            with server.lock:
                lease = server.leases.get(key)
            if lease is None or str(lease.fence) != self.headers.get("If-Match"):
                self._answer(409, {"error": "not that fence"})
                return None
            return key, lease

        def do_DELETE(self) -> None:
            found = self._changing()
            if found is not None:
                with server.lock:
                    del server.leases[found[0]]
                self._answer(204)

        def do_POST(self) -> None:
            found = self._changing()
            if found is not None:
                seconds = float(parse_qs(urlsplit(self.path).query).get("seconds", ["60"])[0])
                with server.lock:
                    found[1].lapses_at = time.time() + seconds
                self._answer(200, {"fence": found[1].fence})

    return Handler


@contextmanager
def serving(token: str) -> Iterator[BeaconServer]:
    """A beacon server on a free loopback port, for the `with` block."""
    server = BeaconServer(token)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    server.address = ("127.0.0.1", httpd.server_address[1])
    # A short poll: its shutdown (each test's end) waits for one.
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="beacon", daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
