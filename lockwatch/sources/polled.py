"""Servers polled on an interval, with backoff while they are away (Redis, etcd,
remote lockwatch serves): the dashboard's and serve's feed for them, as
sources/postgres/feed.py is for PostgreSQL.

A poller answers one poll at a time in a worker thread, on its one connection;
records are judged and diffed in that thread too, and the event loop only
applies what changed. A server that does not answer keeps its last locks on
screen: the change set carries only its status, whose `updated_at` says how
old they are.

Every poll has a deadline. A poll still running past it is a stall, whatever
the poller's own timeouts say (a server that answers a byte a second never
trips a per-read timeout): the feed says so at once, with the status
`disconnected` and the reason "stalled after N s", keeps the last locks, dated by
`updated_at`, and comes back by itself when a poll answers. `PolledFeed.health`
is the same fact for `serve` (`lockwatch_source_up`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from lockwatch.clock import Clock, SystemClock
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.status import LIVE_STATES, SourceStatus
from lockwatch.sources.contract import DEFAULT_DEADLINE, Collected, ListingRequest
from lockwatch.sources.deadline import stalled
from lockwatch.sources.feed import Differ, Emit

if TYPE_CHECKING:
    from lockwatch.sources.stores.facts import StoreLock

# Never poll faster than this, whatever a poller asks.
MIN_WAIT = 0.1


@dataclass(frozen=True)
class PollHealth:
    """Whether a polled source is up, for `serve` (`lockwatch_source_up`) and
    anyone else who asks the feed rather than its statuses (which say the same)."""

    # Its last poll answered within the deadline, and every status it gave is live.
    up: bool = False
    # When its last good poll answered: what is shown is that old.
    last_success: datetime | None = None
    # Since when a poll has been running past its deadline; None: no stall now.
    stalled_since: datetime | None = None
    reason: str | None = None  # why it is down, in the status's words


@dataclass(frozen=True)
class Polled:
    """One poll's answer: the servers' statuses, and their locks if they answered."""

    at: datetime
    statuses: tuple[SourceStatus, ...]
    locks: list[Lock] | None  # None: no new picture (the server is away)
    retry_in: float | None = None  # seconds to the next poll; None: the feed's interval


class Poller(Protocol):
    name: str  # the feed's name

    def poll(self) -> Polled:
        """One poll (blocking). A server's trouble is a status, never an exception."""
        ...

    def close(self) -> None: ...


class ServerPoller(Poller, Protocol):
    server: str  # what it polls: a server's (or a Redlock group's) display name


class Snapshot(Protocol):
    @property
    def polled_at(self) -> datetime: ...


SnapshotT = TypeVar("SnapshotT", bound=Snapshot)
SnapshotT_co = TypeVar("SnapshotT_co", bound=Snapshot, covariant=True)


class PolledServer(Protocol[SnapshotT_co]):
    """One server read a snapshot at a time, keeping its own status and backoff."""

    name: str
    clock: Clock
    status: SourceStatus
    retry_in: float  # seconds to its next poll, while it is away

    def poll(self) -> SnapshotT_co | None:
        """A snapshot, or None when the server did not answer (its status says why)."""
        ...

    def close(self) -> None: ...


class SnapshotPoller(Generic[SnapshotT]):
    """One server, for `ls`, the dashboard's feed and actions' lookups: its
    snapshot made lock records (`to_locks`), its status and backoff its own."""

    def __init__(self, kind: str, server: PolledServer[SnapshotT]) -> None:
        self.servers = [server]
        self.server = server.name
        self.name = f"{kind}:{server.name}"
        self._server = server

    def to_locks(self, snapshot: SnapshotT) -> list[Lock]:
        raise NotImplementedError

    def poll(self) -> Polled:
        server = self._server
        snapshot = server.poll()
        if snapshot is None:
            return Polled(server.clock.now(), (server.status,), None, retry_in=server.retry_in)
        return Polled(snapshot.polled_at, (server.status,), self.to_locks(snapshot))

    def close(self) -> None:
        self._server.close()


