"""portalocker's `RedisLock`: a lock kept as a subscription, with no key.

The holder subscribes to the lock's channel on a connection of its own named
`<channel>-lock-<holder id>` (`<channel>-lock` up to portalocker 3.2); the lock
is free when nobody else is subscribed (PUBSUB NUMSUB), and Redis releases it
when that connection closes. So a holder is one connection of CLIENT LIST in
subscribe mode under such a name: its id, address, age (how long the connection
has been open: the hold, plus its own acquire) and idle time. Several at once
are shared readers (`LockFlags.SHARED`), or a writer between subscribing and
backing off: portalocker tells them apart by pinging the channel, which
lockwatch never does (it writes nothing).

Pub/Sub is the server's, not a database's: every database of a server lists the
same subscription locks. A break kills exactly that connection (CLIENT KILL ID),
as portalocker itself reaps a holder that stopped answering.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.humanize import duration
from lockwatch.model.jsonfields import json_fields
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.redis import ids, keyfacts
from lockwatch.sources.redis.server import RedisSnapshot, Subscriber, raw
from lockwatch.sources.stores.facts import REDIS, StoreLock

if TYPE_CHECKING:
    from lockwatch.model.process import ProcessLookup

SUBSCRIPTION = "portalocker-redis"
FORMATS = (SUBSCRIPTION,)

# The `subscription` object of its JSON record (docs/json.md), in this order.
_SUBSCRIPTION_JSON = json_fields(
    "channel",
    "client_id",
    "addr",
    "name",
    "holder_id",
    ("age_seconds", "age"),
    ("idle_seconds", "idle"),
    ("subscribers", "subscribed"),
    ("holders", "named"),
)


@dataclass(frozen=True, slots=True)
class SubscriptionFacts(StoreLock):
    channel: str = ""
    client_id: int = 0
    addr: str = ""
    name: str = ""  # the connection's name, compared before a break
    holder_id: str | None = None
    # Seconds the connection has been open, and since its last command: they move
    # at every poll, which is no change of the lock (the dashboard's events).
    age: int | None = field(default=None, compare=False)
    idle: int | None = field(default=None, compare=False)
    # Connections subscribed to the channel (NUMSUB), and how many of them are named
    # as this lock's holders.
    subscribed: int | None = None
    named: int = 1

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict:
        opened = "" if self.age is None else f", open {duration(self.age)}"
        idle = "" if self.idle is None else f", idle {duration(self.idle)}"
        reasons = [
            Reason(
                "subscription",
                f"held by connection {self.client_id} ({self.addr}) subscribed to channel"
                f" {self.channel} as {self.name}{opened}{idle}: no key and no TTL, Redis"
                " releases it when that connection closes",
            )
        ]
        if self.named > 1:
            reasons.append(
                Reason(
                    "shared_subscribers",
                    f"{self.named} connections hold channel {self.channel}: portalocker's"
                    " shared readers, or a writer between subscribing and backing off"
                    " (portalocker asks by pinging the channel; lockwatch writes nothing)",
                )
            )
        age = None if self.age is None else float(self.age)
        return Verdict(State.ACTIVE, tuple(reasons), age_seconds=age)

    def ttl_to_expiry(self) -> bool:
        return False

    def holder_text(self, lock: Lock) -> str:
        return f"client {self.client_id} {self.addr}"

    def as_json(self) -> dict[str, Any]:
        record = StoreLock.as_json(self)
        record["subscription"] = _SUBSCRIPTION_JSON(self)
        return record

    def fields(self) -> list[tuple[str, str | None]]:
        return [
            ("server", self.server),
            ("channel", self.channel),
            ("client", f"{self.client_id} {self.addr}"),
            ("name", self.name),
            ("open", None if self.age is None else f"{self.age} s"),
            ("idle", None if self.idle is None else f"{self.idle} s"),
            ("subscribers", None if self.subscribed is None else str(self.subscribed)),
        ]


def digest(client_id: int, name: str) -> str:
    """What a break compares: the connection's id and name."""
    return hashlib.sha256(raw(f"{client_id}\0{name}")).hexdigest()


def to_locks(snapshot: RedisSnapshot) -> list[Lock]:
    counts = dict(snapshot.numsub)
    named: dict[str, int] = {}
    for subscriber in snapshot.subscribers:
        named[subscriber.channel] = named.get(subscriber.channel, 0) + 1
    return [
        _lock(snapshot, s, counts.get(s.channel), named[s.channel]) for s in snapshot.subscribers
    ]


def _lock(
    snapshot: RedisSnapshot, subscriber: Subscriber, subscribed: int | None, named: int
) -> Lock:
    session = f"client:{subscriber.id}"
    facts = keyfacts.read(
        SubscriptionFacts,
        snapshot,
        subscriber.channel,
        session=session,
        channel=subscriber.channel,
        client_id=subscriber.id,
        addr=subscriber.addr,
        name=subscriber.name,
        holder_id=subscriber.holder,
        age=subscriber.age,
        idle=subscriber.idle,
        subscribed=subscribed,
        named=named,
    )
    host = subscriber.addr.rpartition(":")[0].strip("[]") or None
    return Lock(
        id=ids.redis_id(snapshot.server, subscriber.channel, pubsub=subscriber.id),
        source=REDIS,
        format=SUBSCRIPTION,
        name=subscriber.channel,
        path=None,
        # No acquired_at: the connection's age is in whole seconds, so now minus it
        # would move by a second from poll to poll. The verdict's age is the age.
        holder=Holder(host=host, session=session),
        content={
            "server": snapshot.server,
            "channel": subscriber.channel,
            "client": {"id": subscriber.id, "addr": subscriber.addr, "name": subscriber.name},
        },
        sha256=digest(subscriber.id, subscriber.name),
        facts=facts,
    )
