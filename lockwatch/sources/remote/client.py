"""One remote's document, fetched: `GET <URL>/v1/locks` over one kept-alive
connection, with the remote's token, a deadline for the whole answer, a bound on
its size, and no redirects (a token must not follow one to another host).

The deadline covers everything from the connection to the last byte of the
body. httpx's own timeouts are per operation (connect, each read): a remote
that sends one byte a second never trips them. So every network operation of
the request is given what is left of the deadline, at most, by the network
backend under httpx (sources/deadline.py's transport, shared with etcd's
client); no thread waits on a socket past it.

What goes wrong is a `RemoteProblem` in words fit for the header: `disconnected`
when the remote cannot be reached (unreachable: refused, no answer) or misses
the deadline (stalled), `error` when it answers but not as a lockwatch serve
would (a refused token, HTTP 500, not the JSON contract).
"""

from __future__ import annotations

from typing import Literal

# Loaded only when a remote is asked for: nothing imports this module at start.
import httpcore
import httpx

from lockwatch import __version__
from lockwatch.sources.bounded import Budget, TooLarge, Undecodable, decoded
from lockwatch.sources.deadline import Deadline, DeadlineMissed, deadline_transport, stalled
from lockwatch.sources.remote.endpoints import DEFAULT_TIMEOUT, Remote

# A lock record is about 600 bytes and 30 JSON values: 100,000 locks (an 86 MB
# document of Redis keys was the largest seen) fit, and a hostile document is
# refused before it is parsed (sources/bounded.py counts both as it arrives).
MAX_DOCUMENT_BYTES = 128 * 1024 * 1024
MAX_DOCUMENT_VALUES = 4_000_000
# Silence for this long (no connection, no byte) is "no answer", sooner than the
# deadline: a host that is down is told apart from one that is slow.
SILENCE_SECONDS = 3.0


class RemoteProblem(Exception):
    def __init__(self, state: Literal["disconnected", "error"], reason: str) -> None:
        super().__init__(reason)
        self.state: Literal["disconnected", "error"] = state
        self.reason = reason


class Fetcher:
    """Fetches one remote's document; one request at a time. `timeout`: the
    deadline, in seconds, for a whole answer (connect, headers, body)."""

    def __init__(self, remote: Remote, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.remote = remote
        self.timeout = timeout
        self._client: httpx.Client | None = None
        self._deadline = Deadline()

    def _connection(self) -> httpx.Client:
        if self._client is None:
            headers = {
                "User-Agent": f"lockwatch/{__version__}",
                "Accept": "application/json",
                # What bounded.decoded reads a piece at a time; nothing else.
                "Accept-Encoding": "gzip",
            }
            if self.remote.token is not None:
                headers["Authorization"] = f"Bearer {self.remote.token}"
            silence = min(SILENCE_SECONDS, self.timeout)
            # No proxies or netrc from the environment: the fleet's own addresses,
            # the token only where the operator named.
            self._client = httpx.Client(
                headers=headers,
                timeout=httpx.Timeout(silence),
                follow_redirects=False,
                trust_env=False,
                transport=deadline_transport(self._deadline),
            )
        return self._client

    def fetch(self) -> bytes:
        """The document's bytes (raises RemoteProblem)."""
        self._deadline.start(self.timeout)
        budget = Budget(MAX_DOCUMENT_BYTES, MAX_DOCUMENT_VALUES)
        size = 0
        try:
            with self._connection().stream("GET", self.remote.locks_url) as response:
                _check(response)
                body = bytearray()
                encoding = response.headers.get("content-encoding")
                for piece in decoded(response.iter_raw(), encoding):
                    size += len(piece)
                    budget.take(piece)
                    # Decoding (gzip) reads no socket: the deadline is checked here too.
                    self._deadline.left(None)
                    body += piece
                return bytes(body)
        except TooLarge as exc:
            self._reset()
            raise RemoteProblem("error", f"its answer is {exc}: refused, not read") from None
        except (httpx.TimeoutException, httpcore.TimeoutException, DeadlineMissed) as exc:
            self._reset()
            if isinstance(exc, DeadlineMissed) or self._deadline.missed():
                got = f" ({size:,} bytes of its answer in)" if size else ""
                raise RemoteProblem(
                    "disconnected", f"{stalled(self.timeout)}: no whole answer in time{got}"
                ) from None
            raise RemoteProblem(
                "disconnected",
                f"unreachable: no answer within {min(SILENCE_SECONDS, self.timeout):g}s",
            ) from None
        except (httpx.TransportError, httpcore.NetworkError, httpcore.ProtocolError) as exc:
            self._reset()
            raise RemoteProblem("disconnected", f"unreachable: {_words(exc)}") from None
        except (httpx.DecodingError, Undecodable) as exc:
            self._reset()
            why = f": {exc}" if isinstance(exc, Undecodable) else ""
            raise RemoteProblem("error", f"its answer could not be decoded{why}") from None
        except RemoteProblem:
            self._reset()
            raise
        finally:
            self._deadline.stop()

    def _reset(self) -> None:
        # A connection that failed is not reused: the next try starts afresh.
        if self._client is not None:
            self._client.close()
            self._client = None

    def close(self) -> None:
        self._reset()


def _check(response: httpx.Response) -> None:
    status = response.status_code
    if status == 200:
        return
    if status in (401, 403):
        raise RemoteProblem(
            "error",
            f"HTTP {status}: the token was refused; give this remote its token file"
            " (--remote-token-file, or [remote] token_files)",
        )
    if status == 404:
        raise RemoteProblem("error", "HTTP 404: no /v1/locks there; is it a lockwatch serve?")
    if 300 <= status < 400:
        raise RemoteProblem("error", f"HTTP {status}: a redirect, not followed; name its target")
    raise RemoteProblem("error", f"HTTP {status} from /v1/locks")


def _words(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    # "[Errno 111] Connection refused" says it; the errno adds nothing for a reader.
    if text.startswith("[Errno"):
        text = text.partition("] ")[2] or text
    return (text or type(exc).__name__)[:200]
