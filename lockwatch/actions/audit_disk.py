"""The audit log on a disk that may be full: room reserved before acting, writes
that fail undone, and a head that is rewritten without needing a new block.

An action's intent is written only once room for its result is reserved: the
blocks after the end of the log are allocated with fallocate(KEEP_SIZE), so the
result record later lands in blocks the filesystem already gave the log, even
if the disk filled up meanwhile. Where fallocate cannot keep the size (some
filesystems), the free space is checked instead: a bound, not a reservation.
On copy-on-write filesystems (btrfs, ZFS) no write is ever certain to fit.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from functools import cache
from pathlib import Path

_FALLOC_FL_KEEP_SIZE = 1  # linux/falloc.h
_RENAME_EXCHANGE = 2  # linux/fs.h
# Errors that say "this filesystem cannot", not "there is no room".
_UNSUPPORTED = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL, errno.ENODEV})
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})


class NoRoom(OSError):
    """Not enough space for what must be written: nothing was."""


@cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def reserve(fd: int, offset: int, length: int) -> None:
    """Make sure `length` bytes can be written at `offset` of `fd`: allocated now
    where the filesystem can (fallocate, KEEP_SIZE: the file does not grow), else
    checked against the free space. NoRoom if they cannot."""
    libc = _libc()
    fallocate = getattr(libc, "fallocate", None) if libc is not None else None
    if fallocate is not None:
        fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
        fallocate.restype = ctypes.c_int
        if fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length) == 0:
            return
        err = ctypes.get_errno()
        if err in NO_ROOM:
            raise NoRoom(err, f"{os.strerror(err)}: {_free(fd)} free, {length} bytes needed")
        if err not in _UNSUPPORTED:
            raise OSError(err, os.strerror(err))
    if _free_bytes(fd) < length:
        raise NoRoom(errno.ENOSPC, f"{_free(fd)} free, {length} bytes needed")


def _free_bytes(fd: int) -> int:
    st = os.fstatvfs(fd)
    # root may write into the blocks kept back for it; anyone else may not.
    blocks = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    return blocks * st.f_frsize


def _free(fd: int) -> str:
    try:
        free = _free_bytes(fd)
    except OSError:
        return "unknown space"
    return f"{free / 1024:.0f} KiB" if free >= 1024 else f"{free} bytes"


def swap(dir_fd: int, first: str, second: str) -> bool:
    """Exchange two names in one directory atomically (renameat2 RENAME_EXCHANGE);
    False where the system cannot."""
    libc = _libc()
    renameat2 = getattr(libc, "renameat2", None) if libc is not None else None
    if renameat2 is None:
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes += [ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(dir_fd, os.fsencode(first), dir_fd, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err))


def write_beside(head: Path, spare: Path, data: bytes) -> None:
    """Replace the file `head` with `data`, atomically. The bytes go into `spare`
    (kept from the last time, so its block is already the log's), which is then
    swapped with `head`: the old head becomes the next spare. Nothing new is
    allocated once both exist, so a full disk cannot stop the head."""
    from lockwatch.trusted import open_own

    # Made exclusively, or yours already: a spare someone else made first (0666, or
    # a FIFO) would become the head, theirs to remove or to block the write on.
    fd, _ = open_own(spare, os.O_WRONLY)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    except OSError:
        # A spare made just now on a full disk holds nothing: not left behind.
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_size == 0:
                os.unlink(spare)
        raise
    finally:
        os.close(fd)
    dir_fd = os.open(head.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        exists = os.path.lexists(head)
        if not (exists and swap(dir_fd, spare.name, head.name)):
            os.rename(spare.name, head.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        os.fsync(dir_fd)  # the head must survive a crash as surely as the record
    finally:
        os.close(dir_fd)


def make_spare(spare: Path, size: int) -> None:
    """The spare head, allocated now (before an action), if it is not there."""
    try:
        fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return
    try:
        write_all(fd, b" " * size)
        os.fsync(fd)
    except OSError:
        os.close(fd)
        os.unlink(spare)
        raise
    os.close(fd)
