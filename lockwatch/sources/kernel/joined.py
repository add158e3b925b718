"""Kernel locks whose facts join a lock file's row: one row per file (issue 33).

With PATHs, the file source lists every file under them that the kernel holds
a lock on, whatever its name (sources/files/kernel_found.py), and its row
carries that lock as its evidence: its holder, the processes sharing it, how
many wait. Listed by this source too, the file would be two rows. So with
PATHs this source lists what no file's row tells: the waiters (each is a
process blocked on the file's lock, and waits on the file's row in the
blocking tree, whose node is the same holder), and the locks on files no row
carries (a directory, a file replaced or deleted since it was locked, one on a
network filesystem, where the file source asks the kernel nothing).
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Sequence

from lockwatch.model.lock import Lock
from lockwatch.sources.filelocks import FileKey
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.sources.kernel.narrow import narrowed


def on_listed_file(lock: Lock, remote: frozenset[str]) -> bool:
    """Whether `lock` is a granted kernel lock on a regular file its path still
    names: the file whose row the file source lists with this lock in it."""
    facts = lock.facts
    if not isinstance(facts, KernelFacts) or facts.waiting or lock.path is None:
        return False
    if facts.file.device in remote:
        return False
    try:
        st = os.stat(lock.path, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and FileKey.of(st.st_dev, st.st_ino) == facts.file


def joined(locks: Sequence[Lock], roots: Sequence[str], *, live: bool = False) -> list[Lock]:
    """`locks` but those a file's row carries: the file source lists the files
    under `roots` (the PATHs, or the current directory when no PATH is named
    and no other source asked for by a flag). `live`: beside the files feed,
    which lists a file of another name than a lock's (`LOCK`, `ibdata1`) only at
    its next rescan, tens of seconds on: until then its lock would be on no row,
    so only lock-named files' locks are joined there (a one-shot scan finds the
    others at once, through /proc/locks)."""
    from lockwatch.sources.mounts import remote_devices
    from lockwatch.sources.named import listed_by_name

    remote = remote_devices()
    # A file's row carries one holder's locks (its holder, the processes sharing
    # it): the POSIX ranges one process holds on a file are that one holder's
    # (SQLite's write transaction is RESERVED's byte and SHARED's range, two
    # lines). Where several hold locks on one file (shared flocks, POSIX ranges
    # of several processes) each stays its own row, never dropped unseen.
    holders = {
        (lock.facts.file, lock.facts.pids)
        for lock in locks
        if isinstance(lock.facts, KernelFacts) and not lock.facts.waiting
    }
    held = Counter(file for file, _ in holders)
    carried = {
        id(lock)
        for lock in narrowed(locks, roots)
        if on_listed_file(lock, remote)
        and isinstance(lock.facts, KernelFacts)
        and held[lock.facts.file] == 1
        and (not live or (lock.path is not None and listed_by_name(lock.path)))
    }
    return [lock for lock in locks if id(lock) not in carried]
