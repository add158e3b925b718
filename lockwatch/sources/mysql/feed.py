"""The dashboard's feed of a MySQL server: sources/polled.py's, with locks seen
again whose derived times moved only by the poll's jitter kept as they were."""

from __future__ import annotations

from lockwatch.model.changes import Entry
from lockwatch.sources.feed import same_but_for_times
from lockwatch.sources.mysql.facts import MyLock

_SESSION_TIMES = ("state_since", "trx_started")
_LOCK_TIMES = ("wait_start", "known_held_at")
# Its transaction's start: the session's trx_started, checked.
_KEPT = ("acquired_after",)


def same_but_for_wobble(old: Entry, new: Entry) -> bool:
    return same_but_for_times(old, new, MyLock, "session", _SESSION_TIMES, _LOCK_TIMES, _KEPT)
