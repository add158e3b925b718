"""A lock directory (`x.lock/`, made with mkdir, which is atomic): the mkdir
idiom of shell scripts and many tools. Its existence is the lock; it names no
holder, so lockwatch shows its age and nothing more (never `free`: there is no
kernel lock to ask about). lockfile's MkdirLockFile, whose directory names its
holder, is read by its own module first.

npm's proper-lockfile makes the same kind of directory: `<file>.lock/`, empty,
beside the file it locks (which must exist: it takes the file's realpath), and
its holder touches its mtime every `stale / 2` ms; a contender removes it once
the mtime is older than `stale`. lockwatch cannot turn that into a verdict:
- a shell's `mkdir data.lock` beside `data` looks exactly the same, and is held
  for as long as its script likes without a touch;
- `stale` (10 s by default) is the caller's option, recorded nowhere, and real
  callers raise it (clawdbot's pairing store: 30 s), so an untouched directory
  past 10 s may still be held.
So such a directory is named as possibly proper-lockfile's, its mtime is shown
as its last touch, and it is never called stale by age: a wrong `stale` lets an
operator break a live lock, while proper-lockfile clears its own leftovers.
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
_PROPER_LOCKFILE = Reason(
    "no_pid",
    "a lock directory names no process. It is empty and beside the file it is named for,"
    " as npm proper-lockfile makes its locks: if it is one, its holder touches its mtime"
    " every stale/2 and a contender removes it"
    " once untouched for longer than stale (10 s by default; the caller's option is not"
    " recorded, so lockwatch does not call it stale by age)",
)


def wants(path: str, kind: str) -> bool:
    return False  # every `x.lock/` is listed already


def looks_like_proper_lockfile(file: LockFile) -> bool:
    return file.kind == "dir" and not file.entries and file.unlocked_exists is True


def read(file: LockFile) -> Lock | None:
    if file.kind != "dir":
        return None
    proper = looks_like_proper_lockfile(file)
    content: dict[str, Any] = {"entries": list(file.entries)}
    if proper:
        content["proper_lockfile_shape"] = True
    return file_lock(
        file,
        format=FORMAT,
        name=file.stem(),
        policy=POLICY,
        content=content,
        acquired_at=file.modified_at,
        # proper-lockfile's mtime is its holder's last touch, not its acquisition.
        heartbeat_at=file.modified_at if proper else None,
        notes=(_PROPER_LOCKFILE if proper else _NO_HOLDER,),
    )


def handover(content: Any, new: NewHolder) -> bytes | None:
    return None  # a directory: break it (moved to the tombstones), never rewritten


def refresh(content: Any, at: datetime) -> bytes | None:
    return None
