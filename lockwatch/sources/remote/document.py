"""Other hosts' locks, as their `lockwatch serve` hands them out (`/v1/locks`:
the lockwatch.ls/1 document): checked record by record, given the host they
belong to, and made into lock records that keep that host's own verdict.

A remote document is untrusted input like any lock file: a record that does not
keep the contract is left out (and counted), never guessed at; its text reaches
a terminal only through the one sanitiser, as everything does.

Pure: bytes in, records out.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from lockwatch.model.lock import Holder, Lock
from lockwatch.model.report import LS_SCHEMA
from lockwatch.model.status import LIVE_STATES
from lockwatch.model.timestamps import parse_timestamp
from lockwatch.model.verdict import State
from lockwatch.sources.remote import ids
from lockwatch.sources.remote.facts import RemoteOrigin

_STATES = frozenset(state.value for state in State)
# The fields a merged listing adds to each record of another host.
HOST_FIELD = "host"
REMOTE_FIELD = "remote"


class DocumentError(ValueError):
    """What came back is not a lockwatch.ls/1 document; the message says why."""


@dataclass(frozen=True)
class RemoteListing:
    """One remote's document, read."""

    host: str
    generated_at: datetime
    # The lock records as that host wrote them, each with `host` and `remote` added.
    records: list[dict[str, Any]] = field(default_factory=list)
    # The same locks as records of the model, each with its RemoteOrigin.
    locks: list[Lock] = field(default_factory=list)
    # That host's own sources that are unwell, in words ("postgres x disconnected").
    unwell: list[str] = field(default_factory=list)
    errors: int = 0  # places that host could not read
    ignored: int = 0  # records that did not keep the contract
    stale: int = 0  # locks that host judged stale

    def summary(self) -> str:
        """What the header says of a connected remote: whose it is, and its trouble."""
        parts = [f"host {self.host}"]
        parts.extend(self.unwell)
        if self.errors:
            parts.append(f"{self.errors} unreadable there")
        if self.ignored:
            parts.append(f"{self.ignored} records not understood")
        return "; ".join(parts)


def read_document(
    data: bytes, remote: str, *, records: bool = True, locks: bool = True
) -> RemoteListing:
    """The document `data` from the serve at `remote`: its records (for a merged
    `ls --json`) and/or its locks (for the table and the dashboard)."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DocumentError(f"not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise DocumentError("not a JSON object")
    if document.get("schema") != LS_SCHEMA:
        raise DocumentError(f"not a {LS_SCHEMA} document (schema {document.get('schema')!r})")
    host = document.get("host")
    generated_at = parse_timestamp(document.get("generated_at"))
    found = document.get("locks")
    if not isinstance(host, str) or not host or generated_at is None:
        raise DocumentError("no host or generated_at")
    if not isinstance(found, list):
        raise DocumentError("no locks array")
    kept: list[Lock] = []
    rendered: list[dict[str, Any]] = []
    ignored = stale = 0
    for record in found:
        lock = _lock(record, remote, host, generated_at)
        if lock is None:
            ignored += 1
            continue
        origin = lock.facts
        assert isinstance(origin, RemoteOrigin)
        stale += origin.state == "stale"
        if locks:
            kept.append(lock)
        if records:
            rendered.append({**record, HOST_FIELD: origin.host, REMOTE_FIELD: remote})
    errors = document.get("errors")
    return RemoteListing(
        host,
        generated_at,
        rendered,
        kept,
        _unwell(document.get("sources")),
        len(errors) if isinstance(errors, list) else 0,
        ignored,
        stale,
    )


def _unwell(sources: Any) -> list[str]:
    if not isinstance(sources, list):
        return []
    unwell = []
    for source in sources:
        if not isinstance(source, dict):
            continue
        status = source.get("status")
        if isinstance(status, str) and status not in LIVE_STATES:
            unwell.append(f"{_text(source.get('kind'))} {_text(source.get('name'))} {status}")
    return unwell


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def _time(value: Any) -> datetime | None:
    return parse_timestamp(value) if isinstance(value, str) else None


def _reasons(value: Any) -> tuple[tuple[str, str], ...] | None:
    if not isinstance(value, list):
        return None
    pairs = []
    for reason in value:
        if not isinstance(reason, dict):
            return None
        code, message = reason.get("code"), reason.get("message")
        if not isinstance(code, str) or not isinstance(message, str):
            return None
        pairs.append((code, message))
    return tuple(pairs)


def _lock(record: Any, remote: str, host: str, seen_at: datetime) -> Lock | None:
    """One record as a Lock of that host, or None when it breaks the contract."""
    if not isinstance(record, dict):
        return None
    lock_id, source = record.get("id"), record.get("source")
    name, kind, state = record.get("name"), record.get("format"), record.get("state")
    if not (isinstance(lock_id, str) and lock_id and isinstance(source, str) and source):
        return None
    if not isinstance(name, str) or not isinstance(kind, str) or state not in _STATES:
        return None
    reasons = _reasons(record.get("reasons", []))
    if reasons is None:
        return None
    holder = record.get("holder")
    if not isinstance(holder, dict):
        holder = {}
    alive = holder.get("alive")
    own_host = record.get(HOST_FIELD)  # a lock passed on by a serve that merges others
    blocking = record.get("blocking")
    origin = RemoteOrigin(
        remote=remote,
        host=own_host if isinstance(own_host, str) and own_host else host,
        id=lock_id,
        state=state,
        reasons=reasons,
        alive=alive if isinstance(alive, bool) else None,
        waiters=len(blocking) if isinstance(blocking, list) else 0,
        age_seconds=_seconds(record.get("age_seconds")),
        seen_at=seen_at,
    )
    return Lock(
        id=ids.remote_id(remote, lock_id),
        source=source,
        format=kind,
        name=name,
        path=_text(record.get("path")),
        holder=Holder(
            pid=_int(holder.get("pid")),
            host=_text(holder.get("host")),
            actor=_text(holder.get("actor")),
            session=_text(holder.get("session")),
            operation=_text(holder.get("operation")),
        ),
        acquired_at=_time(record.get("acquired_at")),
        heartbeat_at=_time(record.get("heartbeat_at")),
        ttl_seconds=_seconds(record.get("ttl_seconds")),
        expires_at=_time(record.get("expires_at")),
        # The scope stays in the record: paths of another host never overlap ours.
        scope=(),
        content=record,
        sha256=_text(record.get("sha256")),
        facts=origin,
    )


def aged_record(lock: Lock, now: datetime) -> dict[str, Any] | None:
    """A remote lock's record for a document written at `now` (a serve that merges
    other hosts): `age_seconds` as of then, `host` and `remote` added."""
    origin, record = lock.facts, lock.content
    if not isinstance(origin, RemoteOrigin) or not isinstance(record, dict):
        return None
    age = origin.age_at(now)
    return {
        **record,
        "age_seconds": None if age is None else round(age, 3),
        HOST_FIELD: origin.host,
        REMOTE_FIELD: origin.remote,
    }


def advice(verb: str, lock: Lock, origin: RemoteOrigin) -> str:
    """Why an action on another host's lock is not taken here, and what to run there."""
    command = f"lockwatch {verb} {shlex.quote(origin.id)} --reason '…'"
    return (
        f"{lock.name} is a lock on host {origin.host}, seen through its lockwatch serve at"
        f" {origin.remote}: other hosts' locks are read-only here. On {origin.host} run:"
        f" {command}"
    )
