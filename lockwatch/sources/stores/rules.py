"""Verdicts for locks in a distributed store (Redis, etcd).

A key the store holds is held: nobody can tell from outside whether its holder
still works, so a lock with a TTL or a lease is `active` until the store drops
it. What lockwatch can tell is worth a reason: a key with no expiry can never
be freed by the store if its holder died (`no_expiry`), a Redlock whose token
no majority holds blocks acquirers while nobody owns it (`no_quorum`), and a
lock whose TTL ran out since the last poll is no longer known (`expired`).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock, Reason
from lockwatch.model.timestamps import seconds_since
from lockwatch.model.verdict import State, Verdict

if TYPE_CHECKING:
    from lockwatch.sources.stores.facts import StoreLock


def evaluate_store(lock: Lock, store: StoreLock, now: datetime) -> Verdict:
    if store.waiting:
        # A waiter's `acquired_at` is when it started waiting, where the store says.
        waited = seconds_since(lock.acquired_at, now)
        return Verdict(State.WAITING, (_waiting(lock, store),), age_seconds=waited)
    info: list[Reason] = []
    if store.value_bytes is not None:
        # The key is there (held, as its library sees it); whose token it is was
        # read in part only, and is never passed off as whole.
        info.append(
            Reason(
                "value_cut",
                f"its value is {store.value_bytes:,} bytes: only its start was read, so the"
                " token shown is cut and no action can compare it",
            )
        )
    if store.blocking:
        count = len(store.blocking)
        shown = ", ".join(store.blocking[:5])
        more = f" and {count - 5} more" if count > 5 else ""
        noun = "waiter" if count == 1 else "waiters"
        info.append(Reason("blocking", f"blocks {count} {noun}: {shown}{more}"))

    quorum = store.quorum
    if quorum is not None:
        held = f"{quorum.holding} of {quorum.servers} servers hold it with the same token"
        if quorum.holding < quorum.needed:
            if quorum.holding + quorum.unknown >= quorum.needed:
                reason = Reason(
                    "quorum_unknown",
                    f"{held} and {quorum.unknown} could not be asked: {quorum.needed} are"
                    " needed, so nobody can tell whether it is held",
                )
                return Verdict(State.UNKNOWN, (reason, *info))
            reason = Reason(
                "no_quorum",
                f"{held}, {quorum.needed} are needed: nobody holds it, yet its copies block"
                " acquirers until they expire",
            )
            return Verdict(State.STALE, (reason, *info), next_change_at=None)
        info.append(Reason("quorum", f"{held} ({quorum.needed} needed)"))

    expires_at = store.expires_at
    if expires_at is None and store.lease:
        # One of many leases, not read this poll (etcd/server.py): alive, its time left unknown.
        info.insert(
            0,
            Reason(
                "lease_unread",
                f"its lease {store.lease_hex} is alive; its time to live was not read lately"
                " (a poll reads a batch of the many leases)",
            ),
        )
        return Verdict(State.ACTIVE, tuple(info))
    if expires_at is None:
        what = f"no {store.expiry_word}"
        info.insert(
            0,
            Reason(
                "no_expiry",
                f"the key has {what}: if its holder died, it is never released"
                " (only a break frees it)",
            ),
        )
        return Verdict(State.ACTIVE, tuple(info))
    if now >= expires_at:
        # The store drops an expired key itself; since the last poll nobody
        # knows whether its holder renewed it in time.
        ago = (now - expires_at).total_seconds()
        reason = Reason(
            "expired",
            f"its {store.expiry_word} ran out {duration(ago)} ago as"
            " last seen: the store has removed it unless its holder renewed it",
        )
        return Verdict(State.UNKNOWN, (reason, *info))
    return Verdict(State.ACTIVE, tuple(info), next_change_at=expires_at)


def _waiting(lock: Lock, store: StoreLock) -> Reason:
    holders = ", ".join(store.blocked_by) or "its holder"
    if store.client is not None:
        client = store.client
        waited = (
            f" for {duration(client.blocked_seconds)}" if client.blocked_seconds is not None else ""
        )
        return Reason(
            "waiting",
            f"client {client.id} ({client.addr}) is blocked in {client.command.upper()}{waited},"
            f" by its arguments' length on {lock.name}'s signal list (Redis does not name the"
            f" key): waiting for {lock.name}, held by {holders}",
        )
    where = f", position {store.position} in the queue" if store.position else ""
    return Reason("waiting", f"waits for {lock.name}, held by {holders}{where}")
