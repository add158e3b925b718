"""Files the kernel holds a lock on, found by a walk whatever their names.

/proc/locks is read once per scan anyway (the kernel's word on lock files,
evidence.py); the inodes it names are kept here, per device, so that a walk
lists a file of any name that a flock, POSIX or OFD lock is on: a database's,
dpkg's `lock-frontend`, a daemon's state file. With nothing locked the set is
empty and a walk pays one falsy test per entry; with locks, a name whose inode
(scandir gives it without a stat) is in the set costs one stat to confirm its
device. Kept per process: a forked worker inherits the set its parent read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

from lockwatch.sources.filelocks import FileKey

# /proc/locks in one read (as procfs.py reads it): a host with more is unusual.
_MAX_READ = 1 << 20
# Inode -> devices ("major:minor") a kernel lock is on with that inode number.
INODES: dict[int, frozenset[str]] = {}


def remember(keys: Iterable[FileKey]) -> None:
    """The files kernel locks are on now (held or waited for): what later walks
    of this process (and its forked workers) list whatever their names."""
    by_inode: dict[int, set[str]] = {}
    for key in keys:
        by_inode.setdefault(key.inode, set()).add(key.device)
    INODES.clear()
    INODES.update((inode, frozenset(devices)) for inode, devices in by_inode.items())


def locked(entry: os.DirEntry[str]) -> bool:
    """Whether a kernel lock is on this regular file (never a symlink's target)."""
    devices = INODES.get(entry.inode())
    if devices is None:
        return False
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or FileKey.of(st.st_dev, st.st_ino).device not in devices:
        return False
    return not _told_elsewhere(entry.path)


def _told_elsewhere(path: str) -> bool:
    """A file whose kernel lock another lock file's row tells: Terraform's state
    file, locked while `.<state>.lock.info` beside it says who holds it."""
    directory, _, name = path.rpartition("/")
    return os.path.lexists(f"{directory}/.{name}.lock.info")


def is_locked(key: FileKey | None) -> bool:
    return key is not None and key.device in INODES.get(key.inode, ())


def refresh(proc: str = "/proc") -> None:
    """The files kernel locks are on now, from /proc/locks alone (no process's
    fds: that is the evidence's work): for a walk about to start (the dashboard's
    scans). Where it cannot be read, nothing is listed for it."""
    from lockwatch.sources.procfs import parse_proc_locks

    try:
        with open(f"{proc}/locks", "rb") as f:
            text = f.read(_MAX_READ).decode("ascii", errors="replace")
    except OSError:
        remember(())
        return
    remember(lock.file for lock in parse_proc_locks(text))
