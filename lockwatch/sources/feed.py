"""Feeds: sources that run for as long as the dashboard does and hand it change sets.

A feed collects in worker threads and calls `emit` on the event loop; the
dashboard only applies what it is handed. Each feed diffs its own fresh pictures
against the last one it sent, so the UI thread's work grows with what changed,
not with how many locks exist.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, cast

from lockwatch.model.changes import ChangeSet, Entry, Merging, same
from lockwatch.model.verdict import Verdict

if TYPE_CHECKING:
    from lockwatch.model.facts import Facts

Emit = Callable[[ChangeSet], None]


class Feed(Protocol):
    name: str

    async def run(self, emit: Emit) -> None:
        """Collect until cancelled, emitting a change set for everything seen."""
        ...

    async def close(self) -> None: ...


# A server source's times are the poll's instant less the ages the server gives
# (PostgreSQL's, MySQL's): they move by the round trip's jitter from one poll to
# the next, and within this they are the same time.
WOBBLE = timedelta(milliseconds=500)


def close_in_time(a: datetime | None, b: datetime | None) -> bool:
    """Whether two derived times are one time seen through the poll's jitter."""
    if a is None or b is None:
        return a is b
    return abs(a - b) <= WOBBLE


def same_judgement(old: Verdict, new: Verdict) -> bool:
    """Whether two verdicts say the same, but for the jitter in their deadline."""
    return (
        old.state is new.state
        and old.codes == new.codes
        and old.alive == new.alive
        and close_in_time(old.next_change_at, new.next_change_at)
    )


def same_but_for_times(
    old: Entry,
    new: Entry,
    facts_type: type[Facts],
    session: str,
    session_times: tuple[str, ...],
    times: tuple[str, ...],
    kept: tuple[str, ...] = (),
) -> bool:
    """Whether a server's lock seen again differs only by its derived times'
    wobble: its `times` and its `session`'s `session_times` (attribute names of
    facts of `facts_type`) each close to the old, and all else equal once the old
    times, and `kept` (times other checks already cover), are put back."""
    ol, nl = old.lock, new.lock
    of, nf = ol.facts, nl.facts
    if not isinstance(of, facts_type) or not isinstance(nf, facts_type):
        return False
    os_, ns = getattr(of, session), getattr(nf, session)
    # Loops, not all(...) over generators: this runs for every lock seen again.
    if not close_in_time(ol.acquired_at, nl.acquired_at):
        return False
    for t in times:
        if not close_in_time(getattr(of, t), getattr(nf, t)):
            return False
    for t in session_times:
        if not close_in_time(getattr(os_, t), getattr(ns, t)):
            return False
    if not same_judgement(old.verdict, new.verdict):
        return False
    back = os_ if os_ is ns else replace(ns, **{t: getattr(os_, t) for t in session_times})
    olds = {t: getattr(of, t) for t in times}
    for t in kept:
        olds[t] = getattr(of, t)
    olds[session] = back
    # Facts is no dataclass to mypy, though every source's facts are one.
    facts = replace(cast(Any, nf), **olds)
    return replace(nl, facts=facts, acquired_at=ol.acquired_at) == ol


