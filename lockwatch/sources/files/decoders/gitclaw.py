"""GitClaw per-issue session lock (seed 001): `.GITCLAW/state/locks/<N>.lock`.

`{issueNumber, runId, acquiredAt, pid}`. Stale once it is 10 minutes old
(age >= 600 s, the seed's `lockAge < LOCK_TTL_MS` test); the pid belongs to a CI
runner, so it never decides staleness.
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

FORMAT = "gitclaw"
TTL_SECONDS = 600.0
POLICY = StalenessPolicy(max_age=TTL_SECONDS, max_age_inclusive=True)


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def claims(doc: Mapping[str, Any]) -> bool:
    # acquiredAt alone is common camelCase: it takes the issue number, or both run keys.
    return "issueNumber" in doc or ("runId" in doc and "acquiredAt" in doc)


def hinted(file: LockFile) -> bool:
    # The names as text first (what `parents` matches, so it must be there): a scan
    # asks this of files elsewhere, and a look for text costs less than a split.
    return ".GITCLAW/state/locks/" in file.path and file.parents(3) == (
        "locks",
        "state",
        ".GITCLAW",
    )


def decode(doc: Mapping[str, Any], file: LockFile) -> Lock:
    fields = Fields(doc)
    issue = fields.integer("issueNumber", minimum=0)
    run_id = fields.text("runId", allow_int=True)
    acquired_at = fields.timestamp("acquiredAt")
    pid = fields.pid()
    return _file_lock(
        file,
        name=f"issue-{issue}" if issue is not None else file.stem(),
        content=doc,
        holder=Holder(
            pid=pid,
            session=run_id,
            operation=f"issue #{issue}" if issue is not None else None,
        ),
        acquired_at=acquired_at,
        ttl_seconds=TTL_SECONDS,
        defects=fields.defects,
    )


def handover(doc: Any, new: NewHolder) -> bytes | None:
    """The issue's session lock held by the operator, for a fresh 10 minutes."""
    if not isinstance(doc, Mapping) or type(doc.get("issueNumber")) is not int:
        return None
    return dump(
        {
            "issueNumber": doc["issueNumber"],
            "runId": f"lockwatch-{new.token}",
            "acquiredAt": format_timestamp(new.at)[:23] + "Z",
            "pid": new.pid,
            MARK: new.mark(previous=doc.get("runId")),
        }
    )


def refresh(doc: Any, at: datetime) -> bytes | None:
    if not isinstance(doc, Mapping):
        return None
    return dump({**doc, "acquiredAt": format_timestamp(at)[:23] + "Z"})
