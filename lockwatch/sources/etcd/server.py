"""One etcd server: one quiet HTTP connection, polled.

A poll reads every key under the prefixes (one range each) and each distinct
lease's time to live. It writes nothing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from lockwatch.clock import Clock, SystemClock
from lockwatch.model.status import SourceStatus, backoff_seconds
from lockwatch.sources.deadline import Deadline, DeadlineMissed, deadline_transport
from lockwatch.sources.etcd.endpoint import EtcdEndpoint
from lockwatch.sources.etcd.gateway import Gateway, GatewayError, KeyValue
from lockwatch.sources.polled import DEFAULT_DEADLINE

# Keys read per prefix: a prefix that holds far more than locks must not make
# lockwatch hold the whole keyspace; past it, the status says so.
MAX_KEYS = 100_000


@dataclass(frozen=True)
class EtcdSnapshot:
    server: str
    polled_at: datetime
    revision: int
    keys: list[KeyValue]
    leases: dict[int, tuple[int, int]]  # lease -> (seconds left, granted)
    truncated: bool = False


class EtcdServer:
    def __init__(
        self,
        endpoint: EtcdEndpoint,
        prefixes: tuple[str, ...],
        *,
        clock: Clock | None = None,
        timeout: float = 2.0,
        exact: str | None = None,
        deadline: float = DEFAULT_DEADLINE,
    ) -> None:
        """`exact`: read this key alone instead of the prefixes (an action's lookup):
        with the mutex it belongs to, the keys beside it. `timeout`: for connecting
        and each read; `deadline`: for a poll's whole answer (every request of it)."""
        self.endpoint = endpoint
        self.name = endpoint.name
        self.prefixes = prefixes
        self.clock = clock or SystemClock()
        self._timeout = timeout
        self.deadline = deadline
        self._deadline = Deadline()
        self._exact = exact
        self._gateway: Gateway | None = None
        self.failures = 0
        self.retry_in = 0.0
        self.last: EtcdSnapshot | None = None
        self.status = SourceStatus("etcd", self.name, "connecting")

    def poll(self) -> EtcdSnapshot | None:
        import httpx

        try:
            if self._gateway is None:
                self.status = SourceStatus(
                    "etcd", self.name, "connecting", updated_at=self._updated_at()
                )
                self._gateway = Gateway(
                    self.endpoint, self._timeout, transport=deadline_transport(self._deadline)
                )
            gateway = self._gateway
            with self._deadline.running(self.deadline):
                revision, keys, truncated = self._read(gateway)
                polled_at = self.clock.now()
                leases = {
                    lease: gateway.time_to_live(lease)
                    for lease in sorted({kv.lease for kv in keys if kv.lease})
                }
        except (httpx.HTTPError, GatewayError, OSError, ValueError, DeadlineMissed) as exc:
            self._fail(exc)
            return None
        self.failures = 0
        self.retry_in = 0.0
        self.last = EtcdSnapshot(self.name, polled_at, revision, keys, leases, truncated)
        self.status = SourceStatus(
            "etcd",
            self.name,
            "connected",
            reason=f"over {MAX_KEYS} keys under a prefix: only the first are listed"
            if truncated
            else None,
            updated_at=polled_at,
        )
        return self.last

    def _read(self, gateway: Gateway) -> tuple[int, list[KeyValue], bool]:
        prefixes = self.prefixes
        if self._exact is not None:
            # A mutex member's holder and waiters are the keys beside it.
            parent, sep, _ = self._exact.rpartition("/")
            prefixes = (parent + sep,) if sep else (self._exact,)
        found: dict[str, KeyValue] = {}
        revision, truncated = 0, False
        for prefix in dict.fromkeys(prefixes):
            revision, kvs, more = gateway.range_prefix(prefix, MAX_KEYS)
            truncated = truncated or more
            for kv in kvs:
                found.setdefault(kv.key, kv)
        return revision, list(found.values()), truncated

    def _updated_at(self) -> datetime | None:
        return self.last.polled_at if self.last else None

    def _fail(self, exc: BaseException) -> None:
        import httpx

        self.failures += 1
        self.close()
        delay = backoff_seconds(self.failures, random.uniform(-1.0, 1.0))
        away = isinstance(exc, httpx.TransportError | OSError | DeadlineMissed)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        self.status = SourceStatus(
            "etcd",
            self.name,
            "disconnected" if away else "error",
            reason=self.endpoint.scrub(first),
            updated_at=self._updated_at(),
            next_retry_at=self.clock.now() + timedelta(seconds=delay),
        )
        self.retry_in = delay

    def close(self) -> None:
        gateway, self._gateway = self._gateway, None
        if gateway is not None:
            gateway.close()
