"""tower-fleet lock spec v1 (seed 002): `<lock_name>.lock`, heartbeats and a ttl.

The schema is normative: a missing or mistyped required field, a `lock_version`
other than `v1`, or a bad `lock_name` make the lock invalid. Stale iff
now - last_heartbeat_at > ttl_seconds. The pid is informational only (§12.3):
shown, never a staleness reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lockwatch.model.lock import Holder, Lock, StalenessPolicy
from lockwatch.sources.files.decoders.base import Fields, LockFile, file_lock, schema_violation

FORMAT = "tower-fleet/v1"
POLICY = StalenessPolicy(heartbeat=True)

# §2.2: [a-z0-9_-], 1-128 characters, not starting or ending with - or _.
LOCK_NAME = re.compile(r"[a-z0-9](?:[a-z0-9_-]{0,126}[a-z0-9])?")
_SIGNATURE = frozenset({"lock_name", "request_id", "last_heartbeat_at", "ttl_seconds", "intent"})


def claims(doc: Mapping[str, Any]) -> bool:
    return "lock_version" in doc or len(_SIGNATURE.intersection(doc)) >= 3


def hinted(file: LockFile) -> bool:
    return file.parents(2) == ("locks", "logs")


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
    return file_lock(
        file,
        format=FORMAT,
        name=lock_name if lock_name else file.stem(),
        policy=POLICY,
        content=doc,
        holder=Holder(pid=pid, host=host_id, actor=actor, session=request_id, operation=operation),
        acquired_at=created_at,
        heartbeat_at=heartbeat_at,
        ttl_seconds=float(ttl) if ttl is not None else None,
        defects=fields.defects,
    )
