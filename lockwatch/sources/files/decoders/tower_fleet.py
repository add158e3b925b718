"""tower-fleet lock spec v1 (seed 002): `<lock_name>.lock`, heartbeats and a ttl.

The schema is normative: a missing or mistyped required field, a `lock_version`
other than `v1`, or a bad `lock_name` make the lock invalid. Stale iff
now - last_heartbeat_at > ttl_seconds. The pid is informational only (§12.3):
shown, never a staleness reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from lockwatch.model.handover import MARK, NewHolder
from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.timestamps import format_timestamp
from lockwatch.sources.files.decoders.base import (
    Fields,
    LockFile,
    dump,
    file_lock_for,
    schema_violation,
)
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "tower-fleet/v1"
POLICY = StalenessPolicy(heartbeat=True)

# §2.2: [a-z0-9_-], 1-128 characters, not starting or ending with - or _.
LOCK_NAME = lazy_compile(r"[a-z0-9](?:[a-z0-9_-]{0,126}[a-z0-9])?")
_SIGNATURE = frozenset({"lock_name", "request_id", "last_heartbeat_at", "ttl_seconds", "intent"})


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def claims(doc: Mapping[str, Any]) -> bool:
    return "lock_version" in doc or len(_SIGNATURE.intersection(doc)) >= 3


def hinted(file: LockFile) -> bool:
    # The names as text first (what `parents` matches, so it must be there): a scan
    # asks this of files elsewhere, and a look for text costs less than a split.
    return "logs/locks/" in file.path and file.parents(2) == ("locks", "logs")


def decode(doc: Mapping[str, Any], file: LockFile) -> Lock:
    fields = Fields(doc)
    version = fields.text("lock_version")
    if version is not None and version != "v1":
        fields.defects.append(schema_violation(f"lock_version is {version!r}, not 'v1'"))
    lock_name = fields.text("lock_name")
    if lock_name is not None:
        if not LOCK_NAME.fullmatch(lock_name):
            fields.defects.append(
                schema_violation(
                    f"lock_name {lock_name!r} breaks §2.2: only [a-z0-9_-], 1-128 characters,"
                    " not starting or ending with - or _"
                )
            )
        if file.name != f"{lock_name}.lock":
            fields.defects.append(
                schema_violation(
                    f"lock_name {lock_name!r} does not match the file name {file.name!r}"
                )
            )
    request_id = fields.text("request_id")
    actor = fields.text("actor")
    intent = fields.text("intent")
    intent_version = fields.text("intent_version")
    host_id = fields.text("host_id")
    pid = fields.pid()
    created_at = fields.timestamp("created_at")
    heartbeat_at = fields.timestamp("last_heartbeat_at")
    ttl = fields.integer("ttl_seconds", minimum=1)
    if "metadata" in doc and not isinstance(doc["metadata"], dict):
        fields.defects.append(schema_violation("field 'metadata' must be an object"))

    operation = None
    if intent is not None:
        operation = f"{intent}@{intent_version}" if intent_version else intent
    return _file_lock(
        file,
        name=lock_name if lock_name else file.stem(),
        content=doc,
        holder=Holder(pid=pid, host=host_id, actor=actor, session=request_id, operation=operation),
        acquired_at=created_at,
        heartbeat_at=heartbeat_at,
        ttl_seconds=float(ttl) if ttl is not None else None,
        defects=fields.defects,
    )


def handover(doc: Any, new: NewHolder) -> bytes | None:
    """§7: the lock written anew for the operator. A new request_id, the operator as
    actor, created_at and last_heartbeat_at now, the ttl and intent kept; host_id
    and pid are this lockwatch's (the pid is informational, §12.3)."""
    if not isinstance(doc, Mapping):
        return None
    at = format_timestamp(new.at, precise=False)
    out = dict(doc)
    metadata = doc.get("metadata")
    kept = dict(metadata) if isinstance(metadata, Mapping) else {}
    kept[MARK] = new.mark(previous=doc.get("request_id"))
    out.update(
        request_id=f"req_{new.token}",
        actor=new.operator,
        host_id=new.host,
        pid=new.own_pid,
        created_at=at,
        last_heartbeat_at=at,
        metadata=kept,
    )
    return dump(out)


def refresh(doc: Any, at: datetime) -> bytes | None:
    """§5.3: a heartbeat changes last_heartbeat_at and nothing else."""
    if not isinstance(doc, Mapping):
        return None
    return dump({**doc, "last_heartbeat_at": format_timestamp(at, precise=False)})
