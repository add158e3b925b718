"""A PostgreSQL lock as the `lockwatch.ls/1` contract has it (`PgLock.record`),
and the bounds of how long a granted lock is held, which PostgreSQL never says.

The record is built whole here, not from the generic one: a session's fields
are the same in each of its (often many) locks, so they are built once per
render and shared, and server text is UTF-8 already.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.report import NOTHING, holder_fields, rounded_age
from lockwatch.sources.postgres.held import held_bounds

if TYPE_CHECKING:
    from lockwatch.model.lock import Lock
    from lockwatch.model.verdict import Verdict
    from lockwatch.sources.postgres.facts import PgBackend, PgLock


def pg_record(
    lock: Lock, pg: PgLock, verdict: Verdict, now: datetime | None, memo: dict[Any, Any]
) -> dict[str, Any]:
    """`lock`'s record. `memo` shares a session's parts among its locks' records."""
    # A session's fields are the same in each of its (often many) locks: build once.
    session = memo.get(id(pg.backend))
    if session is None:
        session = memo[id(pg.backend)] = (
            _session(lock, pg.backend, verdict, now),
            [pid for pid in pg.blocked_by if pid],
            list(pg.blocking),
        )
    holder, blocked_by, blocking = session
    waited = None if pg.wait_start is None else rounded_age(pg.wait_start, now)
    least, most = _bounds(pg, now, memo) if pg.granted and now is not None else (None, None)
    # Verdicts are shared among a session's alike locks (evaluate_all): so are their parts.
    judged = memo.get(id(verdict))
    if judged is None:
        judged = memo[id(verdict)] = (
            verdict.state.value,
            [{"code": r.code, "message": r.message} for r in verdict.reasons],
            None if verdict.age_seconds is None else round(verdict.age_seconds, 3),
        )
    state, reasons, age = judged
    return {
        # Server text is UTF-8 already: no need for text() here.
        "id": lock.id,
        "source": lock.source,
        "format": lock.format,
        "name": lock.name,
        "path": None,
        "state": state,
        "reasons": reasons,
        "holder": holder if waited is None else {**holder, "wait_seconds": waited},
        "acquired_at": lock.acquired_at,
        "heartbeat_at": None,
        "ttl_seconds": None,
        "age_seconds": age,
        "next_change_at": verdict.next_change_at,
        "scope": NOTHING,
        "conflicts_with": NOTHING,
        "sha256": None,
        "server": pg.server,
        "locktype": pg.locktype,
        "mode": pg.mode,
        "granted": pg.granted,
        "database": pg.database,
        "advisory_key": None if pg.advisory_key is None else pg.advisory_key.as_json(),
        "blocked_by": blocked_by,
        "blocked_by_prepared": list(pg.blocked_by_prepared) if pg.blocked_by_prepared else NOTHING,
        "blocking": blocking,
        "wait_seconds": waited,
        # No grant time is kept for a lock: bounds, where `age_seconds` is null.
        "held_at_least_seconds": least,
        "held_at_most_seconds": most,
        "level": pg.level,
        # A lock queue (an ALTER TABLE waiting behind a holder, SELECTs behind it):
        # how many queue behind this waiting request, and whom a waiter queues behind.
        "queued_behind": pg.queued_behind,
        "queue_head": pg.queue_heads[0] if pg.queue_heads else None,
    }


def _bounds(
    pg: PgLock, now: datetime | None, memo: dict[Any, Any]
) -> tuple[float | None, float | None]:
    if now is None or not pg.granted:
        return None, None
    # A session's many locks share their bound times (the same objects): once each.
    key = ("bounds", id(pg.known_held_at), id(pg.acquired_after))
    found: tuple[float | None, float | None] | None = memo.get(key)
    if found is None:
        least, most = held_bounds(pg, now)
        found = memo[key] = (
            None if least is None else round(least, 3),
            None if most is None else round(most, 3),
        )
    return found


def _session(
    lock: Lock, backend: PgBackend, verdict: Verdict, now: datetime | None
) -> dict[str, Any]:
    return {
        **holder_fields(lock, verdict, None),
        "user": backend.user,
        "application": backend.application,
        "client": backend.client,
        "state": backend.state,
        "query": backend.query,
        "backend_type": backend.backend_type,
        "autovacuum": backend.autovacuum,
        "prepared_transaction": backend.prepared_gid,
        "xact_age_seconds": rounded_age(backend.xact_start, now),
        "query_age_seconds": rounded_age(backend.query_start, now),
        "wait_event_type": backend.wait_event_type,
        "wait_event": backend.wait_event,
        "wait_seconds": None,
        "client_port": backend.client_port,
        "client_process": None
        if backend.client_process is None
        else {
            "pid": backend.client_process.pid,
            "cmdline": list(backend.client_process.cmdline),
            "alive": backend.client_process.alive,
        },
    }
