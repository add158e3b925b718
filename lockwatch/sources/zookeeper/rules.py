"""Verdicts for ZooKeeper lock recipes: what their library would decide.

A contender's node exists as long as its session does (ephemeral): the library
that wrote it takes it as held (or queued) for exactly that long. What lockwatch
adds is whether the session still has a client (the `cons` four-letter word of
every server of the ensemble): a holder whose session has no connection is one
whose client died or lost its network, and whose own library (kazoo, Curator:
SUSPENDED) tells it it may no longer hold the lock; ZooKeeper deletes its node
only when the session expires. A persistent node in a lock's queue (no session)
is never deleted at all: held on purpose (kazoo's ephemeral=False) or left by a
dead client, which nothing in ZooKeeper tells apart (unknown).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock, Reason
from lockwatch.model.timestamps import format_timestamp, seconds_since
from lockwatch.model.verdict import State, Verdict

if TYPE_CHECKING:
    from lockwatch.sources.zookeeper.facts import ZkLock

CONNECTED = "connected"
DISCONNECTED = "disconnected"
UNKNOWN = "unknown"
NO_SESSION = "none"


def evaluate_zk(lock: Lock, zk: ZkLock, now: datetime) -> Verdict:
    age = seconds_since(lock.acquired_at, now)
    if zk.orphan:
        return Verdict(
            State.INVALID,
            (
                Reason(
                    "orphaned_parent",
                    f"{zk.parent} has no contenders left (its children came and went"
                    f" {zk.cversion} times): a lock parent its library never deletes;"
                    " nothing holds or waits on it",
                ),
            ),
        )
    if zk.lease_end is not None:
        return _lease(zk, now, age)
    if not zk.holds:
        holders = ", ".join(zk.blocked_by) or "its holder"
        where = f", position {zk.position} in the queue" if zk.position else ""
        reasons = [Reason("waiting", f"waits for {lock.name}, held by {holders}{where}")]
        if zk.session_state in (DISCONNECTED, NO_SESSION):
            reasons.append(_session_reason(zk, holder=False))
        return Verdict(State.WAITING, tuple(reasons), age_seconds=age)
    info: list[Reason] = []
    if zk.blocking:
        count = len(zk.blocking)
        shown = ", ".join(zk.blocking[:5])
        more = f" and {count - 5} more" if count > 5 else ""
        info.append(
            Reason(
                "blocking", f"blocks {count} {'waiter' if count == 1 else 'waiters'}: {shown}{more}"
            )
        )
    if zk.conflict:
        others = ", ".join(zk.conflict)
        reason = Reason(
            "two_holders",
            f"{zk.node} holds {lock.name} by {zk.library}'s rule, and so does {others} by its"
            " own: two clients each believe they hold what only one may (two libraries, or"
            " two layouts, on one lock path)",
        )
        return Verdict(State.INVALID, (reason, *info), age_seconds=age)
    if zk.session_state == DISCONNECTED:
        return Verdict(State.STALE, (_session_reason(zk, holder=True), *info), age_seconds=age)
    if zk.session_state == NO_SESSION:
        # kazoo's acquire(ephemeral=False) holds on purpose past its session: held until
        # deleted, by a holder ZooKeeper cannot say is still there.
        return Verdict(State.UNKNOWN, (_session_reason(zk, holder=True), *info), age_seconds=age)
    if zk.session_state == UNKNOWN:
        info.insert(
            0,
            Reason(
                "client_unknown",
                f"whether session {zk.session} still has a client is unknown: {zk.session_why}",
            ),
        )
    return Verdict(State.ACTIVE, tuple(info), age_seconds=age)


def _lease(zk: ZkLock, now: datetime, age: float | None) -> Verdict:
    """A kazoo NonBlockingLease is its holder's until its end, whatever its
    session (its node is persistent): then kazoo gives it to whoever asks next."""
    left = (zk.lease_end - now).total_seconds() if zk.lease_end else 0.0
    if left > 0:
        return Verdict(State.ACTIVE, (), age_seconds=age, next_change_at=zk.lease_end)
    reason = Reason(
        "lease_expired",
        f"its kazoo lease ended {duration(-left)} ago (at"
        f" {format_timestamp(zk.lease_end or now, precise=False)} by its holder's clock):"
        " kazoo's NonBlockingLease gives it to the next identifier that asks, and the"
        " node stays until one does",
    )
    return Verdict(State.STALE, (reason,), age_seconds=age)


def _session_reason(zk: ZkLock, *, holder: bool) -> Reason:
    if zk.session_state == NO_SESSION:
        return Reason(
            "no_session",
            f"{zk.node} is a persistent node: no session owns it, so ZooKeeper never deletes"
            " it"
            + (
                " and it is held until deleted (kazoo's acquire(ephemeral=False), or a node"
                " written by hand or restored); whether its holder still runs nothing in"
                " ZooKeeper says: if it is gone, every contender waits forever"
                if holder
                else ""
            ),
        )
    return Reason(
        "session_gone",
        f"session {zk.session} has no connection to any server of {zk.server} (cons):"
        " its client died or lost its network, and its library (SUSPENDED) no longer"
        " counts on the lock; ZooKeeper deletes the node when the session expires,"
        " unless the client reconnects first",
    )
