"""Clawdbot memory lock (seed 000): `memory/.lock`, pid + 30 s staleness.

`{pid, session_id, acquired_at, hostname, operation}`. Stale when the pid is dead
on this host or the lock is older than 30 s; a lock written by another host is
stale past 10 s and its pid is never checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from lockwatch.model.handover import MARK, NewHolder
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.timestamps import format_timestamp
from lockwatch.sources.files.decoders.base import Fields, LockFile, dump, file_lock_for
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "clawdbot"
POLICY = StalenessPolicy(pid_liveness=True, max_age=30.0, foreign_max_age=10.0)


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def claims(doc: Mapping[str, Any]) -> bool:
    return "session_id" in doc and "acquired_at" in doc


def hinted(file: LockFile) -> bool:
    return file.name == ".lock" and file.parents(1) == ("memory",)


def decode(doc: Mapping[str, Any], file: LockFile) -> Lock:
    fields = Fields(doc)
    pid = fields.pid()
    acquired_at = fields.timestamp("acquired_at")
    holder = Holder(
        pid=pid,
        host=fields.text("hostname", required=False),
        session=fields.text("session_id", required=False),
        operation=fields.text("operation", required=False),
    )
    return _file_lock(
        file, content=doc, holder=holder, acquired_at=acquired_at, defects=fields.defects
    )


def _js_time(at: datetime) -> str:
    # As JavaScript's toISOString() writes it: milliseconds and a Z.
    return format_timestamp(at)[:23] + "Z"


def handover(doc: Any, new: NewHolder) -> bytes | None:
    """The memory lock held by the operator: their pid on this host, now."""
    previous = doc.get("session_id") if isinstance(doc, Mapping) else None
    return dump(
        {
            "pid": new.pid,
            "session_id": f"lockwatch-{new.token}",
            "acquired_at": _js_time(new.at),
            "hostname": new.host,
            "operation": f"held by {new.operator} via lockwatch",
            MARK: new.mark(previous=previous),
        }
    )


def refresh(doc: Any, at: datetime) -> bytes | None:
    """Stale past 30 s of age: holding it means stamping it again."""
    if not isinstance(doc, Mapping):
        return None
    return dump({**doc, "acquired_at": _js_time(at)})