class Differ:
    """A feed's last picture, and what a new one changes in it.

    `settle(old, new)` may say a new sighting is the old one seen again (for
    instance times derived from a server's ages, which wobble by the network's
    latency from poll to poll): the old entry is then kept and nothing is sent.
    """

    def __init__(self, settle: Callable[[Entry, Entry], bool] | None = None) -> None:
        self.entries: dict[str, Entry] = {}
        self._settle = settle

    def full(self, entries: Iterable[Entry]) -> tuple[list[Entry], list[str]]:
        fresh: dict[str, Entry] = {}
        upserts = []
        for entry in entries:
            lock_id = entry.lock.id
            old = self.entries.get(lock_id)
            if old is not None and (
                same(old, entry) or (self._settle is not None and self._settle(old, entry))
            ):
                fresh[lock_id] = old
            else:
                fresh[lock_id] = entry
                upserts.append(entry)
        removed = [lock_id for lock_id in self.entries if lock_id not in fresh]
        self.entries = fresh
        return upserts, removed

    def partial(
        self, entries: Iterable[Entry], gone: Iterable[str]
    ) -> tuple[list[Entry], list[str]]:
        """`entries` seen, `gone` gone: what to tell. A lock in both (one look found
        its file, another, later or sooner, did not) is told gone, as the picture
        keeps it: told as both, a board keeps it, and the picture and the board
        would disagree for good (the next look at the file puts it back)."""
        upserts = []
        for entry in entries:
            if not self._same(entry):
                upserts.append(entry)
            self.entries[entry.lock.id] = entry
        removed = [lock_id for lock_id in gone if self.entries.pop(lock_id, None) is not None]
        if removed and upserts:
            dropped = set(removed)
            upserts = [entry for entry in upserts if entry.lock.id not in dropped]
        return upserts, removed

    def changed(self, entries: Iterable[Entry]) -> list[Entry]:
        """Those of `entries` that are new or differ from the picture, which is
        left as it is (a rescan diffs chunk by chunk, then applies the lot)."""
        out = []
        for entry in entries:
            old = self.entries.get(entry.lock.id)
            if old is None or not (
                same(old, entry) or (self._settle is not None and self._settle(old, entry))
            ):
                out.append(entry)
        return out

    def known_ids(self, entries: Iterable[Entry]) -> Iterator[str]:
        """The ids of `entries`, as the picture's own strings where it has the lock:
        fresh copies kept till the end of a large rescan would pin the pages of
        everything else it read and dropped (tens of MB over a large tree)."""
        for entry in entries:
            lock_id = entry.lock.id
            old = self.entries.get(lock_id)
            yield lock_id if old is None else old.lock.id

    def _same(self, entry: Entry) -> bool:
        old = self.entries.get(entry.lock.id)
        return old is not None and same(old, entry)


class Timer(Protocol):
    """What a Coalescer asks of the event loop (tests hand it a fake one)."""

    def time(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], object], /) -> Cancellable: ...


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Coalescer:
    """A feed's `emit`, at most once per `window` seconds: a change set that comes
    after a quiet spell goes out at once; those that come sooner after the last
    are merged (`changes.merge`: nothing is lost, what came and went in between is
    not told) and go out together when the window ends. A burst of changes is then
    one redraw per window, not one per change, so the event loop keeps up with
    keys. A change of the feed's statuses is never merged away: what waits goes
    first. Called on the event loop only (`loop`: the running one by default)."""

    def __init__(self, emit: Emit, window: float, *, loop: Timer | None = None) -> None:
        self._emit = emit
        self.window = window
        self._loop = loop
        self._pending: Merging | None = None
        self._last = -float("inf")  # loop time of the last change set sent
        self._timer: Cancellable | None = None

    def __call__(self, change: ChangeSet) -> None:
        loop = self._timing()
        pending = self._pending
        if pending is not None:
            if pending.statuses and change.statuses and _told(pending) != _told(change):
                self.flush()  # the header's story goes in order
            else:
                pending.add(change)
                return
        if loop.time() - self._last >= self.window:
            self._send(change)
            return
        self._pending = Merging(change)
        self._timer = loop.call_at(self._last + self.window, self.flush)

    @property
    def waiting(self) -> ChangeSet | None:
        """What waits for the window to end."""
        return None if self._pending is None else self._pending.change_set()

    def flush(self) -> None:
        """Send what waits, now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, None
        if pending is not None:
            self._send(pending.change_set())

    def cancel(self) -> None:
        """Send nothing more: what waits is dropped, its timer stopped (the feed
        has stopped; a change set sent after that would undo what the dashboard
        says of a stopped feed)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending = None

    def _timing(self) -> Timer:
        import asyncio  # not at the top: `ls` imports this module and runs no loop

        return self._loop if self._loop is not None else asyncio.get_running_loop()

    def _send(self, change: ChangeSet) -> None:
        self._last = self._timing().time()
        self._emit(change)


def _told(change: ChangeSet | Merging) -> tuple[tuple[str, str, str, str | None], ...]:
    """What a change set's statuses tell (Board._apply_statuses makes events of a
    change in these), not when: every change set has a new `updated_at`."""
    return tuple((s.kind, s.name, s.state, s.reason) for s in change.statuses)
