"""The dashboard's feed of a MySQL server: sources/polled.py's, with locks seen
again whose derived times moved only by the poll's jitter kept as they were."""

from __future__ import annotations

from dataclasses import replace

from lockwatch.model.changes import Entry
from lockwatch.sources.feed import close_in_time, same_judgement
from lockwatch.sources.mysql.facts import MyLock

_SESSION_TIMES = ("state_since", "trx_started")


def same_but_for_wobble(old: Entry, new: Entry) -> bool:
    ol, nl = old.lock, new.lock
    om, nm = ol.facts, nl.facts
    if not isinstance(om, MyLock) or not isinstance(nm, MyLock):
        return False
    ov, nv = old.verdict, new.verdict
    os_, ns = om.session, nm.session
    if not (
        close_in_time(ol.acquired_at, nl.acquired_at)
        and close_in_time(om.wait_start, nm.wait_start)
        and close_in_time(om.known_held_at, nm.known_held_at)
        and all(close_in_time(getattr(os_, t), getattr(ns, t)) for t in _SESSION_TIMES)
        and same_judgement(ov, nv)
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
