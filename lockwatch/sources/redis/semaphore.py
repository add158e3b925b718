"""redis-semaphore's (npm) `Semaphore` and `MultiSemaphore`: a sorted set
`semaphore:<key>` whose members are the holders' identifiers, each scored by the
time (ms since the epoch, on the holder's clock) it acquired or last refreshed.

As the library's Lua keeps it (`acquireLua`, `refreshLua`): every acquire and
refresh first removes the members older than its `lockTimeout`
(ZREMRANGEBYSCORE -inf now-lockTimeout), admits a holder while ZCARD (plus its
permits) stays within the limit, scores it `now` and re-arms the key's PEXPIRE
to `lockTimeout`. A `MultiSemaphore` holder of N permits is N members
`<identifier>_0` … `<identifier>_<N-1>`.

So a holder is one record here (id `…#holder=<identifier>`). The limit is an
argument of each call, never stored in Redis: it is unknown to lockwatch. The
lockTimeout is not stored either; the last writer's is what is left of the
key's TTL plus the time since its newest score, and a member older than that
is expired by the library's rule (`semaphore_expired`): it no longer counts, and
the next acquirer removes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.humanize import duration
from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Lock, Reason
from lockwatch.model.timestamps import format_timestamp
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.redis import ids, keyfacts
from lockwatch.sources.redis.server import RedisCollection, RedisSnapshot
from lockwatch.sources.stores.facts import StoreLock

if TYPE_CHECKING:
    from collections.abc import Mapping

    from lockwatch.model.process import ProcessLookup

SEMAPHORE = "redis-semaphore"
PREFIX = "semaphore:"
FORMATS = (SEMAPHORE,)

# Scores that are times in ms since the epoch: 2001 to 2286.
_MS_RANGE = (1e12, 1e13)
_PERMIT = lazy_compile(r"(?P<identifier>.+)_(?P<index>\d+)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class SemaphoreHolder:
    identifier: str
    permits: int  # members it holds (a MultiSemaphore's permits; 1 for a Semaphore)
    score_ms: float  # acquired or last refreshed, on the holder's clock
    # Its members and their scores as Redis prints them: what a break compares.
    entries: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SemaphoreFacts(StoreLock):
    identifier: str = ""
    permits: int = 1
    refreshed_at: datetime | None = None
    # The key's members (all of them, ZCARD) and this holder's place by score.
    members: int = 0
    holders: int = 0
    # The last writer's lockTimeout in seconds, as inferred; None: no TTL to tell.
    lock_timeout: float | None = None
    expired: bool = False
    # The limit, where configured ([redis] semaphore_limits): Redis does not keep it.
    limit: int | None = None
    # This holder's members and their scores as Redis printed them (a break's
    # compare-and-swap: actions.py).
    entries: tuple[tuple[str, str], ...] = ()
    # The set was read only in part (its first MAX_MEMBERS by score) and this
    # holder's members run past the cut: `entries` may not be all it holds.
    partial: bool = False

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict:
        age = None if self.refreshed_at is None else (now - self.refreshed_at).total_seconds()
        held = (
            f"{self.identifier} holds {self.permits} of the {self.members} permits taken"
            f" ({self.holders} holder{'s' if self.holders != 1 else ''})"
        )
        if self.limit is None:
            held += (
                "; the limit is an argument of each call, not stored in Redis"
                " ([redis] semaphore_limits can name it)"
            )
        else:
            full = ": full, acquirers wait" if self.members >= self.limit else ""
            held += f" of a limit of {self.limit} (as configured){full}"
        info = Reason("semaphore", held)
        if self.expired and self.lock_timeout is not None and age is not None:
            reason = Reason(
                "semaphore_expired",
                f"last acquired or refreshed {duration(age)} ago, over its lockTimeout of"
                f" {self.lock_timeout:g} s (the key's TTL plus the time since its newest"
                " member): by redis-semaphore's rule it no longer counts, and the next"
                " acquirer removes it",
            )
            return Verdict(State.STALE, (reason, info), age_seconds=age)
        if self.lock_timeout is None:
            reason = Reason(
                "no_expiry",
                "the key has no TTL, so its lockTimeout cannot be told: redis-semaphore"
                " always sets one, so something else wrote it",
            )
            return Verdict(State.ACTIVE, (reason, info), age_seconds=age)
        return Verdict(State.ACTIVE, (info,), age_seconds=age, next_change_at=self.expires_at)

    def holder_text(self, lock: Lock) -> str:
        permits = f" x{self.permits}" if self.permits != 1 else ""
        return f"holder {self.identifier}{permits}"

    def as_json(self) -> dict[str, Any]:
        record = StoreLock.as_json(self)
        record["semaphore"] = {
            "identifier": self.identifier,
            "permits": self.permits,
            "refreshed_at": None
            if self.refreshed_at is None
            else format_timestamp(self.refreshed_at),
            "members": self.members,
            "holders": self.holders,
            "limit": self.limit,
            "lock_timeout_seconds": self.lock_timeout,
            "expired": self.expired,
        }
        return record

    def fields(self) -> list[tuple[str, str | None]]:
        rows = StoreLock.fields(self)
        rows[2:3] = [
            ("holder", self.identifier),
            ("permits", str(self.permits)),
            ("refreshed", None if self.refreshed_at is None else self.refreshed_at.isoformat()),
            (
                "taken",
                f"{self.members} by {self.holders} holders; limit "
                + ("not stored in Redis" if self.limit is None else f"{self.limit} (configured)"),
            ),
            (
                "lockTimeout",
                None if self.lock_timeout is None else f"{self.lock_timeout:g} s (inferred)",
            ),
        ]
        return rows


def holders(found: RedisCollection) -> list[SemaphoreHolder] | None:
    """The holders, when the sorted set is laid out as redis-semaphore keeps one."""
    if found.kind != "zset" or not found.entries:
        return None
    scored: list[tuple[str, float]] = []
    printed = dict(found.entries)
    for member, score in found.entries:
        try:
            value = float(score)
        except ValueError:
            return None
        if not _MS_RANGE[0] <= value < _MS_RANGE[1]:
            return None
        scored.append((member, value))
    # A MultiSemaphore's holder is its `<identifier>_<i>` members, scored alike.
    groups: dict[str, list[tuple[str, float]]] = {}
    for member, value in scored:
        permit = _PERMIT.fullmatch(member)
        groups.setdefault(permit["identifier"] if permit else member, []).append((member, value))
    found_holders: list[SemaphoreHolder] = []
    for identifier, members in groups.items():
        if len(members) > 1 and any(_PERMIT.fullmatch(m) is None for m, _ in members):
            # A plain identifier and a permit sharing a prefix: separate holders.
            found_holders.extend(SemaphoreHolder(m, 1, v, ((m, printed[m]),)) for m, v in members)
            continue
        single = len(members) == 1 and _PERMIT.fullmatch(members[0][0]) is None
        found_holders.append(
            SemaphoreHolder(
                members[0][0] if single else identifier,
                len(members),
                max(v for _, v in members),
                tuple((m, printed[m]) for m, _ in members),
            )
        )
    return found_holders


def is_semaphore(key: str) -> bool:
    return key.startswith(PREFIX)


def to_locks(
    snapshot: RedisSnapshot, found: RedisCollection, limits: Mapping[str, int]
) -> list[Lock]:
    """One record per holder; `limits`: the configured limits by semaphore name
    (`[redis] semaphore_limits`), for Redis does not keep them."""
    held = holders(found)
    if held is None:
        return []
    polled_ms = snapshot.polled_at.timestamp() * 1000
    newest = max(holder.score_ms for holder in held)
    lock_timeout_ms = None if found.pttl < 0 else found.pttl + max(0.0, polled_ms - newest)
    name = found.key[len(PREFIX) :] if is_semaphore(found.key) else found.key
    # Read in part: the holder of the last member read may hold more past the cut.
    cut = found.entries[-1][0] if found.size > len(found.entries) else None
    locks = []
    for holder in held:
        refreshed = datetime.fromtimestamp(holder.score_ms / 1000, UTC)
        expired = False
        ttl = None
        if lock_timeout_ms is not None:
            left_ms = holder.score_ms + lock_timeout_ms - polled_ms
            expired = left_ms < 0
            ttl = max(0.0, min(left_ms, float(found.pttl))) / 1000
        facts = keyfacts.held(
            SemaphoreFacts,
            snapshot,
            found.key,
            holder.identifier,
            ttl,
            identifier=holder.identifier,
            permits=holder.permits,
            refreshed_at=refreshed,
            members=found.size,
            holders=len(held),
            # To 0.1 s: the inference moves by the milliseconds between the poll's
            # clock and PTTL, which is no change of the lock.
            lock_timeout=None if lock_timeout_ms is None else round(lock_timeout_ms / 100) / 10,
            expired=expired,
            limit=limits.get(name),
            entries=holder.entries,
            partial=cut is not None and any(member == cut for member, _ in holder.entries),
        )
        locks.append(
            keyfacts.held_lock(
                facts,
                ids.redis_id(snapshot.server, found.key, holder=holder.identifier),
                SEMAPHORE,
                name,
                acquired_at=refreshed,
                heartbeat_at=refreshed,
                content={
                    "server": snapshot.server,
                    "key": found.key,
                    "members": dict(found.entries),
                    "pttl_ms": found.pttl,
                },
                sha256=_digest(found.key, holder),
            )
        )
    return locks


def _digest(key: str, holder: SemaphoreHolder) -> str:
    import hashlib

    from lockwatch.sources.redis.server import raw

    return hashlib.sha256(raw(f"{key}\0{holder.identifier}\0{holder.score_ms!r}")).hexdigest()