class PolledFeed:
    def __init__(
        self,
        poller: Poller,
        *,
        host: str,
        interval: float,
        settle: Callable[[Entry, Entry], bool] | None = None,
        deadline: float = DEFAULT_DEADLINE,
        clock: Clock | None = None,
    ) -> None:
        self.poller = poller
        self.name = poller.name
        self.host = host
        self.interval = interval
        self.deadline = deadline
        self.clock = clock or SystemClock()
        self._differ = Differ(settle=settle)
        # The statuses of its last answer: a stall marks these down.
        self._statuses: tuple[SourceStatus, ...] = ()
        # Replaced whole, never changed in place: a reader in another thread
        # sees one answer or the next, not half of each.
        self.health = PollHealth(reason="not polled yet")
        # Its wait between polls: `serve` slows it while nobody reads (serve/pace.py).
        self.sleep: Callable[[float], Awaitable[bool | None]] | None = None

    async def run(self, emit: Emit) -> None:
        # asyncio is imported where a feed runs: `ls` imports this module (for
        # StoreSelection) and never pays for the event loop's 30-odd modules.
        import asyncio

        while True:
            poll = asyncio.ensure_future(asyncio.to_thread(self.poll))
            done, _ = await asyncio.wait({poll}, timeout=self.deadline)
            if not done:
                # Its thread is waited for, not abandoned (one poll at a time on
                # its one connection): its answer brings the source back.
                emit(self._stall())
            change, wait = await poll
            self._note(change)  # after a stall, the answer's word is the last
            emit(change)
            await (self.sleep or asyncio.sleep)(max(wait, MIN_WAIT))

    def _stall(self) -> ChangeSet:
        at = self.clock.now()
        reason = f"{stalled(self.deadline)}: its poll has not answered"
        statuses = tuple(
            replace(status, state="disconnected", reason=reason, next_retry_at=None)
            for status in self._statuses
        ) or (_status_of(self.name, reason),)
        self.health = replace(self.health, up=False, stalled_since=at, reason=reason)
        return ChangeSet(self.name, at, statuses)

    def _note(self, change: ChangeSet) -> None:
        """The health its answer says: up when every status it gave is live."""
        self._statuses = change.statuses
        down = [status for status in change.statuses if status.state not in LIVE_STATES]
        if down:
            self.health = PollHealth(False, self.health.last_success, None, down[0].reason)
        else:
            self.health = PollHealth(True, change.at, None, None)

    def poll(self) -> tuple[ChangeSet, float]:
        """One poll, judged and diffed (in a worker thread): the change set, and
        how long to wait before the next one."""
        change, wait = self._poll()
        self._note(change)
        return change, wait

    def _poll(self) -> tuple[ChangeSet, float]:
        polled = self.poller.poll()
        wait = self.interval if polled.retry_in is None else polled.retry_in
        if polled.locks is None:
            return ChangeSet(self.name, polled.at, polled.statuses), wait
        # A holder's liveness is the server's word, not this host's process table.
        entries = judge(polled.locks, StaticProcesses(), polled.at, self.host)
        upserts, removed = self._differ.full(entries)
        change = ChangeSet(
            self.name, polled.at, polled.statuses, upserts=tuple(upserts), removed=tuple(removed)
        )
        return change, wait

    async def close(self) -> None:
        import asyncio

        await asyncio.to_thread(self.poller.close)


def _status_of(feed: str, reason: str) -> SourceStatus:
    """The status of a feed that has given none yet: its name is `kind:name`."""
    kind, _, name = feed.partition(":")
    return SourceStatus(kind, name or feed, "disconnected", reason=reason)


def _close(a: datetime | None, b: datetime | None, within: timedelta) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= within


def _steady(store: StoreLock, like: StoreLock) -> StoreLock:
    """`store` with what moves at every poll taken from `like`: the poll's instant,
    the TTL left, the store's revision, the time a waiter has been blocked."""
    client = store.client
    if client is not None and like.client is not None:
        client = replace(client, blocked_seconds=like.client.blocked_seconds)
    quorum = store.quorum
    if quorum is not None and like.quorum is not None:
        quorum = replace(
            quorum,
            members=tuple(
                replace(member, ttl_seconds=old.ttl_seconds)
                if member.server == old.server
                else member
                for member, old in zip(quorum.members, like.quorum.members, strict=False)
            )
            + quorum.members[len(like.quorum.members) :],
        )
    return replace(
        store,
        polled_at=like.polled_at,
        ttl_left=like.ttl_left,
        revision=like.revision,
        client=client,
        quorum=quorum,
    )


