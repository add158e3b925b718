"""The `lockwatch.ls/1` JSON contract, built from model records only."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from lockwatch.model.lock import Lock
from lockwatch.model.timestamps import isoformat_z
from lockwatch.model.verdict import Verdict

LS_SCHEMA = "lockwatch.ls/1"


@dataclass(frozen=True, slots=True)
class ScanError:
    """A place that could not be read; shown, never fatal."""

    path: str
    message: str
    code: str = "unreadable"


def lock_json(lock: Lock, verdict: Verdict) -> dict[str, Any]:
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
                "started_at": isoformat_z(process.started_at),
            },
        },
        "acquired_at": isoformat_z(lock.acquired_at),
        "heartbeat_at": isoformat_z(lock.heartbeat_at),
        "ttl_seconds": lock.ttl_seconds,
        "age_seconds": None if verdict.age_seconds is None else round(verdict.age_seconds, 3),
        "next_change_at": isoformat_z(verdict.next_change_at),
        "scope": list(lock.scope),
        "conflicts_with": list(verdict.conflicts_with),
        "sha256": lock.sha256,
    }


def ls_json_bytes(
    generated_at: datetime,
    host: str,
    assessed: Sequence[tuple[Lock, Verdict]],
    errors: Sequence[ScanError],
) -> Iterator[bytes]:
    """The same document as `ls_json`, as compact UTF-8 JSON in pieces.

    Streaming one lock at a time keeps memory flat: with 10,000 locks, building the
    whole document first costs tens of MB and the page faults that come with them.
    """
    head = ls_json(generated_at, host, (), errors)
    tail = orjson.dumps({"errors": head.pop("errors")})
    head.pop("locks")
    yield orjson.dumps(head)[:-1] + b',"locks":['
    for index, (lock, verdict) in enumerate(assessed):
        if index:
            yield b","
        yield orjson.dumps(lock_json(lock, verdict))
    yield b"]," + tail[1:]


def ls_json(
    generated_at: datetime,
    host: str,
    assessed: Sequence[tuple[Lock, Verdict]],
    errors: Sequence[ScanError],
) -> dict[str, Any]:
    return {
        "schema": LS_SCHEMA,
        "generated_at": isoformat_z(generated_at),
        "host": host,
        "locks": [lock_json(lock, verdict) for lock, verdict in assessed],
        "errors": [{"path": e.path, "code": e.code, "message": e.message} for e in errors],
    }
