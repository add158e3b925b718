"""What feeds hand the board: the feed protocol. A `ChangeSet` is what one feed
saw at one instant (all its locks, or only what moved), made of `Entry`s (a
lock, its verdict and the process facts behind it) that `judge` makes from
freshly collected locks; `merge`/`Merging` fold a feed's change sets into one
(a feed that cannot keep up), `same` says whether a sighting changed anything a
row shows. Pure, like the board: no clock is read here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from lockwatch.clock import FrozenClock
from lockwatch.model.lock import Lock
from lockwatch.model.process import HostPid, ProcessFacts, ProcessLookup
from lockwatch.model.slots import fast_init, lean_dataclass
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.verdict import Verdict, evaluate_all


@fast_init
@lean_dataclass(frozen=True, slots=True)
class Entry:
    """A lock as a feed judged it. `facts` are the holder's process facts at that
    moment, so the lock can be judged again when time alone changes its verdict
    (and a replay can do so without this host's process table)."""

    lock: Lock
    verdict: Verdict
    facts: ProcessFacts | None = None


@lean_dataclass(frozen=True, slots=True)
class ChangeSet:
    """What one feed saw at one instant. `full`: these are all its locks, so any
    other lock the board holds from this feed is gone."""

    feed: str
    at: datetime
    statuses: tuple[SourceStatus, ...] = ()
    full: bool = False
    upserts: tuple[Entry, ...] = ()
    removed: tuple[str, ...] = ()
    errors: tuple[ScanError, ...] = ()
    # `errors` are all the feed's problems now (a rescan), not only new ones.
    all_errors: bool = False
    # Places looked at again (directories listed anew): an error at one of them is
    # over, unless `errors` names it again.
    looked: tuple[str, ...] = ()


class _Recording:
    def __init__(self, processes: ProcessLookup) -> None:
        self._processes = processes
        self.seen: dict[int, ProcessFacts] = {}
        # A container's pids, by (pid, namespace), as this host found them.
        self.mapped: dict[tuple[int, int], HostPid] = {}

    def facts(self, pid: int) -> ProcessFacts:
        found = self.seen.get(pid)
        if found is None:
            found = self.seen[pid] = self._processes.facts(pid)
        return found

    def host_pid(self, pid: int, namespace: int) -> HostPid:
        found = self.mapped.get((pid, namespace))
        if found is None:
            found = self.mapped[pid, namespace] = self._processes.host_pid(pid, namespace)
        return found

    def holder_pid(self, lock: Lock) -> int | None:
        """The pid here of the lock's holder (a container's pid mapped to this host's)."""
        pid, namespace = lock.holder.pid, lock.holder.pid_namespace
        if pid is None or namespace is None:
            return pid
        mapped = self.mapped.get((pid, namespace))
        return mapped.pid if mapped is not None and mapped.pid is not None else pid


def judge(locks: Sequence[Lock], processes: ProcessLookup, now: datetime, host: str) -> list[Entry]:
    """Entries for freshly collected locks: verdicts (scope conflicts are the
    board's business, since they span feeds) and the process facts behind them."""
    recording = _Recording(processes)
    verdicts = evaluate_all(locks, recording, FrozenClock(now), host)
    seen = recording.seen
    return [
        Entry(lock, verdict, _facts_kept(recording.holder_pid(lock), verdict, seen))
        for lock, verdict in zip(locks, verdicts, strict=True)
    ]


def _facts_kept(
    pid: int | None, verdict: Verdict, seen: dict[int, ProcessFacts]
) -> ProcessFacts | None:
    """The holder's facts, unless they only say its pid is not running where the
    verdict says so too: the board's `_Remembered` tells exactly that from the verdict (most
    locks of a large tree of leftovers: 5 MB at 100,000)."""
    facts = None if pid is None else seen.get(pid)
    if facts is None or verdict.alive or facts != ProcessFacts(facts.pid, alive=False):
        return facts
    return None


def merge(first: ChangeSet, then: ChangeSet) -> ChangeSet:
    """One change set that does to a board what `first` and then `then` (of the
    same feed) do: the same entries, removals and errors in the end. What only
    happened in between is not told: a lock that came and went within them is
    not there at all, and the statuses are `then`'s (where it has any), so a
    status that changed between the two is not merged away by whoever calls this
    (see `Coalescer`)."""
    merging = Merging(first)
    merging.add(then)
    return merging.change_set()


class Merging:
    """Change sets of one feed merged as they come (`merge`, one at a time): each
    costs what it holds, not what was merged before it, so a burst of thousands
    of small change sets is not copied again and again."""

    def __init__(self, first: ChangeSet) -> None:
        self.feed = first.feed
        self.at = first.at
        self.statuses = first.statuses
        self.full = first.full
        self.all_errors = first.all_errors
        self._upserts = {entry.lock.id: entry for entry in first.upserts}
        # A full picture removes whatever it does not hold: no removals to tell.
        self._removed = {} if first.full else dict.fromkeys(first.removed)
        self._errors = list(first.errors)
        self._looked = dict.fromkeys(first.looked)

    def add(self, then: ChangeSet) -> None:
        if then.feed != self.feed:
            raise ValueError(f"change sets of two feeds: {self.feed!r}, {then.feed!r}")
        self.at = then.at
        self.statuses = then.statuses or self.statuses
        if then.full:
            self.full = True
            self.all_errors = then.all_errors
            self._upserts = {entry.lock.id: entry for entry in then.upserts}
            self._removed = {}
            self._errors = list(then.errors)
            self._looked = {}
            return
        upserts, removed = self._upserts, self._removed
        for lock_id in then.removed:
            upserts.pop(lock_id, None)
            if not self.full:
                removed[lock_id] = None
        for entry in then.upserts:
            lock_id = entry.lock.id
            upserts[lock_id] = entry
            removed.pop(lock_id, None)
        if then.all_errors:
            self._errors = list(then.errors)
        elif then.upserts or then.removed or then.errors or then.looked:
            # `then`, a delta, settles the paths it names (see Board._apply_errors).
            settled = settled_by(then)
            self._errors = [e for e in self._errors if not settled(e.path)]
            self._errors.extend(then.errors)
            self._looked.update(dict.fromkeys(then.looked))
        self.all_errors = self.all_errors or then.all_errors

    def change_set(self) -> ChangeSet:
        return ChangeSet(
            self.feed,
            self.at,
            self.statuses,
            full=self.full,
            upserts=tuple(self._upserts.values()),
            removed=tuple(self._removed),
            errors=tuple(self._errors),
            all_errors=self.all_errors,
            looked=tuple(self._looked),
        )


def settled_by(change: ChangeSet) -> Callable[[str], bool]:
    """Whether a delta settles an error's path: read now, gone, failing anew, or
    at or under a directory looked at again (whatever still fails there, the
    delta names anew)."""
    named = {entry.lock.path for entry in change.upserts if entry.lock.path is not None}
    named.update(lock_id.removeprefix("file:") for lock_id in change.removed)
    named.update(error.path for error in change.errors)
    named.update(change.looked)
    under = tuple(directory.rstrip("/") + "/" for directory in change.looked)
    return lambda path: path in named or path.startswith(under)


def same(a: Entry, b: Entry) -> bool:
    """Whether two sightings differ in anything a row shows. A verdict's age and
    the durations in its messages move with time alone; the view computes those
    when it draws, so they are no reason to send or redraw a lock."""
    if a is b:
        return True
    va, vb = a.verdict, b.verdict
    return (
        va.state is vb.state
        and va.codes == vb.codes
        and va.alive == vb.alive
        and va.next_change_at == vb.next_change_at
        and va.conflicts_with == vb.conflicts_with
        and va.process == vb.process
        and a.lock == b.lock
    )
