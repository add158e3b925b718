"""A MySQL lock as the `lockwatch.ls/1` contract has it (`MyLock.record`)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.report import NOTHING, holder_fields, rounded_age
from lockwatch.sources.mysql.display import held_bounds

if TYPE_CHECKING:
    from lockwatch.model.lock import Lock
    from lockwatch.model.verdict import Verdict
    from lockwatch.sources.mysql.facts import MyLock, MySession


def my_record(
    lock: Lock, my: MyLock, verdict: Verdict, now: datetime | None, memo: dict[Any, Any]
) -> dict[str, Any]:
    session = memo.get(id(my.session))
    if session is None:
        session = memo[id(my.session)] = _session(my.session, now)
    waited = None if my.granted else rounded_age(my.wait_start, now)
    least, most = (None, None) if now is None or not my.granted else held_bounds(my, now)
    if lock.acquired_at is not None:
        least = most = None  # the server said when: `age_seconds` is exact
    return {
        "id": lock.id,
        "source": lock.source,
        "format": lock.format,
        "name": lock.name,
        "path": None,
        "state": verdict.state.value,
        "reasons": [{"code": r.code, "message": r.message} for r in verdict.reasons],
        "holder": {**holder_fields(lock, verdict, None), **session, "wait_seconds": waited},
        "acquired_at": lock.acquired_at,
        "heartbeat_at": None,
        "ttl_seconds": None,
        "age_seconds": None if verdict.age_seconds is None else round(verdict.age_seconds, 3),
        "next_change_at": verdict.next_change_at,
        "scope": NOTHING,
        "conflicts_with": NOTHING,
        "sha256": None,
        "server": my.server,
        "thread_id": my.session.thread_id,
        "user": my.session.user,
        "client_host": my.session.host,
        "database": my.session.database,
        "lock_kind": my.kind,
        "mode": my.mode,
        "granted": my.granted,
        "target": my.target,
        "table": my.table,
        "index": my.index,
        "lock_data": my.lock_data,
        "found_by": my.found_by,
        "suspected": my.suspected,
        "blocked_by": list(my.blocked_by),
        "blocking": list(my.blocking),
        "queued_behind": my.queued_behind,
        "queue_head": my.queue_head,
        "wait_seconds": waited,
        "held_at_least_seconds": None if least is None else round(least, 3),
        "held_at_most_seconds": None if most is None else round(most, 3),
    }


def _session(session: MySession, now: datetime | None) -> dict[str, Any]:
    client = session.client_process
    return {
        "thread_id": session.thread_id,
        "user": session.user,
        "client": session.host,
        "database": session.database,
        "command": session.command,
        "state": session.state_text,
        "query": session.query,
        "query_id": session.query_id,
        "state_age_seconds": rounded_age(session.state_since, now),
        "xact_age_seconds": rounded_age(session.trx_started, now),
        "client_process": None
        if client is None
        else {"pid": client.pid, "cmdline": list(client.cmdline), "alive": client.alive},
    }
