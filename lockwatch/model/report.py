"""The `lockwatch.ls/1` JSON contract, built from model records only."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from lockwatch.model.lock import Lock
from lockwatch.model.verdict import Verdict

LS_SCHEMA = "lockwatch.ls/1"
_OPTIONS = orjson.OPT_UTC_Z


@dataclass(frozen=True, slots=True)
class ScanError:
    """A place that could not be read; shown, never fatal."""

    path: str
    message: str
    code: str = "unreadable"


def lock_record(lock: Lock, verdict: Verdict) -> dict[str, Any]:
    """One lock of the contract, with times still as datetimes: orjson writes them
    (RFC 3339, `Z`) far faster than isoformat() would."""
    holder = lock.holder
    process = verdict.process
    return {
        "id": lock.id,
        "source": lock.source,
        "format": lock.format,
        "name": lock.name,
        "path": lock.path,
        "state": verdict.state.value,
        "reasons": [{"code": r.code, "message": r.message} for r in verdict.reasons],
        "holder": {
            "pid": holder.pid,
            "host": holder.host,
            "actor": holder.actor,
            "session": holder.session,
            "operation": holder.operation,
            "alive": verdict.alive,
            "process": None
            if process is None
            else {
                "cmdline": list(process.cmdline),
                "user": process.user,
                "started_at": process.started_at,
            },
        },
        "acquired_at": lock.acquired_at,
        "heartbeat_at": lock.heartbeat_at,
        "ttl_seconds": lock.ttl_seconds,
        "age_seconds": None if verdict.age_seconds is None else round(verdict.age_seconds, 3),
        "next_change_at": verdict.next_change_at,
        "scope": list(lock.scope),
        "conflicts_with": list(verdict.conflicts_with),
        "sha256": lock.sha256,
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
) -> Iterator[bytes]:
    """The `lockwatch.ls/1` document as compact UTF-8 JSON in pieces, from JSON
    arrays of lock records (`records_json_array`), joined in the order given, so
    the locks can be rendered anywhere, in any process, and streamed."""
    head = {"schema": LS_SCHEMA, "generated_at": generated_at, "host": host}
    tail = {"errors": [{"path": e.path, "code": e.code, "message": e.message} for e in errors]}
    yield orjson.dumps(head, option=_OPTIONS)[:-1] + b',"locks":['
    first = True
    for array in lock_arrays:
        inner = array[1:-1]
        if inner:
            yield inner if first else b"," + inner
            first = False
    yield b"]," + orjson.dumps(tail)[1:]


def ls_json(
    generated_at: datetime,
    host: str,
    assessed: Sequence[tuple[Lock, Verdict]],
    errors: Sequence[ScanError],
) -> dict[str, Any]:
    """The whole `lockwatch.ls/1` document as plain JSON values."""
    rendered = records_json_array([lock_record(lock, verdict) for lock, verdict in assessed])
    document: dict[str, Any] = orjson.loads(
        b"".join(ls_json_bytes(generated_at, host, [rendered], errors))
    )
    return document
