"""Which locks the table shows, in which order: kept up to date change by change.

Rebuilding the order of 10,000 rows on every change set would cost the event
loop tens of milliseconds; instead each lock's sort key and filter match are
cached and only the locks a change set names are looked at again. A few rows
that come, go or move are taken out and put back by binary search; only a large
change sorts the whole list again. Every key ends with the lock id, so no two
rows tie and both ways give the same order.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from typing import Any

from lockwatch.model.board import Applied, Board
from lockwatch.model.lock import Lock
from lockwatch.model.query import EVERYTHING, Query
from lockwatch.model.verdict import State, Verdict

SORTS = ("state", "age", "name", "source")
# Up to this many rows placed one by one (binary search + list insert); past it,
# one sort of the whole list is cheaper (on 10,000 rows both cost ~1 ms near 128).
_PLACE_ONE_BY_ONE = 128
# Lookups by binary search after the order changed, before the position of every
# row is worth indexing.
_BISECT_LOOKUPS = 64
# Worst first: what an operator at 3 a.m. must see at the top.
# Worst first: what needs a look (unknown: nobody can tell) before what is fine.
_SEVERITY = {
    State.STALE: 0,
    State.INVALID: 1,
    State.UNKNOWN: 2,
    State.WAITING: 3,
    State.ACTIVE: 4,
    State.FREE: 5,
}


def _since(lock: Lock) -> float:
    # Oldest first; a lock with no time says nothing about its age, so it goes last.
    if lock.acquired_at is not None:
        return lock.acquired_at.timestamp()
    # A lock that keeps no grant time (Postgres): at least as old as it was seen held.
    facts = lock.facts
    known = None if facts is None else facts.since(lock)
    return known.timestamp() if known is not None else math.inf


def _folded(name: str) -> str:
    # Most names are lower case already: the key then shares the name itself
    # rather than holding a copy of it for every row.
    lower = name.lower()
    return name if lower == name else lower


def _by_state(lock: Lock, verdict: Verdict) -> tuple[Any, ...]:
    return (_SEVERITY[verdict.state], _since(lock), _folded(lock.name), lock.id)


def _by_age(lock: Lock, verdict: Verdict) -> tuple[Any, ...]:
    return (_since(lock), _folded(lock.name), lock.id)


def _by_name(lock: Lock, verdict: Verdict) -> tuple[Any, ...]:
    return (_folded(lock.name), lock.id)


def _by_source(lock: Lock, verdict: Verdict) -> tuple[Any, ...]:
    return (lock.source, lock.format, _folded(lock.name), lock.id)


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
        self._lookups = 0  # index_of calls since the order last changed
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
        self._lookups = 0

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
        moved: list[str] = []
        was: dict[str, tuple[Any, ...]] = {}  # keys before this change, of rows that move or go
        for lock_id in touched:
            entry = board.entries.get(lock_id)
            shown = lock_id in keys
            if entry is None:
                if shown:
                    was.setdefault(lock_id, keys.pop(lock_id))
                    dropped.add(lock_id)
                continue
            verdict = board.verdict(lock_id)
            if not (query.empty or query.matches(entry.lock, verdict)):
                if shown:
                    was.setdefault(lock_id, keys.pop(lock_id))
                    dropped.add(lock_id)
                continue
            new_key = key(entry.lock, verdict)
            if not shown:
                added.append(lock_id)
                keys[lock_id] = new_key
            elif keys[lock_id] != new_key:
                was.setdefault(lock_id, keys[lock_id])
                keys[lock_id] = new_key
                moved.append(lock_id)
        if not (dropped or added or moved):
            return False
        if len(was) + len(added) <= _PLACE_ONE_BY_ONE:
            ids = self._placed(was, [*added, *moved])
        else:
            ids = [i for i in self.ids if i not in dropped] if dropped else self.ids
            ids.extend(added)
            # Timsort: the list is sorted but for the few rows touched, so this is cheap.
            ids.sort(key=keys.__getitem__)
        self.ids = ids
        self._position = None
        self._lookups = 0
        return True

    def _placed(self, was: dict[str, tuple[Any, ...]], place: list[str]) -> list[str]:
        """The order with the rows of `was` taken out (found by the keys they had,
        which is how the list is still sorted) and those of `place` put back in."""
        keys = self._keys
        ids = list(self.ids)

        def before(lock_id: str) -> tuple[Any, ...]:
            old = was.get(lock_id)
            return keys[lock_id] if old is None else old

        for old in was.values():
            del ids[bisect_left(ids, old, key=before)]
        for lock_id in place:
            insort(ids, lock_id, key=keys.__getitem__)
        return ids

    def index_of(self, lock_id: str | None) -> int | None:
        if lock_id is None:
            return None
        key = self._keys.get(lock_id)
        if key is None:
            return None
        if self._position is None:
            self._lookups += 1
            if self._lookups <= _BISECT_LOOKUPS:
                # Keys are unique and the list sorted by them: the row is right here.
                return bisect_left(self.ids, key, key=self._keys.__getitem__)
            self._position = {lock_id: index for index, lock_id in enumerate(self.ids)}
        return self._position.get(lock_id)
