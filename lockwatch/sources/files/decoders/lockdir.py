"""A lock directory (`x.lock/`, made with mkdir, which is atomic): the mkdir
idiom of shell scripts and many tools. Its existence is the lock; it names no
holder, so lockwatch shows its age and nothing more (never `free`: there is no
kernel lock to ask about). lockfile's MkdirLockFile, whose directory names its
holder, is read by its own module first.

npm's proper-lockfile makes the same kind of directory: `<file>.lock/`, empty,
beside the file it locks (which must exist: it takes the file's realpath), and
its holder touches its mtime every `stale / 2` ms; a contender removes it once
the mtime is older than `stale` (10 s by default). Such a directory is read as
proper-lockfile's and judged by its default: its mtime is the heartbeat, stale
(`heartbeat_expired`) once untouched for over 10 s, as proper-lockfile's own
`check()` says with its defaults. The message says the stale time is the
default: a caller may raise it (clawdbot's pairing store: 30 s), and a shell's
`mkdir data.lock` beside `data` looks the same; any other lock directory (not
empty, or with no such file beside it) is never called stale by age.
"""

from __future__ import annotations

from typing import Any

from lockwatch.model.lock import Lock, Reason
from lockwatch.sources.files.decoders.base import Claims, LockFile, file_lock_for
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh, wants_none
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "mkdir"
POLICY = StalenessPolicy()
# proper-lockfile's defaults: stale 10 s, touched every 5 s (so "late" only past
# 7.5 s, once a touch was missed).
PROPER_STALE_SECONDS = 10.0
PROPER_POLICY = StalenessPolicy(heartbeat=True, heartbeat_late_fraction=0.75)
_NO_HOLDER = Reason("no_pid", "a lock directory names no process; lockwatch can only show its age")
_PROPER_LOCKFILE = Reason(
    "no_pid",
    "empty and beside the file it is named for, as npm proper-lockfile makes its locks:"
    " its holder touches its mtime every 5 s and a contender removes it once untouched"
    " for over 10 s (proper-lockfile's default stale time; a caller may set a longer one,"
    " which the lock does not record)",
)


# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ()
# The only entries `read` may claim (base.Claims): any lock directory.
CLAIMS = Claims(kinds=("dir",), anything=True)


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


wants = wants_none  # every `x.lock/` is listed already


def looks_like_proper_lockfile(file: LockFile) -> bool:
    return file.kind == "dir" and not file.entries and file.unlocked_exists is True


def read(file: LockFile) -> Lock | None:
    if file.kind != "dir":
        return None
    proper = looks_like_proper_lockfile(file)
    content: dict[str, Any] = {"entries": list(file.entries)}
    if proper:
        content["proper_lockfile_shape"] = True
    return _file_lock(
        file,
        policy=PROPER_POLICY if proper else POLICY,
        content=content,
        acquired_at=None if proper else file.modified_at,
        # proper-lockfile's mtime is its holder's last touch, not its acquisition.
        heartbeat_at=file.modified_at if proper else None,
        ttl_seconds=PROPER_STALE_SECONDS if proper else None,
        notes=(_PROPER_LOCKFILE if proper else _NO_HOLDER,),
    )


handover = no_handover  # a directory: break it (moved to the tombstones), never rewritten


refresh = no_refresh
