"""Redisson's locks (Java): a hash per lock, as its Lua scripts keep it.

- `RLock` (and `RFairLock`'s lock itself): the hash `<name>` holds one field
  `<client uuid>:<thread id>` whose value is the reentrancy count
  (`tryLockInnerAsync`: HINCRBY, then PEXPIRE of the lease).
- `RReadWriteLock`: the same hash with a field `mode` (`read` or `write`); a
  writer's field is `<uuid>:<thread id>:write`, each reader's `<uuid>:<thread id>`.

Without an explicit leaseTime the client's watchdog re-arms the PEXPIRE to
`lockWatchdogTimeout` (30 s by default) every third of it (10 s): a held lock's
TTL stays between 20 and 30 s. A TTL well below that went a whole rhythm without
renewal: `watchdog_late` (its JVM may be stuck or gone; the key still expires by
itself). A lock taken with a leaseTime is never renewed, so its TTL runs down
the same way: the reason says so, and the lock stays `active`.

`RFairLock` queues its waiters in the list `redisson_lock_queue:{<name>}`, each
with a timeout (ms since the epoch, the waiter's clock) in the sorted set
`redisson_lock_timeout:{<name>}`: a waiter whose timeout has passed has stopped
waiting, and the next attempt on the lock drops it (`fair_wait_expired`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.humanize import duration
from lockwatch.model.jsonfields import json_fields
from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.model.timestamps import format_timestamp
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.redis import ids, keyfacts
from lockwatch.sources.redis.server import RedisCollection, RedisSnapshot
from lockwatch.sources.stores.facts import REDIS, WARNING_CODES, StoreLock
from lockwatch.sources.stores.rules import evaluate_store

if TYPE_CHECKING:
    from lockwatch.model.process import ProcessLookup

REDISSON = "redisson"
REDISSON_RW = "redisson-rwlock"
FORMATS = (REDISSON, REDISSON_RW)

# Redisson's Config.lockWatchdogTimeout default, and its renewal every third.
WATCHDOG_S = 30.0
RENEW_EVERY_S = WATCHDOG_S / 3
# Timers and the poll disagree by a little: late only past a whole rhythm and this.
SLACK_S = 2.0
LATE_BELOW_S = WATCHDOG_S - RENEW_EVERY_S - SLACK_S

_OWNER = lazy_compile(
    r"(?P<uuid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r":(?P<thread>\d+)(?P<write>:write)?"
)


@dataclass(frozen=True, slots=True)
class RedissonOwner:
    """One `<uuid>:<thread id>` field: who holds it, how many times over."""

    client: str  # the Redisson instance's uuid (ServiceManager's id)
    thread: int
    count: int  # reentrancy: HINCRBY'd by each lock(), down by each unlock()
    write: bool = False  # a read-write lock's writer

    @property
    def field(self) -> str:
        return f"{self.client}:{self.thread}" + (":write" if self.write else "")

    as_json = json_fields("client", "thread", ("reentrancy", "count"), "write")


def owners(found: RedisCollection) -> tuple[str | None, tuple[RedissonOwner, ...]] | None:
    """(mode, owners) when the hash is laid out as Redisson keeps a lock, else None.
    mode: None for a plain RLock, `read`/`write` for a read-write lock."""
    if found.kind != "hash" or found.size != len(found.entries):
        return None
    mode: str | None = None
    held: list[RedissonOwner] = []
    for field, value in found.entries:
        if field == "mode":
            if value not in ("read", "write"):
                return None
            mode = value
            continue
        match = _OWNER.fullmatch(field)
        if match is None or not value.isdigit() or int(value) < 1:
            return None
        held.append(
            RedissonOwner(match["uuid"], int(match["thread"]), int(value), bool(match["write"]))
        )
    if not held or (mode is None and (len(held) != 1 or held[0].write)):
        return None
    # The writer first: it is who excludes everyone else.
    held.sort(key=lambda owner: (not owner.write, owner.client, owner.thread))
    return mode, tuple(held)


@dataclass(frozen=True, slots=True)
class RedissonFacts(StoreLock):
    mode: str | None = None  # a read-write lock's `mode` field
    owners: tuple[RedissonOwner, ...] = ()
    # A fair lock's queued waiter: until when it waits (its timeout score).
    wait_until: datetime | None = None

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict:
        verdict = evaluate_store(lock, self, now)
        if self.waiting:
            if self.wait_until is not None and self.wait_until <= now:
                reason = Reason(
                    "fair_wait_expired",
                    f"{self.session} stopped waiting for {lock.name}"
                    f" {duration((now - self.wait_until).total_seconds())} ago (its timeout in"
                    " the fair lock's queue): Redisson drops it at the next attempt on the lock",
                )
                return Verdict(State.STALE, (reason,), age_seconds=verdict.age_seconds)
            return Verdict(
                verdict.state,
                verdict.reasons,
                age_seconds=verdict.age_seconds,
                next_change_at=self.wait_until,
            )
        reasons = list(verdict.reasons)
        first = self.owners[0]
        more = f" (and {len(self.owners) - 1} more)" if len(self.owners) > 1 else ""
        what = f"{self.mode} lock" if self.mode else "lock"
        reasons.append(
            Reason(
                "redisson",
                f"Redisson {what} held by client {first.client} thread {first.thread},"
                f" reentered {first.count} time{'s' if first.count != 1 else ''}{more}",
            )
        )
        ttl = self.ttl_left
        if ttl is not None and ttl < LATE_BELOW_S and "expired" not in verdict.codes:
            reasons.insert(
                0,
                Reason(
                    "watchdog_late",
                    f"{ttl:.1f} s of TTL left: Redisson's watchdog re-arms it to {WATCHDOG_S:g} s"
                    f" every {RENEW_EVERY_S:g} s, so it went over {duration(RENEW_EVERY_S)}"
                    " without renewal: its JVM may be stuck or gone (unless it was taken with a"
                    " leaseTime, which is never renewed). It still expires by itself",
                ),
            )
        return Verdict(
            verdict.state,
            tuple(reasons),
            age_seconds=verdict.age_seconds,
            next_change_at=verdict.next_change_at,
        )

    def warning_codes(self) -> frozenset[str]:
        return WARNING_CODES | {"watchdog_late"}

    def holder_text(self, lock: Lock) -> str:
        if self.waiting or not self.owners:
            return f"redisson {self.session} queued"
        first = self.owners[0]
        more = f" +{len(self.owners) - 1}" if len(self.owners) > 1 else ""
        return f"redisson {first.client}:{first.thread} x{first.count}{more}"

    def as_json(self) -> dict[str, Any]:
        record = StoreLock.as_json(self)
        record["redisson"] = {
            "mode": self.mode,
            "owners": [owner.as_json() for owner in self.owners],
            "watchdog_seconds": WATCHDOG_S,
            "late_below_seconds": LATE_BELOW_S,
            "queue_position": self.position if self.waiting else None,
            "wait_until": None if self.wait_until is None else format_timestamp(self.wait_until),
        }
        return record

    def fields(self) -> list[tuple[str, str | None]]:
        rows = StoreLock.fields(self)
        rows.insert(2, ("mode", self.mode))
        for owner in self.owners:
            role = "writer" if owner.write else "holder"
            rows.insert(3, (role, f"client {owner.client} thread {owner.thread} (x{owner.count})"))
        return rows


def to_locks(snapshot: RedisSnapshot, found: RedisCollection) -> list[Lock]:
    """The lock, and a fair lock's queued waiters; none when the hash is not
    laid out as Redisson keeps a lock."""
    layout = owners(found)
    if layout is None:
        return []
    mode, held = layout
    ttl = None if found.pttl < 0 else found.pttl / 1000
    session = held[0].field
    waiters = [entry for entry, _ in found.queue if entry != session]
    facts = keyfacts.held(
        RedissonFacts,
        snapshot,
        found.key,
        session,
        ttl,
        blocking=tuple(waiters),
        mode=mode,
        owners=held,
    )
    fmt = REDISSON if mode is None else REDISSON_RW
    locks = [
        keyfacts.held_lock(
            facts,
            ids.redis_id(snapshot.server, found.key),
            fmt,
            found.key,
            content={
                "server": snapshot.server,
                "key": found.key,
                "hash": dict(found.entries),
                "queue": [entry for entry, _ in found.queue],
                "pttl_ms": found.pttl,
            },
            sha256=_digest(found),
        )
    ]
    position = 0
    for entry, timeout in found.queue:
        if entry == session:
            continue
        position += 1
        locks.append(
            Lock(
                id=ids.redis_id(snapshot.server, found.key, waiter=entry),
                source=REDIS,
                format=fmt,
                name=found.key,
                path=None,
                holder=Holder(session=entry, operation="waiting"),
                facts=keyfacts.waiting(
                    RedissonFacts,
                    snapshot,
                    found.key,
                    entry,
                    position,
                    session,
                    mode=mode,
                    wait_until=_ms(timeout),
                ),
            )
        )
    return locks


def _ms(score: str | None) -> datetime | None:
    try:
        return None if score is None else datetime.fromtimestamp(float(score) / 1000, UTC)
    except (ValueError, OverflowError, OSError):
        return None


def _digest(found: RedisCollection) -> str:
    import hashlib

    from lockwatch.sources.redis.server import raw

    body = b"\0".join(raw(f) + b"=" + raw(v) for f, v in sorted(found.entries))
    return hashlib.sha256(body).hexdigest()
