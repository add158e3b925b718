"""The dashboard's state: every lock seen, its verdict, and what happened to it.

Sources hand the board change sets (a feed's full picture, or only what moved);
the board keeps entries keyed by lock id, derives events and per-lock history,
re-judges locks whose verdict depends only on time when their deadline passes,
and keeps counts for the sparklines. It is pure: no clock is read here, every
call says what time it is.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from lockwatch.clock import FrozenClock
from lockwatch.model import blocking
from lockwatch.model.changes import ChangeSet, Entry, same, settled_by
from lockwatch.model.conflicts import with_scope_conflicts
from lockwatch.model.events import Event, EventKind, compare
from lockwatch.model.holder import NAMESPACE_GONE
from lockwatch.model.lock import Lock
from lockwatch.model.process import CANNOT_TELL, HostPid, ProcessFacts
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.verdict import State, Verdict, evaluate

EVENTS_KEPT = 5000
HISTORY_KEPT = 100  # per lock
# Events kept in all locks' histories together: each lock's history covers at
# most the last this many events the board recorded (a lock's share is taken
# from its oldest), so a long churn or a huge first scan costs a fixed amount.
HISTORY_EVENTS_KEPT = 20_000
RELEASED_HISTORIES_KEPT = 2000
SAMPLES_KEPT = 600  # one a second: ten minutes
_INSTANT = timedelta(microseconds=1)
# A tick this much earlier than the last one is the clock stepped back (NTP, an
# operator), not the jitter of two reads of it.
CLOCK_STEP_BACK = timedelta(seconds=1)


@dataclass(slots=True)
class Applied:
    """Lock ids whose row must be drawn again, and the events that explain why."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    statuses_changed: bool = False

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.removed or self.statuses_changed)

    def merge(self, other: Applied) -> None:
        self.added.extend(other.added)
        self.changed.extend(other.changed)
        self.removed.extend(other.removed)
        self.events.extend(other.events)
        self.statuses_changed = self.statuses_changed or other.statuses_changed


@dataclass(frozen=True, slots=True)
class Sample:
    at: datetime
    active: int
    stale: int
    waiting: int
    invalid: int


class _Remembered:
    """Process facts as the feed saw them: re-judging on a deadline must not touch
    the process table from the UI thread."""

    def __init__(self, entry: Entry) -> None:
        self._entry = entry

    def facts(self, pid: int) -> ProcessFacts:
        facts = self._entry.facts
        if facts is not None and facts.pid == pid:
            return facts
        return ProcessFacts(pid=pid, alive=bool(self._entry.verdict.alive))

    def host_pid(self, pid: int, namespace: int) -> HostPid:
        """A container's pid as the feed found it: the process whose facts it kept;
        none kept, the holder was found dead (the namespace gone, or without that
        pid, as the verdict said) or nobody could tell."""
        entry = self._entry
        if entry.facts is not None:
            return HostPid(namespace_here=True, pid=entry.facts.pid)
        verdict = entry.verdict
        if verdict.alive is not False:
            return CANNOT_TELL
        gone = any(
            reason.code == "holder_dead" and reason.message.endswith(NAMESPACE_GONE)
            for reason in verdict.reasons
        )
        return HostPid(namespace_here=not gone)


