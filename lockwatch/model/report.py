"""The `lockwatch.ls/1` JSON contract, built from model records only."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import orjson

from lockwatch.model.blocking import BlockingTree
from lockwatch.model.lock import Lock
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.timestamps import seconds_since
from lockwatch.model.verdict import Verdict
from lockwatch.sources.postgres.facts import PgBackend, PgLock, held_bounds

LS_SCHEMA = "lockwatch.ls/1"
_OPTIONS = orjson.OPT_UTC_Z


def text(value: str) -> str:
    """`value` as JSON can carry it. File names are bytes on Linux: one that is not
    UTF-8 arrives as a str with surrogate escapes, which no JSON encoder accepts;
    its odd bytes are written as `\\xff` instead (as `ls -b` would)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return value


def lock_record(
    lock: Lock,
    verdict: Verdict,
    now: datetime | None = None,
    memo: dict[int, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One lock of the contract, with times still as datetimes: orjson writes them
    (RFC 3339, `Z`) far faster than isoformat() would. `now` dates the ages of
    Postgres sessions (their starts are kept, so ages tick without a new poll).
    `memo` shares one session's fields among its many locks within one render; the
    records share those parts, so treat them as read-only."""
    if lock.pg is not None:
        return _pg_record(lock, lock.pg, verdict, now, {} if memo is None else memo)
    record = _record(lock, verdict)
    if lock.kernel is not None:
        record["kernel"] = lock.kernel.as_json()
        record["blocked_by"] = list(lock.kernel.blocked_by)
        record["blocking"] = list(lock.kernel.blocking)
    elif lock.evidence is not None and lock.evidence.holds:
        # A lock file's kernel lock, as the kernel source would list it.
        record["kernel"] = lock.evidence.holds[0].as_json()
    if lock.store is not None:
        # Keys and tokens are the store's bytes: odd ones as `\xff` escapes.
        record.update(_texts(lock.store.as_json()))
        record["holder"]["session"] = _texts(record["holder"]["session"])
    return record


def _texts(value: Any) -> Any:
    """`value` with every string in it as JSON can carry it (`text`)."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {key: _texts(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_texts(item) for item in value]
    return value


def _record(lock: Lock, verdict: Verdict) -> dict[str, Any]:
    process = verdict.process
    return {
        "id": text(lock.id),
        "source": lock.source,
        "format": lock.format,
        "name": text(lock.name),
        "path": None if lock.path is None else text(lock.path),
        "state": verdict.state.value,
        "reasons": [{"code": r.code, "message": text(r.message)} for r in verdict.reasons],
        "holder": _holder(
            lock,
            verdict,
            None
            if process is None
            else {
                "cmdline": list(process.cmdline),
                "user": process.user,
                "started_at": process.started_at,
            },
        ),
        "acquired_at": lock.acquired_at,
        "heartbeat_at": lock.heartbeat_at,
        "ttl_seconds": lock.ttl_seconds,
        "expires_at": lock.expires_at,
        "age_seconds": None if verdict.age_seconds is None else round(verdict.age_seconds, 3),
        "next_change_at": verdict.next_change_at,
        "scope": [text(path) for path in lock.scope],
        "conflicts_with": [text(other) for other in verdict.conflicts_with],
        "sha256": lock.sha256,
    }


_NONE: list[Any] = []  # shared by records that have nothing there; never mutated


def _holder(lock: Lock, verdict: Verdict, process: dict[str, Any] | None) -> dict[str, Any]:
    """The contract's holder fields every source shares."""
    holder = lock.holder
    return {
        "pid": holder.pid,
        "host": holder.host,
        "actor": holder.actor,
        "session": holder.session,
        "operation": holder.operation,
        "alive": verdict.alive,
        "process": process,
    }


def _pg_record(
    lock: Lock, pg: PgLock, verdict: Verdict, now: datetime | None, memo: dict[int, Any]
) -> dict[str, Any]:
    # A session's fields are the same in each of its (often many) locks: build once.
    session = memo.get(id(pg.backend))
    if session is None:
        session = memo[id(pg.backend)] = (
            _pg_session(lock, pg.backend, verdict, now),
            [pid for pid in pg.blocked_by if pid],
            list(pg.blocking),
        )
    holder, blocked_by, blocking = session
    waited = _age(pg.wait_start, now)
    least, most = _bounds(pg, now, memo)
    # Verdicts are shared among a session's alike locks (evaluate_all): so are their reasons.
    reasons = memo.get(id(verdict))
    if reasons is None:
        reasons = memo[id(verdict)] = [
            {"code": r.code, "message": r.message} for r in verdict.reasons
        ]
    return {
        # Server text is UTF-8 already: no need for text() here.
        "id": lock.id,
        "source": lock.source,
        "format": lock.format,
        "name": lock.name,
        "path": None,
        "state": verdict.state.value,
        "reasons": reasons,
        "holder": holder if waited is None else {**holder, "wait_seconds": waited},
        "acquired_at": lock.acquired_at,
        "heartbeat_at": None,
        "ttl_seconds": None,
        "age_seconds": None if verdict.age_seconds is None else round(verdict.age_seconds, 3),
        "next_change_at": verdict.next_change_at,
        "scope": _NONE,
        "conflicts_with": _NONE,
        "sha256": None,
        "server": pg.server,
        "locktype": pg.locktype,
        "mode": pg.mode,
        "granted": pg.granted,
        "database": pg.database,
        "advisory_key": None if pg.advisory_key is None else pg.advisory_key.as_json(),
        "blocked_by": blocked_by,
        "blocked_by_prepared": list(pg.blocked_by_prepared) if pg.blocked_by_prepared else _NONE,
        "blocking": blocking,
        "wait_seconds": waited,
        # No grant time is kept for a lock: bounds, where `age_seconds` is null.
        "held_at_least_seconds": least,
        "held_at_most_seconds": most,
        "level": pg.level,
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


def _age(start: datetime | None, now: datetime | None) -> float | None:
    age = seconds_since(start, now)
    return None if age is None else round(age, 3)


def _pg_session(
    lock: Lock, backend: PgBackend, verdict: Verdict, now: datetime | None
) -> dict[str, Any]:
    return {
        **_holder(lock, verdict, None),
        "user": backend.user,
        "application": backend.application,
        "client": backend.client,
        "state": backend.state,
        "query": backend.query,
        "backend_type": backend.backend_type,
        "prepared_transaction": backend.prepared_gid,
        "xact_age_seconds": _age(backend.xact_start, now),
        "query_age_seconds": _age(backend.query_start, now),
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


def lock_json_bytes(lock: Lock, verdict: Verdict) -> bytes:
    return orjson.dumps(lock_record(lock, verdict), option=_OPTIONS)


def records_json_array(records: list[dict[str, Any]]) -> bytes:
    """A JSON array of lock records, in one call: orjson's cost per call is several
    times its cost per record, so never serialise 10,000 locks one by one."""
    return orjson.dumps(records, option=_OPTIONS)


def lock_json(lock: Lock, verdict: Verdict) -> dict[str, Any]:
    """One lock of the contract as plain JSON values."""
    parsed: dict[str, Any] = orjson.loads(lock_json_bytes(lock, verdict))
    return parsed


def ls_json_bytes(
    generated_at: datetime,
    host: str,
    lock_arrays: Iterable[bytes],
    errors: Sequence[ScanError],
    sources: Sequence[SourceStatus] = (),
    blocking: Sequence[tuple[str, BlockingTree]] = (),
) -> Iterator[bytes]:
    """The `lockwatch.ls/1` document as compact UTF-8 JSON in pieces, from JSON
    arrays of lock records (`records_json_array`), joined in the order given, so
    the locks can be rendered anywhere, in any process, and streamed."""
    head = {
        "schema": LS_SCHEMA,
        "generated_at": generated_at,
        "host": host,
        "sources": [{**source.as_json(), "name": text(source.name)} for source in sources],
    }
    tail = {
        "errors": [
            {"path": text(e.path), "code": e.code, "message": text(e.message)} for e in errors
        ],
        "blocking": [{"server": server, **tree.as_json()} for server, tree in blocking],
    }
    yield orjson.dumps(head, option=_OPTIONS)[:-1] + b',"locks":['
    first = True
    for array in lock_arrays:
        inner = array[1:-1]
        if inner:
            yield inner if first else b"," + inner
            first = False
    yield b"]," + orjson.dumps(tail, option=_OPTIONS)[1:]


def ls_json(
    generated_at: datetime,
    host: str,
    assessed: Sequence[tuple[Lock, Verdict]],
    errors: Sequence[ScanError],
    sources: Sequence[SourceStatus] = (),
    blocking: Sequence[tuple[str, BlockingTree]] = (),
) -> dict[str, Any]:
    """The whole `lockwatch.ls/1` document as plain JSON values."""
    rendered = records_json_array(
        [lock_record(lock, verdict, generated_at) for lock, verdict in assessed]
    )
    pieces = ls_json_bytes(generated_at, host, [rendered], errors, sources, blocking)
    document: dict[str, Any] = orjson.loads(b"".join(pieces))
    return document
