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
    """A feed's last picture, and what a new one changes in it."""

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}

    def full(self, entries: Iterable[Entry]) -> tuple[list[Entry], list[str]]:
        fresh = {entry.lock.id: entry for entry in entries}
        upserts = [entry for entry in fresh.values() if not self._same(entry)]
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
