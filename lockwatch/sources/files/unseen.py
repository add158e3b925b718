"""Locks that could not be read again: kept as last seen, and judged unknown.

A lock file whose directory was made unreadable (or that cannot be read itself)
has not gone: only lockwatch's view of it has. Told gone, it would show an
operator a release that nobody made, and hide a lock that may still be held or
left behind. What was last read stays on the board, `unknown` with the reason
`unreadable`, until a look at the place says what is there now.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from lockwatch.clock import FrozenClock
from lockwatch.model.changes import Entry
from lockwatch.model.lock import Reason
from lockwatch.model.process import ProcessLookup
from lockwatch.model.status import ScanError
from lockwatch.model.verdict import evaluate
from lockwatch.sources.files import ids
from lockwatch.sources.files.facts import facts_of, refiled

# The scanner's codes for a place that is there but cannot be read (scanner._error):
# not `not_found`, which is a lock gone, nor `moved`, a root lockwatch no longer follows.
CANNOT_TELL = frozenset({"permission_denied", "unreadable"})


def unreadable(
    known: Mapping[str, Entry],
    candidates: Iterable[str],
    errors: Sequence[ScanError],
    processes: ProcessLookup,
    now: datetime,
    host: str,
) -> dict[str, Entry]:
    """Of the `known` locks among `candidates` (ids a look did not find, or found
    unreadable), those behind an error that cannot tell: entries to keep, by id.
    A lock already kept so is kept as it is (nothing new to tell)."""
    blocked = {error.path: error for error in errors if error.code in CANNOT_TELL}
    if not blocked:
        return {}
    kept: dict[str, Entry] = {}
    clock = FrozenClock(now)
    for lock_id in (*candidates, *map(ids.file_id, blocked)):
        old = known.get(lock_id)
        if old is None or lock_id in kept or old.lock.path is None:
            continue
        error = _behind(old.lock.path, blocked)
        if error is None:
            continue
        if facts_of(old.lock).unseen is not None:
            kept[lock_id] = old
            continue
        lock = refiled(old.lock, {"unseen": _reason(old.lock.path, error)})
        kept[lock_id] = Entry(lock, evaluate(lock, processes, clock, host), old.facts)
    return kept


def _behind(path: str, blocked: Mapping[str, ScanError]) -> ScanError | None:
    """The error at `path` or at a directory above it."""
    while True:
        error = blocked.get(path)
        if error is not None:
            return error
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _reason(path: str, error: ScanError) -> Reason:
    where = "it" if error.path == path else error.path
    return Reason(
        "unreadable",
        f"cannot read {where} now ({error.message}): shown as last read;"
        " whether it is still held, nobody here can tell",
    )
