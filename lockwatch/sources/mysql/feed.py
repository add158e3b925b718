"""The dashboard's feed of a MySQL server: sources/polled.py's, with locks seen
again whose derived times moved only by the poll's jitter kept as they were."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from lockwatch.model.changes import Entry
from lockwatch.sources.mysql.facts import MyLock

# Times are the poll's instant less the server's ages (TIME_MS, LOCK_TIME_MS):
# they move by the round trip's jitter from one poll to the next.
WOBBLE = timedelta(milliseconds=500)
_SESSION_TIMES = ("state_since", "trx_started")


def _close(a: datetime | None, b: datetime | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= WOBBLE


def same_but_for_wobble(old: Entry, new: Entry) -> bool:
    ol, nl = old.lock, new.lock
    om, nm = ol.facts, nl.facts
    if not isinstance(om, MyLock) or not isinstance(nm, MyLock):
        return False
    ov, nv = old.verdict, new.verdict
    os_, ns = om.session, nm.session
    if not (
        _close(ol.acquired_at, nl.acquired_at)
        and _close(om.wait_start, nm.wait_start)
        and _close(om.known_held_at, nm.known_held_at)
        and all(_close(getattr(os_, t), getattr(ns, t)) for t in _SESSION_TIMES)
        and _close(ov.next_change_at, nv.next_change_at)
        and ov.state is nv.state
        and ov.codes == nv.codes
        and ov.alive == nv.alive
    ):
        return False
    session = replace(ns, **{t: getattr(os_, t) for t in _SESSION_TIMES})
    facts = replace(
        nm,
        session=session,
        wait_start=om.wait_start,
        known_held_at=om.known_held_at,
        acquired_after=om.acquired_after,
    )
    return replace(nl, facts=facts, acquired_at=ol.acquired_at) == ol
