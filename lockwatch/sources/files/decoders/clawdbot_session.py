"""clawdbot's session write locks: `<session>.jsonl.lock`.

clawdbot (dist/agents/session-write-lock.js) creates `<transcript>.jsonl.lock`
beside a session transcript (`~/.clawdbot/agents/<agent>/sessions/`) with
O_CREAT|O_EXCL and writes `{"pid": …, "createdAt": "<toISOString()>"}` (2-space
indent, no newline); no kernel lock. An acquirer removes it when
`!isAlive(pid)` (kill(pid, 0)) **or** `Date.now() - createdAt > 30 min`, so a
lock older than 30 minutes is taken from under a live holder.
"""

from __future__ import annotations

from typing import Any

from lockwatch.model.lock import Holder, Lock
from lockwatch.sources.files.decoders.base import (
    Claims,
    Fields,
    LockFile,
    Unreadable,
    file_lock_for,
    json_object,
)
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh, wants_none
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "clawdbot-session"
# `staleMs = 30 * 60 * 1000`, compared with `>`. clawdbot's isAlive is kill(pid,
# 0) and nothing more: a live pid started after createdAt (recycled) still
# holds the lock for clawdbot until the 30 minutes pass, so lockwatch must not
# call it stale earlier (time_by_writer turns that start-time check off).
POLICY = StalenessPolicy(pid_liveness=True, max_age=30 * 60.0, time_by_writer=True)

_SUFFIX = ".jsonl.lock"
_KEYS = frozenset({"pid", "createdAt"})


# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ()
# The only entries `read` may claim (base.Claims): `<session>.jsonl.lock`.
CLAIMS = Claims(suffixes=(_SUFFIX,))


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


wants = wants_none  # `*.lock`: the scanner lists it anyway


def _in_sessions_dir(file: LockFile) -> bool:
    return file.parents(1) == ("sessions",)


def read(file: LockFile) -> Lock | None:
    """`<session>.jsonl.lock` holding `{pid, createdAt}`; in a `sessions/`
    directory (clawdbot's place), whatever its bytes."""
    if file.kind != "file" or not file.name.endswith(_SUFFIX) or file.name == _SUFFIX:
        return None
    ours_by_place = _in_sessions_dir(file)
    doc = json_object(file, ours=ours_by_place, fmt=FORMAT, shape="{pid, createdAt}")
    if doc is None:
        return None
    if isinstance(doc, Unreadable):
        # clawdbot reads such a lock as removable (readLockPayload -> null); an
        # empty one may also be a lock being written right now: never say stale.
        return _lock(file, doc.content, defects=(doc.defect,))
    if not ours_by_place and set(doc) != _KEYS:
        return None
    fields = Fields(doc)
    pid = fields.pid()
    created = fields.timestamp("createdAt")
    return _lock(
        file,
        doc,
        holder=Holder(pid=pid, operation="session write"),
        acquired_at=created,
        defects=tuple(fields.defects),
    )


def _lock(file: LockFile, content: Any, **fields: Any) -> Lock:
    """Its lock (`fields`: file_lock's), scoped to the transcript it guards."""
    transcript = file.path[: -len(".lock")]
    name = file.name[: -len(_SUFFIX)]
    return _file_lock(file, name=name, content=content, scope=(transcript,), **fields)


handover = no_handover  # not stealable


refresh = no_refresh
