"""Which rows stand for a long-idle holder nobody waits on (`stale_idle_rows`): a
stale holder stays on screen once its waiters are gone, by one row of its own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lockwatch.sources.postgres.facts import PgClient
    from lockwatch.sources.postgres.records import SeenKey, Waits

Row = Mapping[str, Any]
_NO_SESSION: Row = {}

_CATALOGS = ("pg_catalog", "pg_toast", "information_schema")
_IN_TRANSACTION = ("idle in transaction", "idle in transaction (aborted)")


def stale_idle_rows(
    rows: Sequence[Row],
    sessions: Mapping[int, Row],
    clients: Mapping[int, PgClient | None],
    idle_after: float,
    seen: Mapping[SeenKey, datetime],
    waits: Waits,
) -> frozenset[int]:
    """The one row (an index into `rows`) kept for each session that sits idle in
    a transaction past `idle_after` with no client process seen alive (stale, as
    its verdict will say) and no row listed otherwise: a stale holder stays on
    screen once nobody waits on it. Its row is the one listed before, if any (its
    id stays), else its first table's, else its transaction id's."""
    listed = {holder for holder, _ in waits.here}
    best: dict[int, tuple[tuple[int, int, int], int]] = {}
    for index, row in enumerate(rows):
        pid = row["pid"]
        if pid is None or not row["granted"] or pid in listed:
            continue
        if row["locktype"] == "advisory":
            listed.add(pid)
            best.pop(pid, None)
            continue
        session = sessions.get(pid, _NO_SESSION)
        client = clients.get(pid)
        if not _idle_past(session, idle_after) or (client is not None and client.alive):
            continue
        rank = _rank(row, session, seen)
        if rank is not None and (pid not in best or rank < best[pid][0]):
            best[pid] = (rank, index)
    return frozenset(index for pid, (_, index) in best.items() if pid not in listed)


def _idle_past(session: Row, idle_after: float) -> bool:
    age = session.get("state_age")
    state = session.get("state")
    return state in _IN_TRANSACTION and age is not None and float(age) > idle_after


def _rank(row: Row, session: Row, seen: Mapping[SeenKey, datetime]) -> tuple[int, int, int] | None:
    """How well a row stands for its session: listed before, then a table (the
    oldest: a table's oid comes before its indexes'), then its transaction id;
    its virtual transaction id never (every transaction has one)."""
    locktype = row["locktype"]
    known = (row["pid"], session.get("backend_started"), row["target"], row["mode"]) in seen
    first = 0 if known else 1
    if locktype == "relation":
        catalog = row["schema_name"] in _CATALOGS or row["schema_name"] is None
        return first, 2 if catalog else 0, int(row["relation"] or 0)
    if locktype == "transactionid":
        return first, 1, 0
    if locktype == "virtualxid":
        return None
    return first, 3, 0
