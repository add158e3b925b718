"""Other hosts' locks, as their `lockwatch serve` hands them out (`/v1/locks`:
the lockwatch.ls/1 document): checked record by record, given the host they
belong to, and made into lock records that keep that host's own verdict.

A remote document is untrusted input like any lock file: a record that does not
keep the contract is left out (and counted), never guessed at; its text reaches
a terminal only through the one sanitiser, as everything does.

Pure: bytes in, records out.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from lockwatch.model.hosts import is_local_address
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.report import LS_SCHEMA
from lockwatch.model.status import LIVE_STATES
from lockwatch.model.timestamps import parse_timestamp
from lockwatch.model.verdict import same_host
from lockwatch.sources.remote import ids
from lockwatch.sources.remote.facts import HOST_FIELD, RemoteOrigin
from lockwatch.sources.remote.records import RecordError, check_record, cut, shown

# A lock's text fields (name, path, holder's) as the table and the detail pane
# show them: longer is cut, its length said; the record keeps it whole.
SHOWN_IN_MODEL = 1024

CLAIM_CODE = "claims_this_host"
# A host name is at most 253 characters (RFC 1035): the rest is shown cut.
MAX_HOST = 253
# Locks read of one remote's document: past it the document is refused whole
# (the bytes and values it may have are capped as it is read: client.py).
MAX_RECORDS = 100_000
# Dropped records named one by one in the warning, at most.
NAMED_DROPS = 3


class DocumentError(ValueError):
    """What came back is not a lockwatch.ls/1 document; the message says why."""


@dataclass(frozen=True)
class RemoteListing:
    """One remote's document, read."""

    host: str  # as that serve names itself (`cut` it to show it)
    generated_at: datetime
    # The lock records as that host wrote them, each with `host` and `remote` added.
    records: list[dict[str, Any]] = field(default_factory=list)
    # The same locks as records of the model, each with its RemoteOrigin.
    locks: list[Lock] = field(default_factory=list)
    # That host's own sources that are unwell, in words ("postgres x disconnected").
    unwell: list[str] = field(default_factory=list)
    errors: int = 0  # places that host could not read
    ignored: int = 0  # records that did not keep the contract, dropped
    stale: int = 0  # locks that host judged stale
    # Why records were dropped, the first few, each in one short line.
    dropped: list[str] = field(default_factory=list)
    # It said it was this host: shown under its address instead (see `claimed`).
    claims_this_host: bool = False

    def summary(self) -> str:
        """What the header says of a connected remote: whose it is, and its trouble."""
        parts = [f"host {cut(self.host)}"]
        if self.claims_this_host:
            parts[0] += " (this host's name: not taken from a remote)"
        parts.extend(self.unwell)
        if self.errors:
            parts.append(f"{self.errors} unreadable there")
        if self.ignored:
            parts.append(f"{self.ignored} records not understood, left out")
        return "; ".join(parts)

    def warning(self) -> str | None:
        """One line for stderr when records were dropped: how many, and why."""
        if not self.ignored:
            return None
        why = "; ".join(self.dropped)
        more = self.ignored - len(self.dropped)
        if more > 0:
            why += f"; and {more:,} more"
        return f"{self.ignored:,} records not understood, left out ({why})"


def read_document(
    data: bytes, remote: str, *, local_host: str, records: bool = True, locks: bool = True
) -> RemoteListing:
    """The document `data` from the serve at `remote`, read on `local_host`: its
    records (for a merged `ls --json`) and/or its locks (for the table and the
    dashboard)."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DocumentError(f"not JSON ({cut(str(exc))})") from None
    if not isinstance(document, dict):
        raise DocumentError("not a JSON object")
    if document.get("schema") != LS_SCHEMA:
        raise DocumentError(f"not a {LS_SCHEMA} document (schema {shown(document.get('schema'))})")
    host = document.get("host")
    generated = document.get("generated_at")
    generated_at = parse_timestamp(generated) if isinstance(generated, str) else None
    found = document.get("locks")
    if not isinstance(host, str) or not host or generated_at is None:
        raise DocumentError("no host or generated_at")
    if not isinstance(found, list):
        raise DocumentError("no locks array")
    if len(found) > MAX_RECORDS:
        raise DocumentError(f"{len(found):,} locks, over the {MAX_RECORDS:,} read of a remote")
    kept: list[Lock] = []
    rendered: list[dict[str, Any]] = []
    dropped: list[str] = []
    ignored = stale = 0
    claims = False
    for index, record in enumerate(found):
        try:
            checked = check_record(record)
        except RecordError as exc:
            ignored += 1
            if len(dropped) < NAMED_DROPS:
                dropped.append(f"lock {index}: {exc}")
            continue
        lock = _lock(checked, remote, host, generated_at, local_host)
        origin = lock.facts
        assert isinstance(origin, RemoteOrigin)
        claims = claims or origin.claimed_host is not None
        stale += origin.state == "stale"
        if locks:
            kept.append(lock)
        if records:
            rendered.append(origin.passed_on(checked))
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
        dropped,
        claims,
    )


def _bounded_host(host: str) -> str:
    """A host name as a lock keeps it: one longer than a host name can be is cut."""
    return host if len(host) <= MAX_HOST else cut(host)


def address(remote: str) -> str:
    """The serve's own name, as the operator gave it: its URL without the scheme
    (`db7:9464`, `proxy/lockwatch/db1`)."""
    return remote.partition("://")[2] or remote


def _unwell(sources: Any) -> list[str]:
    if not isinstance(sources, list):
        return []
    unwell = []
    for source in sources:
        if not isinstance(source, dict):
            continue
        status = source.get("status")
        if isinstance(status, str) and status not in LIVE_STATES:
            words = (_text(source.get("kind")), _text(source.get("name")), status)
            unwell.append(" ".join(cut(word or "?", 80) for word in words))
        if len(unwell) >= NAMED_DROPS * 3:
            unwell.append("…")
            break
    return unwell


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _shown_text(value: Any) -> str | None:
    """Text of a checked record for a lock's fields: long text cut, with its length
    (the record itself, `Lock.content`, keeps it whole). Not escaped: every view
    escapes a lock's text itself."""
    if not isinstance(value, str):
        return None
    if len(value) <= SHOWN_IN_MODEL:
        return value
    return f"{value[:SHOWN_IN_MODEL]}…({len(value):,} chars)"


