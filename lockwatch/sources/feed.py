"""Feeds: sources that run for as long as the dashboard does and hand it change sets.

A feed collects in worker threads and calls `emit` on the event loop; the
dashboard only applies what it is handed. Each feed diffs its own fresh pictures
against the last one it sent, so the UI thread's work grows with what changed,
not with how many locks exist.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from lockwatch.model.board import ChangeSet, Entry, same

Emit = Callable[[ChangeSet], None]


class Feed(Protocol):
    name: str

    async def run(self, emit: Emit) -> None:
        """Collect until cancelled, emitting a change set for everything seen."""
        ...

    async def close(self) -> None: ...


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
        upserts = []
        for entry in entries:
            if not self._same(entry):
                upserts.append(entry)
            self.entries[entry.lock.id] = entry
        removed = [lock_id for lock_id in gone if self.entries.pop(lock_id, None) is not None]
        return upserts, removed

    def _same(self, entry: Entry) -> bool:
        old = self.entries.get(entry.lock.id)
        return old is not None and same(old, entry)
