"""Kernel locks as lock records: one per /proc/locks line, held or waiting."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace

from lockwatch.model.lock import Holder, Lock
from lockwatch.sources.filelocks import FileKey, KernelLock
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.sources.kernel.ids import kernel_lock_id
from lockwatch.sources.procfs import KernelTable

# Bounds on the walk that finds files no holder's fds name (another user's
# process, without root): a kernel lock never makes lockwatch read a whole disk.
MAX_WALKED = 200_000


def to_locks(table: KernelTable, known: Mapping[FileKey, str] | None = None) -> list[Lock]:
    locks: dict[str, Lock] = {}
    for kernel in table.locks:
        lock = lock_of(kernel, kernel.path or (known or {}).get(kernel.file))
        # The same process holding the same range twice (two fds, shared): one record.
        locks.setdefault(lock.id, lock)
    return sorted(locks.values(), key=lambda lock: lock.id)


def lock_of(kernel: KernelLock, path: str | None) -> Lock:
    """One /proc/locks line as the kernel source's lock, on the file at `path`."""
    return Lock(
        id=kernel_lock_id(kernel),
        source="kernel",
        format=kernel.format,
        name=os.path.basename(path) if path else f"inode {kernel.file.inode}",
        path=path,
        holder=Holder(pid=kernel.holder_pid),
        facts=KernelFacts.of(kernel if path == kernel.path else replace(kernel, path=path)),
    )


def known_files(roots: Iterable[str], wanted: set[FileKey]) -> dict[FileKey, str]:
    """Paths under `roots` of the files in `wanted`, by inode: for locks whose
    holders' fds could not be read. Never follows a symlink; bounded."""
    found: dict[FileKey, str] = {}
    walked = 0
    for root in roots:
        for directory, dirs, files in os.walk(os.path.abspath(root)):
            for name in files + dirs:
                walked += 1
                path = os.path.join(directory, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                key = FileKey.of(st.st_dev, st.st_ino)
                if key in wanted:
                    found[key] = path
                    if len(found) == len(wanted):
                        return found
            if walked > MAX_WALKED:
                return found
    return found
