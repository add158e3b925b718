"""The beacon source: collecting, finding and breaking beacon leases."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click

from lockwatch.model.action import (
    ActionFailed,
    ActionRefused,
    Asked,
    Doing,
    Done,
    Kind,
    Plan,
    refused,
)
from lockwatch.model.changes import ChangeSet, judge
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.status import SourceStatus
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.contract import (
    ActionsBase,
    Collected,
    Decorator,
    Found,
    ListingRequest,
    SourceError,
    Wanted,
)
from tests.shape.beacon.facts import BeaconLease

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.model.clues import Clue
    from lockwatch.sources.feed import Emit, Feed

NAME = "beacon"
SERVER_NAME = "beacon.test:7070"
# What the beacon server asks of a client that changes anything; a client
# names it in its URL (beacon://:TOKEN@host:port), as --beacon gives it.
SERVER_TOKEN = "s3cret"
# The name its provider's reach goes by in `Doing.reach`.
REACH = "beacon_url"


@dataclass
class Lease:
    owner: str
    fence: int
    lease_left: float


# The beacon server: key -> its lease. Tests fill it and look at it.
SERVER: dict[str, Lease] = {}


def server_of(url: str) -> str:
    """The server a beacon URL names (host:port): the name its lock ids carry."""
    return urlsplit(url).netloc.rpartition("@")[2]


def lease_id(key: str) -> str:
    return f"{NAME}:{SERVER_NAME}:{key}"


def locks_now(now: datetime) -> list[Lock]:
    return [
        Lock(
            id=lease_id(key),
            source=NAME,
            format="beacon-lease",
            name=key,
            path=None,
            holder=Holder(actor=lease.owner),
            facts=BeaconLease(SERVER_NAME, key, lease.owner, lease.fence, now, lease.lease_left),
        )
        for key, lease in sorted(SERVER.items())
    ]


def _status(now: datetime) -> SourceStatus:
    return SourceStatus(NAME, SERVER_NAME, "connected", updated_at=now)


class BeaconFeed:
    name = f"{NAME}:{SERVER_NAME}"

    def __init__(self, clock: Clock, host: str) -> None:
        self.clock, self.host = clock, host

    async def run(self, emit: Emit) -> None:
        now = self.clock.now()
        entries = judge(locks_now(now), StaticProcesses(), now, self.host)
        emit(ChangeSet(self.name, now, upserts=tuple(entries), statuses=(_status(now),)))
        await asyncio.Event().wait()

    async def close(self) -> None:
        return None


@dataclass
class SelectedBeacon:
    def collect(self, request: ListingRequest) -> Collected:
        entries = judge(locks_now(request.now), StaticProcesses(), request.now, request.host)
        return Collected(
            assessed=[(entry.lock, entry.verdict) for entry in entries],
            statuses=[_status(request.now)],
            stale=sum(entry.verdict.state is State.STALE for entry in entries),
        )

    def feeds(self, clock: Clock, host: str) -> Sequence[Feed]:
        return [BeaconFeed(clock, host)]


@dataclass
class BeaconActions(ActionsBase):
    name: str = NAME
    kinds: frozenset[Kind] = field(default_factory=lambda: frozenset({Kind.BREAK}))

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        lease = lock.facts
        assert isinstance(lease, BeaconLease)
        if kind is not Kind.BREAK:
            return refused(kind, lock, verdict, "unsupported", "beacons can only be broken")
        effect = f"drop {lease.key} on {lease.server} if its fence is still {lease.fence}"
        needs_name = verdict.state is not State.STALE
        return Plan(kind, lock, verdict, "lock_broken", effect, needs_name=needs_name)

    def reach(self, wanted: Wanted) -> Mapping[str, Any]:
        # The servers --beacon named, with the token in their URLs.
        urls = wanted.values.get("beacon_urls") or ()
        return {REACH: {server_of(url): url for url in urls}.get}

    def run(self, plan: Plan, doing: Doing) -> Done:
        lease = plan.lock.facts
        assert isinstance(lease, BeaconLease)
        url_for = doing.reach.get(REACH)
        url = url_for(lease.server) if url_for is not None else None
        if url is None:
            raise ActionRefused("no_dsn", f"no URL for {lease.server}: name it with --beacon")
        if urlsplit(url).password != SERVER_TOKEN:
            raise ActionFailed("denied", f"{lease.server} refused the token")
        now = SERVER.get(lease.key)
        if now is None or now.fence != lease.fence:
            # Compare-and-swap: another holder (a new fence) is not the one seen.
            raise ActionRefused("changed", f"{lease.key} is no longer fence {lease.fence}")
        del SERVER[lease.key]
        return Done({"fence": lease.fence}, f"dropped {lease.key} (fence {lease.fence})")

    def target(self, lock: Lock) -> dict[str, Any]:
        lease = lock.facts
        assert isinstance(lease, BeaconLease)
        return {"server": lease.server, "key": lease.key, "fence": lease.fence}


class BeaconSource:
    name = NAME
    label = "bcn"
    id_prefix = NAME
    summary = "Beacon leases (a test's made-up lock service)"
    config_tables: tuple[str, ...] = ()
    record_types: tuple[type, ...] = (BeaconLease,)
    title = "Beacon"
    status_word = "beacon "
    sees_waits = False
    wait_metrics: str | None = None
    actions = BeaconActions()

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        return [] if kind is not None else self.options()

    def options(self) -> Sequence[Decorator]:
        return [
            click.option(
                "--beacon",
                "beacon_urls",
                multiple=True,
                metavar="URL",
                help="A beacon server, beacon://:TOKEN@host:port (repeatable).",
            )
        ]

    def asked(self, values: Mapping[str, Any]) -> bool:
        return False

    def read_config(self, tables: Mapping[str, Any], where: str) -> None:
        return None

    def select(self, wanted: Wanted) -> SelectedBeacon | None:
        return SelectedBeacon() if SERVER else None

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        from lockwatch.clock import SystemClock

        if not target.startswith(f"{NAME}:{SERVER_NAME}:"):
            raise SourceError(f"{target!r} is not a beacon lease id")
        clock = SystemClock()
        for lock in locks_now(clock.now()):
            if lock.id == target:
                return lock, evaluate(lock, StaticProcesses(), clock, host), []
        return f"no beacon lease {target}"

    def clues(self, text: str) -> Sequence[Clue]:
        return ()


SOURCE = BeaconSource()