def same_but_for_countdown(old: Entry, new: Entry) -> bool:
    """Whether a store lock seen again differs only by its TTL counting down:
    its expiry moved by no more than the poll's jitter (etcd gives TTLs in
    whole seconds) and nothing else changed."""
    ol, nl = old.lock, new.lock
    from lockwatch.sources.stores.facts import ETCD, StoreLock

    os_, ns = ol.facts, nl.facts
    if not isinstance(os_, StoreLock) or not isinstance(ns, StoreLock):
        return False
    ov, nv = old.verdict, new.verdict
    if ov.state is not nv.state or ov.codes != nv.codes or ov.alive != nv.alive:
        return False
    within = timedelta(seconds=1.5 if ns.store == ETCD else 0.5)
    if not _close(ol.expires_at, nl.expires_at, within):
        return False
    if not _close(ov.next_change_at, nv.next_change_at, within):
        return False
    steady = replace(
        nl,
        facts=_steady(ns, os_),
        expires_at=ol.expires_at,
        # Redis gives the TTL left as the lock's ttl: it counts down too.
        ttl_seconds=ol.ttl_seconds if ns.store != ETCD else nl.ttl_seconds,
    )
    return steady == ol


def poll_within(poller: ServerPoller, deadline: float, now: datetime, kind: str) -> Polled:
    """One poll for `ls`, and the poller closed; a poll still running at the
    deadline is a stall: `ls` says so and goes on, the poll's thread (a daemon,
    never joined) left to the process's exit."""
    import threading

    answer: list[Polled | BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            answer.append(poller.poll())
        except BaseException as exc:  # noqa: BLE001 - carried to the caller, as poll() raises
            answer.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"poll {poller.name}", daemon=True).start()
    if not done.wait(deadline):
        reason = f"{stalled(deadline)}: no answer to its poll"
        return Polled(
            now, (SourceStatus(kind, poller.server, "disconnected", reason=reason),), None
        )
    poller.close()
    got = answer[0]
    if isinstance(got, BaseException):
        raise got
    return got


def collect_polled(
    pollers: Sequence[ServerPoller],
    request: ListingRequest,
    kind: str,
    deadline: float = DEFAULT_DEADLINE,
) -> Collected:
    """`ls`'s one-shot picture from pollers (redis or etcd): each polled once,
    within `deadline`, and closed, its locks judged as of its poll, its wait-for
    graphs built."""
    from lockwatch.clock import FrozenClock
    from lockwatch.model.assess import assess
    from lockwatch.model.blocking import from_locks, group
    from lockwatch.model.process import StaticProcesses
    from lockwatch.model.verdict import State

    out = Collected()
    for poller in pollers:
        polled = poll_within(poller, deadline, request.now, kind)
        out.statuses.extend(polled.statuses)
        partial = [status for status in polled.statuses if status.partial]
        for status in polled.statuses:
            if status.state != "connected" or status.partial:
                out.warnings.append(f"{kind} {status.name}: {status.reason}")
        if polled.locks is None:
            continue
        # What could not be seen is never summed up as "No locks on" the server.
        seen = "that lockwatch's user may see " if partial else ""
        out.places.append(f"{seen}on {kind} {poller.server}")
        # A holder's liveness is the store's word, not this host's processes.
        assessed = assess(polled.locks, StaticProcesses(), FrozenClock(polled.at), request.host)
        out.assessed.extend(assessed)
        out.stale += sum(verdict.state is State.STALE for _, verdict in assessed)
        # Every server polled has its wait-for graph, as every Postgres server does.
        graphs: dict[str, list[Lock]] = {f"{kind}:{poller.server}": []}
        for lock in polled.locks:
            name = group(lock)
            if name is not None:
                graphs.setdefault(name, []).append(lock)
        out.blocking.extend((name, from_locks(locks)) for name, locks in sorted(graphs.items()))
    return out
