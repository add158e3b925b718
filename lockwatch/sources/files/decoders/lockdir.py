"""A lock directory (`x.lock/`, made with mkdir, which is atomic): the mkdir
idiom of shell scripts and many tools. Its existence is the lock; it names no
holder, so lockwatch shows its age and nothing more (never `free`: there is no
kernel lock to ask about). Tools whose lock directories say more (lockfile's
MkdirLockFile, npm's proper-lockfile) are read by their own modules first.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lockwatch.model.handover import NewHolder
from lockwatch.model.lock import Lock, Reason, StalenessPolicy
from lockwatch.sources.files.decoders.base import LockFile, file_lock

FORMAT = "mkdir"
POLICY = StalenessPolicy()
_NO_HOLDER = Reason("no_pid", "a lock directory names no process; lockwatch can only show its age")


def wants(path: str, kind: str) -> bool:
    return False  # every `x.lock/` is listed already


def read(file: LockFile) -> Lock | None:
    if file.kind != "dir":
        return None
    return file_lock(
        file,
        format=FORMAT,
        name=file.stem(),
        policy=POLICY,
        content={"entries": list(file.entries)},
        acquired_at=file.modified_at,
        notes=(_NO_HOLDER,),
    )


def handover(content: Any, new: NewHolder) -> bytes | None:
    return None  # a directory: break it (moved to the tombstones), never rewritten


def refresh(content: Any, at: datetime) -> bytes | None:
    return None
