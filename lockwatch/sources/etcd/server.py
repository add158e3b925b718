"""One etcd server: one quiet HTTP connection, polled.

A poll lists every key under the prefixes and the time to live of the
leases those keys are on. It writes nothing. The first poll reads the
prefixes whole (one range each); the next ones read what changed since
(since.py: a few hundred bytes where the whole is megabytes), and whole again
only when that cannot tell.

etcd answers one lease's time to live per request, and a fleet's etcd can hold
10,000 locks on as many leases: read one by one that was 9 s a poll. So a poll
reads at most LEASE_READS of them, on LEASE_READERS connections at once, those
whose last reading runs out first (never read, then nearest their end), and
when the last poll had more than that, beside the keys rather than after them.
The others keep their last reading counted down since: exact for a holder that
stopped renewing its lease (the case that matters), short for one that renews
it; a live lease whose countdown has run out was renewed and is read first
next poll (till then its time left is unknown, not zero). Which leases are
alive needs no listing of them: etcd deletes a lease's keys with it, in the
same revision, so the lease of every key read was alive at that revision.
"""

from __future__ import annotations

import heapq
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime

from lockwatch.clock import Clock
from lockwatch.model.status import SourceStatus
from lockwatch.sources.backoff import ServerState, failed, first_line
from lockwatch.sources.contract import DEFAULT_DEADLINE
from lockwatch.sources.deadline import Deadline, DeadlineMissed, deadline_transport
from lockwatch.sources.etcd.endpoint import EtcdEndpoint
from lockwatch.sources.etcd.gateway import Gateway, GatewayError, KeyValue
from lockwatch.sources.etcd.since import Known, read_since

# Keys read per prefix: a prefix that holds far more than locks must not make
# lockwatch hold the whole keyspace; past it, the status says so.
MAX_KEYS = 100_000
# Leases whose time to live a poll reads, at most, and on how many connections:
# bench_etcd.py (10,000 leases) keeps a poll within 1.5 times a bare range and
# lease listing with these.
LEASE_READS = 64
LEASE_READERS = 4
# Fewer than these are read one after the other on the poll's own connection.
FEW_LEASES = 16

# (seconds left or None: alive, not read lately; seconds granted, 0: unknown);
# (-1, 0): the lease is gone, and its keys with it.
LeaseTTL = tuple[float | None, int]