def _lock(
    record: dict[str, Any], remote: str, host: str, seen_at: datetime, local_host: str
) -> Lock:
    """A checked record as a Lock of that host: one that says it is this host is
    shown under the serve's address, with what it claimed."""
    lock_id: str = record["id"]
    holder: dict[str, Any] = record["holder"]
    own_host = record.get(HOST_FIELD)  # a lock passed on by a serve that merges others
    said = own_host if isinstance(own_host, str) and own_host else host
    reasons = tuple((reason["code"], reason["message"]) for reason in record.get("reasons", []))
    claimed: str | None = None
    there = said
    if same_host(said, local_host):
        claimed, there = _bounded_host(said), address(remote)
        reasons += (
            (
                CLAIM_CODE,
                f"its serve at {remote} says it is on {cut(said)}, this host's name: a remote"
                " does not speak for this host, so it is shown under that serve's address",
            ),
        )
    else:
        there = _bounded_host(said)
    blocking = record.get("blocking")
    origin = RemoteOrigin(
        remote=remote,
        host=there,
        id=lock_id,
        state=record["state"],
        reasons=reasons,
        alive=holder.get("alive"),
        waiters=len(blocking) if isinstance(blocking, list) else 0,
        age_seconds=_seconds(record.get("age_seconds")),
        seen_at=seen_at,
        claimed_host=claimed,
    )
    pid = holder.get("pid")
    return Lock(
        id=ids.remote_id(remote, lock_id),
        source=record["source"],
        format=record["format"],
        name=_shown_text(record["name"]) or "",
        path=_shown_text(record.get("path")),
        holder=Holder(
            pid=pid if isinstance(pid, int) else None,
            host=_shown_text(holder.get("host")),
            actor=_shown_text(holder.get("actor")),
            session=_shown_text(holder.get("session")),
            operation=_shown_text(holder.get("operation")),
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


def _seconds(value: Any) -> float | None:
    # Checked already (check_record): a number in range, or None.
    return None if value is None else float(value)


def _time(value: Any) -> datetime | None:
    return parse_timestamp(value) if isinstance(value, str) else None


def advice(verb: str, lock: Lock, origin: RemoteOrigin) -> str:
    """Why an action on another host's lock is not taken here, and what to run there."""
    name = cut(lock.name)
    if origin.claimed_host is not None:
        # Its word is all there is that the lock is ours: no command is given on it.
        return (
            f"{name} came from the lockwatch serve at {origin.remote}, which says it is on"
            f" {origin.claimed_host}, this host's name. A remote does not speak for this"
            " host: nothing is done on its word, and no command is given for it; this host's"
            " own locks are in `lockwatch ls`"
        )
    command = f"lockwatch {verb} {shlex.quote(cut(origin.id, 1024))} --reason '…'"
    if is_local_address(origin.host):
        # A loopback serve is this host's own or a tunnel's far end: which, nobody
        # here can tell, so no host is named for the command.
        return (
            f"{name} was seen through the lockwatch serve at {origin.remote}, a loopback"
            " address: that serve runs on this host or at the far end of a tunnel, which"
            " lockwatch cannot tell, and it acts on no lock through a serve. Where that serve"
            f" runs, run: {command}; this host's own locks are in `lockwatch ls`"
        )
    return (
        f"{name} is a lock on host {origin.host}, seen through its lockwatch serve at"
        f" {origin.remote}: other hosts' locks are read-only here. On {origin.host} run:"
        f" {command}"
    )