class Board:
    def __init__(self, host: str) -> None:
        self.host = host
        self.entries: dict[str, Entry] = {}
        # Verdicts with scope conflicts added; other ids show their entry's verdict.
        self._conflicted: dict[str, Verdict] = {}
        self._ids_by_feed: dict[str, set[str]] = {}
        self._scoped: set[str] = set()
        self.statuses: dict[str, tuple[SourceStatus, ...]] = {}
        self.errors: dict[str, tuple[ScanError, ...]] = {}
        self.events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        # Each lock's events, oldest first (tuples: most locks have one or two).
        self.history: dict[str, tuple[Event, ...]] = {}
        # The lock id of every event put into a history, oldest first: one slot of
        # HISTORY_EVENTS_KEPT each (see `_record`).
        self._recorded: deque[str] = deque()
        # Released ids, oldest release first (a dict keeps order and moves on re-release).
        self._released: dict[str, None] = {}
        self.samples: deque[Sample] = deque(maxlen=SAMPLES_KEPT)
        self.counts: dict[State, int] = dict.fromkeys(State, 0)
        # (when to look again, lock id, the verdict deadline it is for)
        self._deadlines: list[tuple[datetime, str, datetime]] = []
        self._ticked: datetime | None = None  # the last tick's time
        self._waits_generation = 0
        self._trees: tuple[int, dict[str, blocking.BlockingTree]] | None = None
        self._radii: tuple[int, dict[str, dict[blocking.NodeId, blocking.Radius]]] | None = None
        self.generation = 0  # bumped by every change: views cache on it

    # -- reading -----------------------------------------------------------------

    def verdict(self, lock_id: str) -> Verdict:
        shown = self._conflicted.get(lock_id)
        return shown if shown is not None else self.entries[lock_id].verdict

    def judged(self) -> tuple[tuple[Lock, Verdict], ...]:
        """Every lock with the verdict shown for it, in the board's order: a copy
        of references, no call per lock (an incident's capture on the UI thread)."""
        if not self._conflicted:
            return tuple((entry.lock, entry.verdict) for entry in self.entries.values())
        shown = self._conflicted.get
        return tuple(
            (entry.lock, shown(lock_id) or entry.verdict) for lock_id, entry in self.entries.items()
        )

    def verdict_at(self, lock_id: str, now: datetime) -> Verdict:
        """The verdict as of `now`, messages and all (what a detail view shows):
        judged again from the facts the feed saw, scope conflicts kept."""
        entry = self.entries[lock_id]
        fresh = evaluate(entry.lock, _Remembered(entry), FrozenClock(now), self.host)
        shown = self._conflicted.get(lock_id)
        if shown is None:
            return fresh
        conflict = tuple(r for r in shown.reasons if r.code == "scope_conflict")
        if fresh.state is not State.ACTIVE:
            return fresh  # conflicts are between live locks only
        return replace(
            fresh, reasons=(*fresh.reasons, *conflict), conflicts_with=shown.conflicts_with
        )

    @property
    def waits_generation(self) -> int:
        """Changes whenever any Postgres or kernel lock did: views of the blocking
        trees cache on it."""
        return self._waits_generation

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, lock_id: object) -> bool:
        return lock_id in self.entries

    def all_statuses(self) -> list[SourceStatus]:
        return [status for statuses in self.statuses.values() for status in statuses]

    def all_errors(self) -> list[ScanError]:
        return [error for errors in self.errors.values() for error in errors]

    def blocking_trees(self) -> dict[str, blocking.BlockingTree]:
        """Each server's blocking tree (and the kernel's), built again only after
        a Postgres or kernel lock changed."""
        if self._trees is None or self._trees[0] != self._waits_generation:
            trees = blocking.trees(entry.lock for entry in self.entries.values())
            self._trees = (self._waits_generation, trees)
        return self._trees[1]

    def blast_radius(self, lock_id: str) -> blocking.Radius | None:
        """Whom the session holding `lock_id` holds up: directly, in total, and
        whether it is a root blocker; None when nobody waits on it."""
        entry = self.entries.get(lock_id)
        if entry is None:
            return None
        where, node = blocking.group(entry.lock), blocking.node_of(entry.lock)
        if where is None or node is None:
            return None
        radii = self._radii
        if radii is None or radii[0] != self._waits_generation:
            trees = self.blocking_trees()
            radii = self._radii = (
                self._waits_generation,
                {group: blocking.radii(tree) for group, tree in trees.items()},
            )
        return radii[1].get(where, {}).get(node)

    def conflicts(self) -> list[tuple[str, tuple[str, ...]]]:
        """Scope conflicts: each conflicted lock id and whom it overlaps."""
        return sorted((lock_id, v.conflicts_with) for lock_id, v in self._conflicted.items())

    # -- changing ----------------------------------------------------------------

    def apply(self, change: ChangeSet) -> Applied:
        applied = Applied()
        self._apply_statuses(change, applied)
        self._apply_errors(change)
        known = self._ids_by_feed.setdefault(change.feed, set())
        fresh = {entry.lock.id for entry in change.upserts}
        gone = (known - fresh) if change.full else set(change.removed) - fresh
        updates = []
        for entry in change.upserts:
            lock_id = entry.lock.id
            old = self.entries.get(lock_id)
            if old is None or not same(old, entry):
                updates.append(entry)
            # The feed that reports a lock last owns it, changed or not.
            if lock_id not in known:
                for feed, ids in self._ids_by_feed.items():
                    if feed != change.feed:
                        ids.discard(lock_id)
                known.add(lock_id)
        self._change(updates, gone & known, change.at, applied)
        known -= gone
        return applied

    def due(self, now: datetime) -> bool:
        """Whether `tick(now)` has anything to do: a deadline passed, or the clock
        went back since the last tick."""
        return (bool(self._deadlines) and self._deadlines[0][0] <= now) or self._went_back(now)

    def tick(self, now: datetime) -> Applied:
        """Judge again every lock whose verdict time alone has changed by `now`:
        those whose deadline passed; every lock when the clock went back (a verdict
        reached at the later time, `stale` for `too_old`, may not hold at `now`)."""
        applied = Applied()
        again: dict[str, Entry] = {}
        if self._went_back(now):
            self._rejudge_all(now, again)
        self._ticked = now
        while self._deadlines and self._deadlines[0][0] <= now:
            _, lock_id, deadline = heapq.heappop(self._deadlines)
            entry = self.entries.get(lock_id)
            if entry is None or entry.verdict.next_change_at != deadline or lock_id in again:
                continue  # a newer sighting replaced this deadline
            verdict = evaluate(entry.lock, _Remembered(entry), FrozenClock(now), self.host)
            fresh = Entry(entry.lock, verdict, entry.facts)
            if same(entry, fresh):
                # A limit that is crossed only once it is exceeded has not changed
                # anything at the very instant: look again just after it.
                when = max(deadline, now) + _INSTANT
                heapq.heappush(self._deadlines, (when, lock_id, deadline))
                continue
            again[lock_id] = fresh
        if again:
            self._change(list(again.values()), set(), now, applied)
        return applied

    def _went_back(self, now: datetime) -> bool:
        return self._ticked is not None and now < self._ticked - CLOCK_STEP_BACK

    def _rejudge_all(self, now: datetime, into: dict[str, Entry]) -> None:
        clock = FrozenClock(now)
        for lock_id, entry in self.entries.items():
            verdict = evaluate(entry.lock, _Remembered(entry), clock, self.host)
            fresh = Entry(entry.lock, verdict, entry.facts)
            # A new deadline too: the one ahead of the later time may be too late.
            if not same(entry, fresh) or verdict.next_change_at != entry.verdict.next_change_at:
                into[lock_id] = fresh

    def sample(self, now: datetime) -> Sample:
        counts = self.counts
        taken = Sample(
            now,
            counts[State.ACTIVE],
            counts[State.STALE],
            counts[State.WAITING],
            counts[State.INVALID],
        )
        self.samples.append(taken)
        return taken

    def note(self, event: Event) -> None:
        """Record an event lockwatch itself caused (a lock broken or stolen)."""
        self._record([event])

    # -- internals ---------------------------------------------------------------

    def _apply_errors(self, change: ChangeSet) -> None:
        if change.full or change.all_errors:
            self.errors[change.feed] = change.errors
            return
        settled = settled_by(change)
        kept = [e for e in self.errors.get(change.feed, ()) if not settled(e.path)]
        self.errors[change.feed] = (*kept, *change.errors)

    def _apply_statuses(self, change: ChangeSet, applied: Applied) -> None:
        if not change.statuses:
            return
        before = {s.name: s for s in self.statuses.get(change.feed, ())}
        if tuple(before.values()) != change.statuses:
            applied.statuses_changed = True
        self.statuses[change.feed] = change.statuses
        for status in change.statuses:
            was = before.get(status.name)
            if was is not None and was.state == status.state and was.reason == status.reason:
                continue
            if was is None and status.state in ("ok", "watching", "connected"):
                continue
            detail = status.state + (f": {status.reason}" if status.reason else "")
            applied.events.append(
                Event(change.at, EventKind.SOURCE, None, status.name, status.kind, detail)
            )
        self._record(applied.events)

    def _change(
        self, updates: Iterable[Entry], gone: set[str], at: datetime, applied: Applied
    ) -> None:
        before: dict[str, tuple[Lock, Verdict] | None] = {}

        def remember(lock_id: str) -> None:
            if lock_id not in before:
                entry = self.entries.get(lock_id)
                before[lock_id] = None if entry is None else (entry.lock, self.verdict(lock_id))

        scoped_touched = False
        waits_touched = False
        for lock_id in gone:
            remember(lock_id)
            entry = self.entries.pop(lock_id, None)
            if entry is not None:
                scoped_touched |= lock_id in self._scoped
                waits_touched |= blocking.group(entry.lock) is not None
                self._scoped.discard(lock_id)
                self._conflicted.pop(lock_id, None)
        for entry in updates:
            lock_id = entry.lock.id
            remember(lock_id)
            previous = self.entries.get(lock_id)
            self.entries[lock_id] = entry
            waits_touched |= blocking.group(entry.lock) is not None or (
                previous is not None and blocking.group(previous.lock) is not None
            )
            # Only live locks conflict (with_scope_conflicts): the others are left
            # out of every recomputation, which a large board pays per change set.
            live_scope = bool(entry.lock.scope) and entry.verdict.state is State.ACTIVE
            if live_scope or lock_id in self._scoped:
                scoped_touched = True
                if live_scope:
                    self._scoped.add(lock_id)
                else:
                    self._scoped.discard(lock_id)
                    self._conflicted.pop(lock_id, None)
            deadline = entry.verdict.next_change_at
            if deadline is not None:
                heapq.heappush(self._deadlines, (deadline, lock_id, deadline))
        if len(self._deadlines) > 2 * len(self.entries) + 1024:
            self._compact_deadlines()
        if scoped_touched:
            self._recompute_conflicts(remember)
        if waits_touched:
            self._waits_generation += 1

        events: list[Event] = []
        for lock_id, old in before.items():
            entry = self.entries.get(lock_id)
            new = None if entry is None else (entry.lock, self.verdict(lock_id))
            if old is not None:
                self.counts[old[1].state] -= 1
            if new is not None:
                self.counts[new[1].state] += 1
            if old is None and new is not None:
                applied.added.append(lock_id)
            elif new is None and old is not None:
                applied.removed.append(lock_id)
                self._released.pop(lock_id, None)
                self._released[lock_id] = None
            elif old != new:
                applied.changed.append(lock_id)
            events.extend(compare(old, new, at))
        self._record(events)
        applied.events.extend(events)
        if applied.added or applied.changed or applied.removed:
            self.generation += 1
        self._forget_old_histories()

    def _compact_deadlines(self) -> None:
        """Drop deadlines of verdicts since replaced: locks that heartbeat push a
        new one at every heartbeat, and stale ones would pile up until due."""
        live = {
            lock_id: entry.verdict.next_change_at
            for lock_id, entry in self.entries.items()
            if entry.verdict.next_change_at is not None
        }
        kept = [item for item in self._deadlines if live.get(item[1]) == item[2]]
        heapq.heapify(kept)
        self._deadlines = kept

    def _recompute_conflicts(self, remember: Callable[[str], None]) -> None:
        ids = sorted(self._scoped)
        locks = [self.entries[lock_id].lock for lock_id in ids]
        verdicts = [self.entries[lock_id].verdict for lock_id in ids]
        shown = with_scope_conflicts(locks, verdicts)
        for lock_id, raw, now_shown in zip(ids, verdicts, shown, strict=True):
            had = self._conflicted.get(lock_id)
            if now_shown is raw:
                if had is not None:
                    remember(lock_id)
                    del self._conflicted[lock_id]
            elif had != now_shown:
                remember(lock_id)
                self._conflicted[lock_id] = now_shown

    def _record(self, events: Iterable[Event]) -> None:
        history = self.history
        recorded = self._recorded
        for event in events:
            self.events.append(event)
            lock_id = event.lock_id
            if lock_id is None:
                continue
            kept = history.get(lock_id, ())
            history[lock_id] = (*kept, event)[-HISTORY_KEPT:] if kept else (event,)
            recorded.append(lock_id)
            # A lock has at least as many slots as events in its history (an event
            # dropped by the per-lock cap or forgotten with its lock leaves its slot
            # behind): freeing the oldest slot drops its lock's oldest event, so
            # the histories never hold more than HISTORY_EVENTS_KEPT in all.
            while len(recorded) > HISTORY_EVENTS_KEPT:
                oldest = recorded.popleft()
                its = history.get(oldest)
                if its is None:
                    continue
                if len(its) > 1:
                    history[oldest] = its[1:]
                else:
                    del history[oldest]

    def _forget_old_histories(self) -> None:
        while len(self._released) > RELEASED_HISTORIES_KEPT:
            lock_id = next(iter(self._released))
            del self._released[lock_id]
            if lock_id not in self.entries:
                self.history.pop(lock_id, None)