# What readers read of each lease they were given: (seconds left, -1: gone;
# seconds granted).
Read = dict[int, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class LeaseReading:
    left: int  # as etcd said, -1: gone
    granted: int
    read_at: datetime

    @property
    def ends(self) -> float:
        """When it runs out as read (a POSIX time), to order readings by."""
        return self.read_at.timestamp() + self.left


@dataclass(frozen=True)
class EtcdSnapshot:
    server: str
    polled_at: datetime
    revision: int
    keys: list[KeyValue]
    leases: dict[int, LeaseTTL]
    truncated: bool = False


class EtcdServer(ServerState):
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
        super().__init__("etcd", endpoint.name, clock, deadline)
        self.endpoint = endpoint
        self.prefixes = prefixes
        self._timeout = timeout
        self._deadline = Deadline()
        self._exact = exact
        self._gateway: Gateway | None = None
        self._readers: list[Gateway] = []  # the extra connections reading leases
        self._readings: dict[int, LeaseReading] = {}
        # Every key under the prefixes at a revision, when the last read could
        # tell them all: the next poll reads what changed since (since.py).
        self._known: Known | None = None
        self._wanted: set[int] = set()  # the leases of the last poll's keys
        self._pool: ThreadPoolExecutor | None = None
        self.last: EtcdSnapshot | None = None

    def poll(self) -> EtcdSnapshot | None:
        import httpx

        try:
            if self._gateway is None:
                self.status = SourceStatus(
                    "etcd", self.name, "connecting", updated_at=self._updated_at()
                )
                self._gateway = Gateway(
                    self.endpoint,
                    self._timeout,
                    transport=deadline_transport(self._deadline),
                    keep=self._exact is None,
                )
            gateway = self._gateway
            with self._deadline.running(self.deadline):
                ahead = self._read_ahead()
                try:
                    revision, keys, truncated = self._read(gateway)
                finally:
                    if ahead is not None:
                        wait(ahead)  # no reader outlives the poll (nor its deadline)
                early = None if ahead is None else _gathered(ahead)
                polled_at = self.clock.now()
                wanted = {kv.lease for kv in keys if kv.lease}
                leases = self._leases(gateway, wanted, polled_at, early)
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
        prefixes = tuple(dict.fromkeys(self.prefixes))
        if self._exact is not None:
            # A mutex member's holder and waiters are the keys beside it.
            parent, sep, _ = self._exact.rpartition("/")
            prefixes = (parent + sep,) if sep else (self._exact,)
        elif self._known is not None:
            known = read_since(gateway, prefixes, self._known, MAX_KEYS)
            if known is not None:
                self._known = known
                return known.revision, _together(known.keys), False
        self._known = None
        found: dict[str, KeyValue] = {}
        each: dict[str, dict[str, KeyValue]] = {}
        revision, truncated, first = 0, False, 0
        for prefix in prefixes:
            revision, kvs, more = gateway.range_prefix(prefix, MAX_KEYS)
            first = first or revision
            truncated = truncated or more
            each[prefix] = {kv.key: kv for kv in kvs}
            for kv in kvs:
                found.setdefault(kv.key, kv)
        if self._exact is None and not truncated:
            # Each prefix as of its own range: changes since the first are read next.
            self._known = Known(first, each, gateway.cluster)
        return revision, list(found.values()), truncated

    def _read_ahead(self) -> list[Future[Read]] | None:
        """With many leases known from the last poll: the batch of them due,
        read on the readers' connections while the keys are read on the main
        one (the poll takes the longer of the two, not both)."""
        if len(self._wanted) <= LEASE_READS:
            return None
        return self._submit(_due(self._wanted, self._readings, self.clock.now()))

    def _leases(
        self, gateway: Gateway, wanted: set[int], now: datetime, early: Read | None
    ) -> dict[int, LeaseTTL]:
        last = self._readings
        if len(last) < len(wanted):
            readings = {lease: reading for lease, reading in last.items() if lease in wanted}
        else:
            readings = {lease: last[lease] for lease in wanted if lease in last}
        if early is not None:
            read = early
        elif len(wanted) < FEW_LEASES:
            read = {lease: gateway.time_to_live(lease) for lease in sorted(wanted)}
        else:
            read = _gathered(self._submit(_due(wanted, readings, now)))
        fresh = set(read) & wanted
        for lease in fresh:
            readings[lease] = LeaseReading(*read[lease], now)
        self._readings, self._wanted = readings, wanted
        # Each lease's answer, the later overriding: not read lately; counted down
        # from its last reading; read this poll. Built so, not lease by lease, as
        # most of 10,000 leases are in the first.
        answer: dict[int, LeaseTTL] = dict.fromkeys(wanted, (None, 0))
        for lease, reading in readings.items():
            if reading.left < 0:
                answer[lease] = (reading.left, reading.granted)
            else:
                counted = _left(reading, now)
                answer[lease] = (counted if counted > 0 else None, reading.granted)
        for lease in fresh:
            answer[lease] = read[lease]
        return answer

    def _submit(self, due: list[int]) -> list[Future[Read]]:
        """Read `due`'s times to live on up to LEASE_READERS connections of their
        own, at once."""
        while len(self._readers) < LEASE_READERS:
            self._readers.append(
                Gateway(self.endpoint, self._timeout, transport=deadline_transport(self._deadline))
            )
        if self._pool is None:
            self._pool = ThreadPoolExecutor(LEASE_READERS, thread_name_prefix="etcd-leases")
        count = min(LEASE_READERS, max(1, len(due) // 8))
        shares = [due[n::count] for n in range(count)]
        pool, readers = self._pool, self._readers

        def read(n: int) -> Read:
            return {lease: readers[n].time_to_live(lease) for lease in shares[n]}

        return [pool.submit(read, n) for n in range(count)]

    def _updated_at(self) -> datetime | None:
        return self.last.polled_at if self.last else None

    def _fail(self, exc: BaseException) -> None:
        import httpx

        away = isinstance(exc, httpx.TransportError | OSError | DeadlineMissed)
        reason = self.endpoint.scrub(first_line(exc))
        failed(self, "etcd", reason, away=away, updated_at=self._updated_at())

    def close(self) -> None:
        self._known = None
        gateway, self._gateway = self._gateway, None
        readers, self._readers = self._readers, []
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        for each in (gateway, *readers):
            if each is not None:
                each.close()


def _left(reading: LeaseReading, now: datetime) -> float:
    """The reading's seconds left, counted down to `now`."""
    return reading.left - (now - reading.read_at).total_seconds()


def _due(leases: set[int], readings: dict[int, LeaseReading], now: datetime) -> list[int]:
    """The LEASE_READS of `leases` to read first: never read, then nearest their end."""
    unread = [lease for lease in leases if lease not in readings]
    if len(unread) >= LEASE_READS:
        return heapq.nsmallest(LEASE_READS, unread)
    # Nearest their end at `now`: the earliest end, as each reading counts down alike.
    ends = ((readings[lease].ends, lease) for lease in leases if lease in readings)
    return sorted(unread) + [lease for _, lease in heapq.nsmallest(LEASE_READS - len(unread), ends)]


def _together(each: dict[str, dict[str, KeyValue]]) -> list[KeyValue]:
    """Each prefix's keys, one list, a key under two prefixes once."""
    if len(each) == 1:
        return list(next(iter(each.values())).values())
    found: dict[str, KeyValue] = {}
    for keys in each.values():
        for key, kv in keys.items():
            found.setdefault(key, kv)
    return list(found.values())


def _gathered(futures: list[Future[Read]]) -> Read:
    read: Read = {}
    for future in futures:
        read.update(future.result())
    return read
