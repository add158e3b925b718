"""The kernel's locks, live: /proc/locks read in a worker thread every
`interval` seconds, diffed there, and only what moved handed to the dashboard."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from lockwatch.clock import Clock, SystemClock
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.process import ProcessLookup
from lockwatch.model.status import SourceStatus
from lockwatch.sources.feed import Differ, Emit
from lockwatch.sources.kernel.current import locks_now, status
from lockwatch.sources.processes import PsutilProcesses

DEFAULT_INTERVAL = 1.0


class KernelFeed:
    def __init__(
        self,
        roots: Sequence[str],
        *,
        host: str,
        clock: Clock | None = None,
        interval: float = DEFAULT_INTERVAL,
        processes: Callable[[], ProcessLookup] = PsutilProcesses,
    ) -> None:
        self.name = "kernel"
        self.roots = tuple(roots)
        self.host = host
        self.clock = clock or SystemClock()
        self.interval = interval
        self._processes = processes
        self._differ = Differ()

    async def run(self, emit: Emit) -> None:
        while True:
            emit(await asyncio.to_thread(self.poll))
            await asyncio.sleep(self.interval)

    async def close(self) -> None:
        return None

    def poll(self) -> ChangeSet:
        """One look at /proc/locks, diffed against the last one (in a thread)."""
        now = self.clock.now()
        table, locks = locks_now(self.roots)
        state: SourceStatus = status(table, now)
        entries: list[Entry] = []
        if table.readable:
            entries = judge(locks, self._processes(), now, self.host)
        upserts, removed = self._differ.full(entries)
        return ChangeSet(self.name, now, (state,), upserts=tuple(upserts), removed=tuple(removed))
