"""Mercurial's locks: `.hg/wlock` (the working directory) and `.hg/store/lock`
(the store; `.hg/lock` in repositories without a store).

Each is a symlink whose target names the holder, `HOST:PID`, where HOST is the
host name and, on Linux, `/<pid namespace inode in hex>` after it (mercurial's
lock.py, `_getlockprefix`); where symlinks cannot be made it is a regular file
with the same text. Old Mercurial wrote the pid alone.

Mercurial's own verdict (`lock._lockshouldbebroken`, `testlock`): a lock whose
HOST (namespace included) is exactly this process's and whose pid is dead is
stale, and the next hg command breaks it; any other lock is held, whatever its
age (another host or pid namespace cannot be checked, and an old-style lock
names no host). Here: a dead pid on this host and namespace is `holder_dead`, a
live one active; another host or namespace is unknown (`foreign_host`,
`other_pid_namespace`), never stale, so never broken by mistake.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.sources.files.decoders.base import (
    MAX_PID,
    Claims,
    LockFile,
    file_lock_for,
)
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "mercurial"
POLICY = StalenessPolicy(pid_liveness=True, foreign_unknown=True)
# A locker Mercurial cannot read a holder from: it never breaks it; nor does lockwatch judge it.
UNREAD = StalenessPolicy(undecided=True)
_MAX_TEXT = 1024

# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ("symlink", "file")
# The only entries `read` may claim (base.Claims): `.hg/wlock`, `.hg/lock`, `.hg/store/lock`.
CLAIMS = Claims(kinds=WANTS_KINDS, names=frozenset({"wlock", "lock"}))


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def _which(path: str) -> str | None:
    """ "wlock" or "lock" (the store's) when `path` is one of a repository's locks."""
    parent, _, name = path.rpartition("/")
    in_hg = parent.endswith("/.hg") or parent == ".hg"
    if name == "wlock":
        return name if in_hg else None
    if name == "lock" and (in_hg or parent.endswith("/.hg/store")):
        return name
    return None


def wants(path: str, kind: str) -> bool:
    return kind in WANTS_KINDS and _which(path) is not None


@lru_cache(maxsize=1)
def local_namespace() -> str | None:
    """This host's pid namespace as Mercurial writes it (hex inode), or None."""
    try:
        return f"{os.stat('/proc/self/ns/pid').st_ino:x}"
    except OSError:
        return None


def parse(text: str) -> tuple[str | None, str | None, int] | None:
    """(host, pid namespace, pid) of a locker `HOST[/NS]:PID` (or a bare old-style
    PID: no host), else None."""
    if len(text) > _MAX_TEXT:
        return None
    host_part, colon, pid_text = text.partition(":")
    if not colon:
        host_part, pid_text = "", text
    if not (pid_text.isascii() and pid_text.isdigit()):
        return None
    pid = int(pid_text)
    if not 0 < pid <= MAX_PID:
        return None
    if not colon:
        return None, None, pid
    host, slash, namespace = host_part.partition("/")
    if not host:
        return None
    return host, namespace if slash else None, pid


def read(file: LockFile) -> Lock | None:
    which = _which(file.path)
    if which is None or file.kind not in WANTS_KINDS:
        return None
    if file.kind == "symlink":
        text = file.target or ""
    else:
        try:
            text = file.raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            text = file.raw[:80].decode("utf-8", "replace")
    repository = file.parents(3 if file.parents(1)[0] == "store" else 2)[-1] or "/"
    name = f"{repository} {'wlock' if which == 'wlock' else 'store lock'}"
    content: dict[str, Any] = {"locker": text[:200]}
    parsed = parse(text)
    if parsed is None:
        note = Reason(
            "no_pid",
            f"Mercurial reads no holder from {text[:80]!r} either: it never breaks this lock",
        )
        return _lock(file, name, content, Holder(), UNREAD, (note,))
    host, namespace, pid = parsed
    if host is None:
        note = Reason(
            "no_pid",
            f"an old-style lock naming pid {pid} and no host: Mercurial never breaks it,"
            " and whose pid it is cannot be told",
        )
        return _lock(file, name, {**content, "pid": pid}, Holder(), UNREAD, (note,))
    here = local_namespace()
    other_namespace = namespace is not None and here is not None and namespace != here
    holder = Holder(pid=pid, host=host, other_pid_namespace=other_namespace)
    content = {**content, "host": host, "pid_namespace": namespace, "pid": pid}
    return _lock(file, name, content, holder, POLICY, ())


def _lock(
    file: LockFile,
    name: str,
    content: dict[str, Any],
    holder: Holder,
    policy: StalenessPolicy,
    notes: tuple[Reason, ...],
) -> Lock:
    return _file_lock(
        file,
        name=name,
        policy=policy,
        content=content,
        holder=holder,
        acquired_at=file.modified_at,  # the symlink is made when the lock is taken
        notes=notes,
    )


handover = no_handover  # a symlink, not content: break it


refresh = no_refresh
