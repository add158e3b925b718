"""A PostgreSQL server, live: polled every `interval` seconds, with backoff while
it is down. Records are built and judged in a worker thread; a server that goes
away keeps its last locks on screen, with the header saying how old they are."""

from __future__ import annotations

import asyncio

from lockwatch.model.board import ChangeSet, Entry, judge
from lockwatch.model.process import StaticProcesses
from lockwatch.sources.feed import Differ, Emit
from lockwatch.sources.postgres.source import PgSnapshot, PgSource

DEFAULT_INTERVAL = 2.0


class PgFeed:
    def __init__(self, source: PgSource, *, host: str, interval: float = DEFAULT_INTERVAL) -> None:
        self.source = source
        self.name = f"pg:{source.name}"
        self.host = host
        self.interval = interval
        self._differ = Differ()

    async def run(self, emit: Emit) -> None:
        while True:
            snapshot = await self.source.poll()
            await self._emit(snapshot, emit)
            await asyncio.sleep(self.interval if snapshot is not None else self.source.retry_in)

    async def close(self) -> None:
        await self.source.close()

    async def _emit(self, snapshot: PgSnapshot | None, emit: Emit) -> None:
        status = self.source.status
        now = self.source.clock.now()
        if snapshot is None:
            emit(ChangeSet(self.name, now, (status,)))
            return
        upserts, removed = await asyncio.to_thread(self._judge, snapshot)
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
        # A session's liveness is the server's word, not this host's process table.
        entries = judge(snapshot.locks, StaticProcesses(), snapshot.polled_at, self.host)
        # Diffed here, in the worker thread: the event loop only applies what changed.
        return self._differ.full(entries)
