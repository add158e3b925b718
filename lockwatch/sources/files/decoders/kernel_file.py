"""A file of any name the kernel holds a lock on, with no lock format of its own.

A database's data file, a daemon's state file, a tool's sentinel named
nothing like a lock: found by a walk because a flock, POSIX or OFD lock is on
it (kernel_found.py), and judged by that lock alone. Held, it is active, its
holder the process whose open file holds it (as lslocks names it); released,
it is no lock at all and the next scan no longer lists it. Its bytes are its
tool's data, never a lock record: never read as one, never moved by a break.
"""

from __future__ import annotations

import os

from lockwatch.model.lock import NO_HOLDER, Lock, Reason
from lockwatch.sources.files.decoders.base import LockFile
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh, wants_none
from lockwatch.sources.files.facts import facts_of, refiled
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "kernel-file"
# Only the kernel's lock says anything; the file's mtime is its data's, not the lock's.
POLICY = StalenessPolicy(kernel_sentinel=True, kernel_only=True, sentinel_mtime_only=True)
# Its tool's data: a break never renames it (the holder is signalled instead).
MOVABLE = False
WHAT = "a file the kernel holds a lock on, with no lock format of its own"
NOTE = Reason(
    "kernel_file",
    "no lock format of its own: a file its tool holds a kernel lock on (flock, fcntl or OFD)",
)
# Decoded as no lock (its name is not a lock's), or as a lock file that cannot be
# read as one: with a kernel lock on it, the kernel's lock is what it is.
_REPLACED = frozenset({"not_a_lock", "unparseable", "too_large"})

# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ()


wants = wants_none


def read(file: LockFile) -> Lock | None:
    return None  # claimed where the kernel's word is attached (`replaces`, `of`)


def replaces(lock: Lock) -> bool:
    """Whether `lock`, as decoded, is no lock of a known format: with a kernel
    lock on its file, it is this format's."""
    if lock.format != "generic" or facts_of(lock).entry != "file":
        return False
    return any(r.code in _REPLACED for r in (*lock.notes, *lock.defects))


def of(lock: Lock) -> Lock:
    """`lock` as a kernel-locked file: named by its file, no content, no time."""
    name = os.path.basename(lock.path or "") or lock.name
    return refiled(
        lock,
        {"policy": POLICY},
        format=FORMAT,
        name=name,
        content=None,
        holder=NO_HOLDER,
        acquired_at=None,
        defects=(),
        notes=(NOTE,),
    )


handover = no_handover  # held by a kernel lock, not by content


refresh = no_refresh
