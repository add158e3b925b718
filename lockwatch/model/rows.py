"""Which locks the table shows, in which order: kept up to date change by change.

Rebuilding the order of 10,000 rows on every change set would cost the event
loop tens of milliseconds; instead each lock's sort key and filter match are
cached and only the locks a change set names are looked at again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from lockwatch.model.board import Applied, Board
from lockwatch.model.lock import Lock
from lockwatch.model.query import EVERYTHING, Query
from lockwatch.model.verdict import State, Verdict

SORTS = ("state", "age", "name", "source")
# Worst first: what an operator at 3 a.m. must see at the top.
_SEVERITY = {State.STALE: 0, State.INVALID: 1, State.WAITING: 2, State.ACTIVE: 3}


def _since(lock: Lock) -> float:
    # Oldest first; a lock with no time says nothing about its age, so it goes last.
    return lock.acquired_at.timestamp() if lock.acquired_at is not None else math.inf


def _by_state(lock: Lock, verdict: Verdict) -> tuple[Any, ...]:
    return (_SEVERITY[verdict.state], _since(lock), lock.name.lower(), lock.id)


def _by_age(lock: Lock, verdict: Verdict) -> tuple[Any, ...]:
    return (_since(lock), lock.name.lower(), lock.id)


def _by_name(lock: Lock, verdict: Verdict) -> tuple[Any, ...]:
    return (lock.name.lower(), lock.id)


def _by_source(lock: Lock, verdict: Verdict) -> tuple[Any, ...]:
    return (lock.source, lock.format, lock.name.lower(), lock.id)


KEYS: dict[str, Callable[[Lock, Verdict], tuple[Any, ...]]] = {
    "state": _by_state,
    "age": _by_age,
    "name": _by_name,
    "source": _by_source,
}


class Rows:
    """The visible lock ids, filtered by a query and sorted by one of SORTS."""

    def __init__(self, board: Board, sort: str = "state", query: Query = EVERYTHING) -> None:
        if sort not in KEYS:
            raise ValueError(f"unknown sort {sort!r}; one of {', '.join(SORTS)}")
        self.board = board
        self.sort = sort
        self.query = query
        self.ids: list[str] = []
        self._keys: dict[str, tuple[Any, ...]] = {}
        self._position: dict[str, int] | None = None
        self.rebuild()

    def __len__(self) -> int:
        return len(self.ids)

    def rebuild(self) -> None:
        board = self.board
        key = KEYS[self.sort]
        query = self.query
        keys: dict[str, tuple[Any, ...]] = {}
        for lock_id, entry in board.entries.items():
            verdict = board.verdict(lock_id)
            if query.empty or query.matches(entry.lock, verdict):
                keys[lock_id] = key(entry.lock, verdict)
        self._keys = keys
        self.ids = sorted(keys, key=keys.__getitem__)
        self._position = None

    def set_sort(self, sort: str) -> None:
        if sort not in KEYS:
            raise ValueError(f"unknown sort {sort!r}; one of {', '.join(SORTS)}")
        self.sort = sort
        self.rebuild()

    def next_sort(self) -> str:
        self.set_sort(SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)])
        return self.sort

    def set_query(self, query: Query) -> None:
        self.query = query
        self.rebuild()

    def update(self, applied: Applied) -> bool:
        """Take in a change set's effect; True when the visible order changed."""
        return self.refresh_ids([*applied.added, *applied.changed, *applied.removed])

    def refresh_ids(self, touched: Iterable[str]) -> bool:
        board = self.board
        key = KEYS[self.sort]
        query = self.query
        keys = self._keys
        dropped: set[str] = set()
        added: list[str] = []
        moved = False
        for lock_id in touched:
            entry = board.entries.get(lock_id)
            shown = lock_id in keys
            if entry is None:
                if shown:
                    del keys[lock_id]
                    dropped.add(lock_id)
                continue
            verdict = board.verdict(lock_id)
            if not (query.empty or query.matches(entry.lock, verdict)):
                if shown:
                    del keys[lock_id]
                    dropped.add(lock_id)
                continue
            new_key = key(entry.lock, verdict)
            if not shown:
                added.append(lock_id)
                keys[lock_id] = new_key
            elif keys[lock_id] != new_key:
                keys[lock_id] = new_key
                moved = True
        if not (dropped or added or moved):
            return False
        ids = [lock_id for lock_id in self.ids if lock_id not in dropped] if dropped else self.ids
        ids.extend(added)
        # Timsort: the list is sorted but for the few rows touched, so this is cheap.
        ids.sort(key=keys.__getitem__)
        self.ids = ids
        self._position = None
        return True

    def index_of(self, lock_id: str | None) -> int | None:
        if lock_id is None or lock_id not in self._keys:
            return None
        if self._position is None:
            self._position = {lock_id: index for index, lock_id in enumerate(self.ids)}
        return self._position.get(lock_id)
