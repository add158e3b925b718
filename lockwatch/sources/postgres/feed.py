"""A PostgreSQL server, live: polled every `interval` seconds, with backoff while
it is down. Records are built and judged in a worker thread; a server that goes
away keeps its last locks on screen, with the header saying how old they are."""

from __future__ import annotations

import asyncio
from datetime import datetime

from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.process import StaticProcesses
from lockwatch.sources.feed import Differ, Emit, same_but_for_times
from lockwatch.sources.postgres.facts import PgLock
from lockwatch.sources.postgres.records import SeenKey, holds_seen
from lockwatch.sources.postgres.source import PgSnapshot, PgSource

DEFAULT_INTERVAL = 2.0
# A poll's rows are made records, judged and diffed this many at a time: only
# what changed is kept, so a poll of 50,000 locks does not build a second board
# beside the one on screen.
CHUNK_ROWS = 2048


def same_but_for_wobble(old: Entry, new: Entry) -> bool:
    """Whether a Postgres lock seen again differs only by its derived times' wobble."""
    return same_but_for_times(old, new, PgLock, "backend", _BACKEND_TIMES, _LOCK_TIMES)


# A session's times, each derived from an age the server gave.
_BACKEND_TIMES = ("xact_start", "query_start", "state_since", "backend_start", "prepared_at")
# The lock's own, likewise.
_LOCK_TIMES = ("wait_start", "known_held_at", "acquired_after")


class PgFeed:
    def __init__(self, source: PgSource, *, host: str, interval: float = DEFAULT_INTERVAL) -> None:
        self.source = source
        self.name = f"pg:{source.name}"
        self.host = host
        self.interval = interval
        self._differ = Differ(settle=same_but_for_wobble)

    async def run(self, emit: Emit) -> None:
        while True:
            snapshot = await self.source.poll()
            await self._emit(snapshot, emit)
            wait = self.interval if snapshot is not None else self.source.retry_in
            # Let go of the poll before waiting: its rows would otherwise be held
            # until the next poll's are in, twice the memory of a large server.
            snapshot = None
            await asyncio.sleep(max(wait, 0.1))

    async def close(self) -> None:
        await self.source.close()

    async def _emit(self, snapshot: PgSnapshot | None, emit: Emit) -> None:
        status = self.source.status
        now = self.source.clock.now()
        if snapshot is None:
            emit(ChangeSet(self.name, now, (status,)))
            return
        upserts, removed = await asyncio.to_thread(self._judge, snapshot)
        # What the poll gave is made: its rows go (see `run`).
        self.source.let_go()
        emit(
            ChangeSet(
                self.name,
                snapshot.polled_at,
                (status,),
                upserts=tuple(upserts),
                removed=tuple(removed),
            )
        )

    def _judge(self, snapshot: PgSnapshot) -> tuple[list[Entry], list[str]]:
        # Diffed here, in the worker thread: the event loop only applies what changed.
        differ = self._differ
        waits = snapshot.waits()  # of all the poll's rows, as slices of them need
        rows = snapshot.rows
        changed: list[Entry] = []
        found: set[str] = set()
        held: dict[SeenKey, datetime] = {}
        for start in range(0, len(rows), CHUNK_ROWS):
            locks = snapshot.to_locks(rows[start : start + CHUNK_ROWS], waits)
            held.update(holds_seen(locks, snapshot.sessions))
            # A session's liveness is the server's word, not this host's process table.
            entries = judge(locks, StaticProcesses(), snapshot.polled_at, self.host)
            changed.extend(differ.changed(entries))
            found.update(entry.lock.id for entry in entries)
        if snapshot.tables:  # lock tables' rows (locktables.py): a few at most
            entries = judge(snapshot.tables, StaticProcesses(), snapshot.polled_at, self.host)
            changed.extend(differ.changed(entries))
            found.update(entry.lock.id for entry in entries)
        # What this poll saw held, for the next polls' bounds.
        self.source.remember(snapshot, held)
        return differ.partial(changed, [i for i in differ.entries if i not in found])
