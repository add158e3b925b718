"""Servers polled on an interval, with backoff while they are away (Redis, etcd):
the dashboard's feed for them, as sources/postgres/feed.py is for PostgreSQL.

A poller answers one poll at a time in a worker thread, on its one connection;
records are judged and diffed in that thread too, and the event loop only
applies what changed. A server that does not answer keeps its last locks on
screen: the change set carries only its status, whose `updated_at` says how
old they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, ClassVar, Protocol

from lockwatch.clock import Clock
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.status import SourceStatus
from lockwatch.sources.contract import Collected, ListingRequest
from lockwatch.sources.feed import Differ, Emit

if TYPE_CHECKING:
    from lockwatch.sources.stores.facts import StoreLock

# Never poll faster than this, whatever a poller asks.
MIN_WAIT = 0.1


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


class PolledFeed:
    def __init__(
        self,
        poller: Poller,
        *,
        host: str,
        interval: float,
        settle: Callable[[Entry, Entry], bool] | None = None,
    ) -> None:
        self.poller = poller
        self.name = poller.name
        self.host = host
        self.interval = interval
        self._differ = Differ(settle=settle)

    async def run(self, emit: Emit) -> None:
        # asyncio is imported where a feed runs: `ls` imports this module (for
        # StoreSelection) and never pays for the event loop's 30-odd modules.
        import asyncio

        while True:
            change, wait = await asyncio.to_thread(self.poll)
            emit(change)
            await asyncio.sleep(max(wait, MIN_WAIT))

    def poll(self) -> tuple[ChangeSet, float]:
        """One poll, judged and diffed (in a worker thread): the change set, and
        how long to wait before the next one."""
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


def collect_polled(
    pollers: Sequence[ServerPoller], request: ListingRequest, kind: str
) -> Collected:
    """`ls`'s one-shot picture from pollers (redis or etcd): each polled once and
    closed, its locks judged as of its poll, its wait-for graphs built."""
    from lockwatch.clock import FrozenClock
    from lockwatch.model.assess import assess
    from lockwatch.model.blocking import from_locks, group
    from lockwatch.model.process import StaticProcesses
    from lockwatch.model.verdict import State

    out = Collected()
    for poller in pollers:
        try:
            polled = poller.poll()
        finally:
            poller.close()
        out.statuses.extend(polled.statuses)
        for status in polled.statuses:
            if status.state != "connected":
                out.warnings.append(f"{kind} {status.name}: {status.reason}")
        if polled.locks is None:
            continue
        out.places.append(f"on {kind} {poller.server}")
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


class StoreSelection:
    """What a selected store source (Redis, etcd) has in common: its pollers,
    each polled once for `ls` and every `refresh` seconds for the dashboard.
    A subclass names its `kind` and builds `pollers`."""

    kind: ClassVar[str]
    refresh: float

    def pollers(self, clock: Clock) -> Sequence[ServerPoller]:
        raise NotImplementedError

    def collect(self, request: ListingRequest) -> Collected:
        from lockwatch.clock import SystemClock

        return collect_polled(self.pollers(SystemClock()), request, self.kind)

    def feeds(self, clock: Clock, host: str) -> Sequence[PolledFeed]:
        return [
            PolledFeed(poller, host=host, interval=self.refresh, settle=same_but_for_countdown)
            for poller in self.pollers(clock)
        ]
