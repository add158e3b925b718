"""The recorder: the board's changes into the history store, in a writer
thread of its own, batched, so a write never blocks the UI or a scrape.

The poll side (`observe`, called right after each `Board.apply`/`tick`) only
hands over the entries that changed, by reference (entries are frozen): a few
microseconds per changed lock. The writer keeps a mirror of the board, turns a
lock's change of state, reason codes or holder into the end of one span and the
start of the next, a wait edge's appearance and disappearance into a wait span,
a source's outage into an outage, and commits everything that piled up since its
last flush in one transaction. A poll in which nothing changed writes nothing
(but a heartbeat every BEAT_SECONDS, so readers can tell a live recorder from a
killed one). SIGKILL loses at most what was not yet flushed: the last poll.

A write that fails (disk full, the file's cap, a database gone) stops the
recording: `failed` says why in one line, and watching goes on.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from lockwatch.clock import Clock, SystemClock
from lockwatch.history import spans
from lockwatch.history.api import Batch, HistoryError, HistoryStore
from lockwatch.history.store import BEAT_SECONDS
from lockwatch.history.tally import WaitTally
from lockwatch.model.board import Applied, Board
from lockwatch.model.changes import Entry
from lockwatch.model.history import ActionMark, LockSpan, Outage, WaitSpan
from lockwatch.model.status import LIVE_STATES, SourceStatus

FLUSH_SECONDS = 0.5
PRUNE_SECONDS = 60.0
# Observations waiting for the writer past this many: the writer cannot keep
# up (a dead disk that hangs): recording stops rather than eat the memory.
MAX_PENDING = 10_000


class Closing(Protocol):
    def close(self) -> None: ...


# (when, changed entries by id (None: gone), statuses if they changed)
Observation = tuple[datetime, list[tuple[str, Entry | None]], list[SourceStatus] | None]


class Recorder:
    def __init__(
        self,
        opener: Callable[[], HistoryStore],
        *,
        poll_seconds: float,
        retention_days: float = 14.0,
        clock: Clock | None = None,
        flush_seconds: float = FLUSH_SECONDS,
        target: str | None = None,
    ) -> None:
        """`opener` opens the store in the writer thread (each thread its own
        connection). `poll_seconds`: how often the feeds poll."""
        self.poll_seconds = poll_seconds
        # What the store was opened from (a path, a DSN, None: the default file).
        self.target = target
        # Wait counters for serve's metrics: kept up while the store fails too.
        self.tally = WaitTally(poll_seconds)
        self.retention = timedelta(days=retention_days)
        self.clock = clock or SystemClock()
        self.flush_seconds = flush_seconds
        self.failed: str | None = None
        self.writes = 0  # batches committed: tests wait on it
        # What records beside it into the same store (a server log's follower,
        # history/logfollow.py): closed with it.
        self.companions: list[Closing] = []
        self._opener = opener
        self._pending: deque[Observation | ActionMark] = deque()
        self._wake = threading.Condition()
        self._closing = False
        self._seen_all = False
        self._mirror: dict[str, Entry] = {}
        self._open: dict[str, spans.SpanKey] = {}
        self._edges: dict[spans.EdgeKey, spans.Edge] = {}
        self._down: dict[tuple[str, str], SourceStatus] = {}
        self._store: HistoryStore | None = None
        self._thread = threading.Thread(target=self._run, name="lockwatch-history", daemon=True)
        self._thread.start()

    # --- the poll side ----------------------------------------------------------

    def observe(self, board: Board, applied: Applied | None, at: datetime) -> None:
        """Right after `board` changed by `applied` (None: anything may have; the
        first call hands over every entry anyway)."""
        if self.failed is not None:
            return
        if not self._seen_all or applied is None:
            ids: list[str] = list(board.entries)
            self._seen_all = True
        else:
            if applied.empty:
                return
            ids = [*applied.added, *applied.changed, *applied.removed]
        changed: list[tuple[str, Entry | None]] = []
        for lock_id in ids:
            entry = board.entries.get(lock_id)
            if entry is not None:
                shown = board.verdict(lock_id)
                if shown is not entry.verdict:
                    entry = Entry(entry.lock, shown, entry.facts)
            changed.append((lock_id, entry))
        statuses = board.all_statuses() if applied is None or applied.statuses_changed else None
        self._put((at, changed, statuses))

    def action(self, mark: ActionMark) -> None:
        """An action taken (with its audit record's seq), recorded with the next flush."""
        if self.failed is None:
            self._put(mark)

    def _put(self, item: Observation | ActionMark) -> None:
        with self._wake:
            if len(self._pending) >= MAX_PENDING:
                self.failed = "history: the writer fell behind; recording stopped"
                self._pending.clear()
                return
            self._pending.append(item)
            self._wake.notify()

    def close(self, timeout: float = 10.0) -> None:
        """Flush what is pending and end the session."""
        for companion in self.companions:
            companion.close()
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join(timeout)

    def wait_written(self, writes: int, timeout: float = 10.0) -> bool:
        """Wait until `writes` batches are committed (tests: an event, not a sleep)."""
        with self._wake:
            self._wake.wait_for(lambda: self.writes >= writes or self.failed is not None, timeout)
        return self.writes >= writes

    # --- the writer thread -------------------------------------------------------

    def _run(self) -> None:
        try:
            self._store = self._opener()
        except HistoryError as exc:
            self._fail(str(exc))
            return
        last_beat = last_prune = time.monotonic()
        try:
            while True:
                with self._wake:
                    if not self._pending and not self._closing:
                        self._wake.wait(self.flush_seconds)
                    items = list(self._pending)
                    self._pending.clear()
                    closing = self._closing
                if items:
                    self._flush(items)
                now = time.monotonic()
                if now - last_beat >= BEAT_SECONDS and self.failed is None:
                    self._store.beat(self.clock.now())
                    last_beat = now
                if now - last_prune >= PRUNE_SECONDS and self.failed is None:
                    self._store.prune(self.clock.now() - self.retention)
                    last_prune = now
                if closing or self.failed is not None:
                    break
        except HistoryError as exc:
            self._fail(str(exc))
        finally:
            self._end_session()

    def _end_session(self) -> None:
        # The recorder watched until now, not only until its last change: a span that
        # opened at the last poll must not end where it began (an empty interval).
        store = self._store
        assert store is not None  # opened before the loop this ends
        if self.failed is None:
            try:
                store.beat(self.clock.now())
            except HistoryError as exc:
                self._fail(str(exc))
        store.close()

    def _fail(self, why: str) -> None:
        with self._wake:
            self.failed = f"history: recording stopped: {why}"
            self._pending.clear()
            self._wake.notify_all()

    def _flush(self, items: list[Observation | ActionMark]) -> None:
        assert self._store is not None
        batch = Batch()
        last: datetime | None = None
        for item in items:
            if isinstance(item, ActionMark):
                batch.actions.append(item)
                continue
            at, changed, statuses = item
            last = at
            waits_touched = self._apply(batch, at, changed)
            if waits_touched:
                self._diff_waits(batch, at)
            if statuses is not None:
                self._statuses(batch, at, statuses)
        if batch:
            self._store.record(batch, poll_seconds=self.poll_seconds)
        if last is not None:
            self._store.beat(last)
        with self._wake:
            self.writes += 1
            self._wake.notify_all()

    def _apply(self, batch: Batch, at: datetime, changed: list[tuple[str, Entry | None]]) -> bool:
        waits_touched = False
        host = self._store.host if self._store is not None else ""
        for lock_id, entry in changed:
            before = self._mirror.get(lock_id)
            waits_touched |= _in_graph(before) or _in_graph(entry)
            if entry is None:
                self._mirror.pop(lock_id, None)
                if self._open.pop(lock_id, None) is not None:
                    batch.closed.append((lock_id, at))
                continue
            self._mirror[lock_id] = entry
            key = spans.span_key(entry)
            was = self._open.get(lock_id)
            if was == key:
                continue
            if was is not None:
                batch.closed.append((lock_id, at))
            self._open[lock_id] = key
            lock = entry.lock
            span = LockSpan(
                host,
                lock_id,
                lock.source,
                spans.clean(lock.name) or "",
                spans.place(lock),
                key[0],
                key[1],
                key[2],
                at,
            )
            batch.opened.append((span, entry))
        return waits_touched

    def _diff_waits(self, batch: Batch, at: datetime) -> None:
        host = self._store.host if self._store is not None else ""
        entries = list(self._mirror.values())
        now_edges = spans.edges(entries)
        holding = spans.holding_nodes(entries)
        for key, edge in self._edges.items():
            if key not in now_edges:
                batch.waits_closed.append(
                    (key, at, spans.outcome(edge, now_edges, self._mirror, holding))
                )
        for key, edge in now_edges.items():
            if key not in self._edges:
                batch.waits_opened.append(
                    WaitSpan(
                        host,
                        edge.source,
                        edge.server,
                        edge.resource,
                        edge.mode,
                        edge.waiter,
                        edge.blocker,
                        at,
                        cycle=edge.cycle,
                    )
                )
            elif edge.cycle and not self._edges[key].cycle:
                now_edges[key] = self._edges[key].__class__(
                    edge.server,
                    edge.source,
                    self._edges[key].waiter,
                    self._edges[key].blocker,
                    edge.resource,
                    edge.mode,
                    True,
                )
                continue
            else:
                now_edges[key] = self._edges[key]  # as first seen
        self._edges = now_edges
        self.tally.update(now_edges, at)

    def _statuses(self, batch: Batch, at: datetime, statuses: list[SourceStatus]) -> None:
        host = self._store.host if self._store is not None else ""
        now_down = {
            (s.kind, s.name): s
            for s in statuses
            if s.state not in LIVE_STATES and s.state != "connecting"
        }
        for key in self._down:
            if key not in now_down:
                batch.outages_closed.append((key, at))
        for key, status in now_down.items():
            if key not in self._down:
                detail = status.state + (f": {status.reason}" if status.reason else "")
                batch.outages_opened.append(
                    Outage(
                        host,
                        status.kind,
                        spans.clean(status.name) or "",
                        at,
                        None,
                        spans.clean(detail) or "",
                    )
                )
        self._down = now_down


def _in_graph(entry: Entry | None) -> bool:
    from lockwatch.model import blocking

    return entry is not None and blocking.group(entry.lock) is not None
