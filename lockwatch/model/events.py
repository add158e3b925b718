"""What lockwatch saw happen to a lock, derived by comparing two sightings."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict


class EventKind(StrEnum):
    APPEARED = "appeared"
    RELEASED = "released"
    BECAME_STALE = "became_stale"
    BECAME_ACTIVE = "became_active"
    BECAME_INVALID = "became_invalid"
    STARTED_WAITING = "started_waiting"
    BECAME_FREE = "became_free"
    BECAME_UNKNOWN = "became_unknown"
    HEARTBEAT = "heartbeat"
    HOLDER_DIED = "holder_died"
    HOLDER_CHANGED = "holder_changed"
    WAITERS_CHANGED = "waiters_changed"
    BROKEN = "broken"
    STOLEN = "stolen"
    # The operator's own actions through lockwatch, besides break and steal.
    QUERY_CANCELLED = "query_cancelled"
    LET_GO = "let_go"  # a lock lockwatch held for the operator, released by them
    ACTION_FAILED = "action_failed"  # refused or failed: nothing was done
    SOURCE = "source"


@dataclass(frozen=True, slots=True)
class Event:
    at: datetime
    # An EventKind, or the name an action kind's table entry gives its done
    # event (model/kinds.py): a kind added there needs no member here.
    kind: str
    lock_id: str | None
    name: str
    source: str
    detail: str = ""

    def as_json(self) -> dict[str, object]:
        return {
            "at": self.at,
            "kind": str(self.kind),
            "lock_id": self.lock_id,
            "name": self.name,
            "source": self.source,
            "detail": self.detail,
        }


def holder_text(lock: Lock) -> str:
    """`pid@host actor`, as short as the lock allows (or as its facts say it:
    a Postgres session, a store's token)."""
    facts = lock.facts
    if facts is not None:
        said = facts.holder_text(lock)
        if said is not None:
            return said
    kernel = kernel_holders(lock)
    if kernel is not None:
        return kernel
    holder = lock.holder
    parts = []
    if holder.pid is not None:
        parts.append(f"{holder.pid}@{holder.host}" if holder.host else str(holder.pid))
    elif holder.host:
        parts.append(f"@{holder.host}")
    if holder.actor:
        parts.append(holder.actor)
    return " ".join(parts)


def kernel_holders(lock: Lock) -> str | None:
    """Its holders by command where its facts know them (a lock file a kernel lock
    is held on: as lslocks names them, `sqlite3 (pid 4242)`, `flock (pid 7472) + 2
    more`), not a bare pid; None: they do not."""
    facts = lock.facts
    return None if facts is None else facts.holders_label()


def waiters(lock: Lock) -> int:
    """How many wait on this very lock (the WAIT column)."""
    facts = lock.facts
    return 0 if facts is None else facts.waiter_count()


def _event(at: datetime, kind: EventKind, lock: Lock, detail: str = "") -> Event:
    return Event(at, kind, lock.id, lock.name, lock.source, detail)


def _why(verdict: Verdict) -> str:
    return verdict.reasons[0].message if verdict.reasons else ""


def compare(
    old: tuple[Lock, Verdict] | None, new: tuple[Lock, Verdict] | None, at: datetime
) -> list[Event]:
    """The events between two sightings of one lock id (None: not there)."""
    if new is None:
        if old is None:
            return []
        return [_event(at, EventKind.RELEASED, old[0], f"held by {holder_text(old[0])}".strip())]
    lock, verdict = new
    if old is None:
        detail = f"{verdict.state.value}; {holder_text(lock) or 'no holder recorded'}"
        events = [_event(at, EventKind.APPEARED, lock, detail)]
        if verdict.state is State.WAITING:
            events.append(_event(at, EventKind.STARTED_WAITING, lock, _why(verdict)))
        return events

    before, was = old
    events = []
    if holder_text(before) != holder_text(lock):
        events.append(
            _event(
                at,
                EventKind.HOLDER_CHANGED,
                lock,
                f"{holder_text(before) or 'nobody'} → {holder_text(lock) or 'nobody'}",
            )
        )
    elif was.alive is True and verdict.alive is False:
        events.append(_event(at, EventKind.HOLDER_DIED, lock, _why(verdict)))
    if (
        lock.heartbeat_at is not None
        and before.heartbeat_at is not None
        and lock.heartbeat_at > before.heartbeat_at
    ):
        gap = (lock.heartbeat_at - before.heartbeat_at).total_seconds()
        events.append(_event(at, EventKind.HEARTBEAT, lock, f"{duration(gap)} after the last"))
    if was.state is not verdict.state:
        kind = {
            State.STALE: EventKind.BECAME_STALE,
            State.ACTIVE: EventKind.BECAME_ACTIVE,
            State.INVALID: EventKind.BECAME_INVALID,
            State.WAITING: EventKind.STARTED_WAITING,
            State.FREE: EventKind.BECAME_FREE,
            State.UNKNOWN: EventKind.BECAME_UNKNOWN,
        }[verdict.state]
        events.append(_event(at, kind, lock, _why(verdict)))
    if waiters(before) != waiters(lock):
        events.append(
            _event(at, EventKind.WAITERS_CHANGED, lock, f"{waiters(before)} → {waiters(lock)}")
        )
    return events
