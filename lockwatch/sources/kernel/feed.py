"""The kernel's locks, live: /proc/locks read in a worker thread every
`interval` seconds, diffed there, and only what moved handed to the dashboard.

A look finds each lock's holders through every process's fds and judges them:
at 20,000 locks, most of a core every second. While /proc/locks reads the same
bytes as last time no lock came or went, so a poll stops there; a full look is
taken all the same every FULL_EVERY polls (a flock's holders can change without
/proc/locks changing: an inheriting child outlives its parent), and on the
first poll after `serve` was woken from its idle pace by someone asking.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from lockwatch.clock import Clock, SystemClock
from lockwatch.model.changes import ChangeSet, Entry, judge, same
from lockwatch.model.lock import amended
from lockwatch.model.process import ProcessLookup
from lockwatch.model.status import SourceStatus
from lockwatch.sources.feed import Differ, Emit
from lockwatch.sources.kernel.current import locks_now, status
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.sources.processes import HostProcesses

DEFAULT_INTERVAL = 1.0
FULL_EVERY = 10
PROC_LOCKS = "/proc/locks"


class KernelFeed:
    def __init__(
        self,
        roots: Sequence[str],
        *,
        host: str,
        clock: Clock | None = None,
        interval: float = DEFAULT_INTERVAL,
        processes: Callable[[], ProcessLookup] = HostProcesses,
        joined: Sequence[str] = (),
    ) -> None:
        self.name = "kernel"
        self.roots = tuple(roots)
        # Where the file feed lists files: a lock one of their rows carries is not
        # listed again (one row per file, joined.py).
        self.joined = tuple(joined)
        self.host = host
        self.clock = clock or SystemClock()
        self.interval = interval
        self._processes = processes
        self._differ = Differ(settle=_renumbered)
        # What the last full look read, its status, and the polls since.
        self._seen: tuple[bytes, SourceStatus] | None = None
        self._cheap = 0
        # Its wait between polls: `serve` slows it while nobody reads (serve/pace.py).
        # It answers True when someone asking woke it: the next look is a full one.
        self.sleep: Callable[[float], Awaitable[bool | None]] | None = None

    async def run(self, emit: Emit) -> None:
        woken: bool | None = True
        while True:
            emit(await asyncio.to_thread(self.poll, full=bool(woken)))
            woken = await (self.sleep or asyncio.sleep)(self.interval)

    async def close(self) -> None:
        return None

    def poll(self, full: bool = True) -> ChangeSet:
        """One look at /proc/locks, diffed against the last one (in a thread).
        `full`: a whole look, even if /proc/locks reads as it did."""
        now = self.clock.now()
        raw = _read(PROC_LOCKS)
        seen = self._seen
        if not full and seen is not None and raw == seen[0] and self._cheap < FULL_EVERY - 1:
            self._cheap += 1
            return ChangeSet(self.name, now, (replace(seen[1], updated_at=now),))
        self._cheap = 0
        table, locks = locks_now(self.roots, joined=self.joined, live=True)
        state: SourceStatus = status(table, now)
        entries: list[Entry] = []
        if table.readable:
            entries = judge(locks, self._processes(), now, self.host)
        # The bytes read before the look: a change between the two shows next time.
        self._seen = None if raw is None or not table.readable else (raw, state)
        upserts, removed = self._differ.full(entries)
        return ChangeSet(self.name, now, (state,), upserts=tuple(upserts), removed=tuple(removed))


def _renumbered(old: Entry, new: Entry) -> bool:
    """Whether `new` is `old` but for its line's number in /proc/locks: a lock
    taken or released anywhere on the host renumbers every line after it, and
    the number only served the parse (a waiter names its lock by it). Sent on,
    20,000 locks were 20,000 changes a poll for one lock elsewhere."""
    was, now = old.lock.facts, new.lock.facts
    if not isinstance(was, KernelFacts) or not isinstance(now, KernelFacts):
        return False
    if was.ordinal == now.ordinal:
        return False
    lock = amended(new.lock, facts=replace(now, ordinal=was.ordinal))
    return same(old, Entry(lock, new.verdict, new.facts))


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None
