"""Lock history's records, as the store keeps them and the reader hands them out.

Pure: frozen dataclasses and the words of the contract; no I/O, no source named.
The store (`lockwatch/history/`) keeps intervals, not snapshots: each lock's life
state by state (`LockSpan`), each wait edge from its first sighting to its last
(`WaitSpan`), each action with its audit record's id (`ActionMark`), each source
outage (`Outage`). `model/episodes.py` folds wait spans into episodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# How a wait span was learnt: sampled by a recorder's poll, or folded in from a
# server's log (PostgreSQL's log_lock_waits lines: issue 44, item 7).
ORIGIN_POLL = "poll"
ORIGIN_LOG = "log"
ORIGINS = (ORIGIN_POLL, ORIGIN_LOG)

# How one waiter's wait ended (`WaitSpan.outcome`, `EpisodeWaiter.outcome`).
ACQUIRED = "acquired"  # it got the lock (its waiting row turned granted, or it holds now)
TIMEOUT = "timeout"  # it stopped waiting while its blocker still held (lock_timeout & co)
CANCELLED = "cancelled"  # it was cancelled (only a log can tell this from a timeout)
DEADLOCK = "deadlock"  # it was in a wait-for cycle when it stopped waiting
GONE = "gone"  # its session or process is gone
OUTCOMES = (ACQUIRED, TIMEOUT, CANCELLED, DEADLOCK, GONE)

# How an episode ended (`Episode.ended_by`); None while it lasts.
RELEASED = "released"
HOLDER_DIED = "holder_died"
WAITERS_GAVE_UP = "waiters_gave_up"
BROKEN = "broken"
ENDINGS = (RELEASED, HOLDER_DIED, WAITERS_GAVE_UP, DEADLOCK, BROKEN)


@dataclass(frozen=True, slots=True)
class Who:
    """A blocker or a waiter as it was when first seen in its role. Every field
    but `node` is optional: sources know different things. Text fields are
    already scrubbed (secrets in queries hidden, as the audit log hides them)."""

    node: str  # its node in its wait-for graph, as text: "4242", "prepared:tx1", a token
    pid: int | None = None
    application: str | None = None  # a session's application, or a process's command
    user: str | None = None
    state: str | None = None  # a session's state ("idle in transaction")
    query: str | None = None  # its query (or the table's HOLDER cell), scrubbed
    # Since when its transaction (or, without one, its state) ran, where known:
    # the transaction's age at any instant is that instant minus this.
    since: datetime | None = None
    lock_id: str | None = None  # the lock row it was seen through, where there is one


@dataclass(frozen=True, slots=True)
class WaitSpan:
    """One wait edge: `waiter` waited on `blocker` for `resource` from `start`
    to `end` (None: still waiting as far as the store knows).

    `server` is the wait-for graph's group (a PostgreSQL server, "kernel", a
    store): waiters and blockers are nodes of that graph. `outcome` says how the
    wait ended (OUTCOMES; None while it lasts or when nobody could tell).
    `cycle`: the edge was part of a wait-for cycle (a deadlock in the making)."""

    host: str
    source: str
    server: str
    resource: str
    mode: str
    waiter: Who
    blocker: Who
    start: datetime
    end: datetime | None = None
    outcome: str | None = None
    origin: str = ORIGIN_POLL
    cycle: bool = False


@dataclass(frozen=True, slots=True)
class LockSpan:
    """One lock in one state from `start` to `end` (None: still so, as far as
    the store knows). `reasons` are the verdict's reason codes; `holder` the
    holder as the table showed it (scrubbed); `place` where the lock is (its
    path, else its source's `where`)."""

    host: str
    lock_id: str
    source: str
    name: str
    place: str
    state: str
    reasons: tuple[str, ...]
    holder: str
    start: datetime
    end: datetime | None = None


@dataclass(frozen=True, slots=True)
class ActionMark:
    """An action lockwatch took on a lock, tied to its audit record (`audit_id`:
    the record's `seq` in the audit log; None where it was not audited)."""

    host: str
    at: datetime
    lock_id: str
    action: str  # the audit event: lock_broken, backend_terminated, ...
    operator: str
    audit_id: int | None
    result: str = "success"
    # The session or process the lock's holder is in its wait-for graph (a
    # backend pid), where it is in one: an action on any of its locks ends it.
    node: str | None = None


@dataclass(frozen=True, slots=True)
class Outage:
    """A source that could not be read from `start` to `end`: nothing is known
    of its locks then (absent waits are no proof that nobody waited)."""

    host: str
    source: str
    name: str
    start: datetime
    end: datetime | None
    detail: str


@dataclass(frozen=True, slots=True)
class EpisodeWaiter:
    node: str
    pid: int | None
    application: str | None
    start: datetime
    end: datetime | None
    outcome: str | None


@dataclass(frozen=True, slots=True)
class Episode:
    """One root blocker and everyone who waited behind it, directly or through
    a queue, from the first wait to the last (a gap shorter than two polls does
    not split it). A lock with no waiters that went stale or invalid leaves an
    episode too (its trail): no waiters, its state's span.

    The JSON contract (`as_json`) is issue 44's item 2: `id`, `source`,
    `server`, `resource`, `start`, `end`, `blocker`, `waiters`, `peak_waiters`,
    `longest_wait_seconds`, `waiter_seconds`, `ended_by`, and `audit_id` when it
    was ended by an action."""

    id: str
    host: str
    source: str
    server: str
    resource: str
    start: datetime
    end: datetime | None
    blocker: Who
    waiters: tuple[EpisodeWaiter, ...]
    peak_waiters: int
    longest_wait_seconds: float
    waiter_seconds: float
    ended_by: str | None
    audit_id: int | None = None
    operator: str | None = None
    # The lock's state for a trail (stale, invalid); None for a wait episode.
    state: str | None = None
    origins: tuple[str, ...] = (ORIGIN_POLL,)
