"""Breaking, stealing and releasing lock files without losing anything.

Everything works through a descriptor of the lock's directory, so a path
swapped mid-action (a directory replaced by a symlink) cannot redirect it, and
nothing ever follows a symlink at the lock's own name (O_NOFOLLOW).

Compare-and-swap: the caller passes the sha256 of the bytes the operator saw.
The lock is read again just before acting; different bytes refuse the action.
The lock is then renamed aside (atomic) into the tombstone directory and the
bytes that were moved are checked once more: if someone rewrote the lock
between that read and the rename, it is linked back into place, never over a
lock somebody took meanwhile, and the action is refused.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NoReturn

from lockwatch.sources.files.scanner import (
    MAX_DIR_ENTRIES,
    MAX_LOCK_BYTES,
    TOMBSTONE_DIR,
    link_bytes,
    listing_bytes,
)

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class ActionRefused(Exception):
    """Nothing was touched: the lock is not as the operator saw it, or may not be
    acted on. `code` is machine-readable (the audit log's `refusal`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ActionFailed(Exception):
    """The action started and could not finish; `message` says what state it left."""

    def __init__(self, code: str, message: str, tombstone: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.tombstone = tombstone


@dataclass(frozen=True, slots=True)
class Moved:
    """A lock moved aside: where it went, and the bytes it held."""

    tombstone: str
    content: bytes


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def inside(path: str, roots: Sequence[str]) -> bool:
    """Whether `path`'s directory lies inside one of `roots` (symlinks resolved)."""
    directory = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    for root in roots:
        real = os.path.realpath(root)
        if os.path.isfile(real):
            if os.path.realpath(os.path.abspath(path)) == real:
                return True
            continue
        if directory == real or directory.startswith(real.rstrip("/") + "/"):
            return True
    return False


@contextlib.contextmanager
def _directory(path: str) -> Iterator[tuple[int, str, str]]:
    """(descriptor of the lock's directory, the directory's path, the lock's name)."""
    directory, name = os.path.split(os.path.abspath(path))
    if not name or name in (".", ".."):
        raise ActionRefused("not_a_lock", f"{path} names no file")
    try:
        fd = os.open(directory, _DIR_FLAGS)
    except OSError as exc:
        raise ActionRefused("not_found", f"cannot open {directory}: {exc.strerror}") from exc
    try:
        yield fd, directory, name
    finally:
        os.close(fd)


def _gone(shown: str) -> ActionRefused:
    return ActionRefused(
        "gone", f"{shown} is gone: released, or broken by someone else a moment ago"
    )


def _read(dir_fd: int, name: str, shown: str, entry: str = "file") -> bytes:
    """The lock's bytes, if it is still the kind of entry it was seen as: a
    regular file, or (only when the lock was seen as one) a symlink lock or a
    lock directory."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise _gone(shown) from None
    if stat.S_ISLNK(st.st_mode) and entry != "symlink":
        raise ActionRefused(
            "symlink", f"{shown} is a symlink; lockwatch never acts on a lock through a link"
        )
    if stat.S_ISLNK(st.st_mode):
        # A symlink lock (Emacs, SymlinkLockFile) is its text: renamed itself,
        # never followed.
        try:
            return link_bytes(os.readlink(name, dir_fd=dir_fd))
        except FileNotFoundError:
            raise _gone(shown) from None
        except OSError as exc:
            raise ActionRefused("unreadable", f"cannot read {shown}: {exc.strerror}") from exc
    if stat.S_ISDIR(st.st_mode) and entry == "dir":
        return _listing(dir_fd, name, shown)
    if not stat.S_ISREG(st.st_mode) or entry != "file":
        raise ActionRefused("not_regular_file", f"{shown} is not a regular file")
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise _gone(shown) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ActionRefused("symlink", f"{shown} became a symlink") from exc
        raise ActionRefused("unreadable", f"cannot read {shown}: {exc.strerror}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ActionRefused("not_regular_file", f"{shown} is not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_LOCK_BYTES:
            chunk = os.read(fd, MAX_LOCK_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _listing(dir_fd: int, name: str, shown: str) -> bytes:
    """A lock directory (the mkdir idiom) as the scanner saw it: its names."""
    try:
        fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        raise _gone(shown) from None
    except OSError as exc:
        raise ActionRefused("unreadable", f"cannot read {shown}: {exc.strerror}") from exc
    try:
        names = os.listdir(fd)
    finally:
        os.close(fd)
    if len(names) > MAX_DIR_ENTRIES:
        raise ActionRefused(
            "not_a_lock_dir", f"{shown} holds over {MAX_DIR_ENTRIES} entries: not a lock directory"
        )
    return listing_bytes(names)


def check(path: str, expected_sha256: str | None) -> bytes:
    """The lock's bytes now, if they are still those the operator saw."""
    with _directory(path) as (dir_fd, _directory_path, name):
        current = _read(dir_fd, name, path)
    _compare(path, expected_sha256, current)
    return current


def _compare(path: str, expected: str | None, current: bytes) -> None:
    if expected is not None and sha256_hex(current) != expected.lower():
        raise ActionRefused(
            "changed",
            f"{path} changed since you saw it (now sha256 {sha256_hex(current)[:12]}…,"
            f" you saw {expected[:12]}…): re-acquired, refreshed or rewritten; nothing done",
        )


def _tombstone_fd(dir_fd: int, directory: str, configured: str | None) -> tuple[int, str]:
    """The tombstone directory, made 0700 if missing, opened without following links."""
    where = configured or TOMBSTONE_DIR
    shown = where if os.path.isabs(where) else os.path.join(directory, where)
    try:
        if os.path.isabs(where):
            os.makedirs(where, mode=0o700, exist_ok=True)
        else:
            with contextlib.suppress(FileExistsError):
                os.mkdir(where, 0o700, dir_fd=dir_fd)
        fd = os.open(where, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ActionRefused(
                "tombstone_unsafe",
                f"the tombstone directory {shown} is a symlink or not a directory",
            ) from exc
        raise ActionRefused(
            "tombstone_unwritable", f"cannot use the tombstone directory {shown}: {exc.strerror}"
        ) from exc
    return fd, shown


def move_aside(
    path: str,
    expected_sha256: str | None,
    *,
    stamp: str,
    tombstone_dir: str | None = None,
    entry: str = "file",
) -> Moved:
    """Rename the lock into the tombstone directory if its bytes are as expected.
    `entry`: what it was seen as, a "file", a "symlink" lock (the link itself
    moves, never what it points to) or a lock "dir"."""
    with _directory(path) as (dir_fd, directory, name):
        return _move_aside(
            dir_fd, directory, name, path, expected_sha256, stamp, tombstone_dir, entry
        )


def _move_aside(
    dir_fd: int,
    directory: str,
    name: str,
    path: str,
    expected: str | None,
    stamp: str,
    tombstone_dir: str | None,
    entry: str = "file",
) -> Moved:
    _compare(path, expected, _read(dir_fd, name, path, entry))
    tomb_fd, tomb_dir = _tombstone_fd(dir_fd, directory, tombstone_dir)
    try:
        tomb_name = f"{name}@{stamp}"
        shown = os.path.join(tomb_dir, tomb_name)
        try:
            os.stat(tomb_name, dir_fd=tomb_fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:  # never overwrite a tombstone
            raise ActionRefused("tombstone_exists", f"{shown} already exists")
        try:
            os.rename(name, tomb_name, src_dir_fd=dir_fd, dst_dir_fd=tomb_fd)
        except FileNotFoundError:
            raise _gone(path) from None
        except OSError as exc:
            if exc.errno == errno.EXDEV:
                raise ActionRefused(
                    "tombstone_elsewhere",
                    f"the tombstone directory {tomb_dir} is on another filesystem; a rename"
                    " there would not be atomic",
                ) from exc
            raise ActionRefused("rename_failed", f"cannot move {path}: {exc.strerror}") from exc
        try:
            moved = _read(tomb_fd, tomb_name, shown, entry)
        except ActionRefused as refused:
            # What moved is not what was checked (swapped for a FIFO, a link…): back it goes.
            _put_back(tomb_fd, tomb_name, dir_fd, name, path, shown, refused)
        if expected is not None and sha256_hex(moved) != expected.lower():
            _put_back(tomb_fd, tomb_name, dir_fd, name, path, shown)
        os.fsync(tomb_fd)
        os.fsync(dir_fd)
        return Moved(shown, moved)
    finally:
        os.close(tomb_fd)


def _put_back(
    tomb_fd: int,
    tomb_name: str,
    dir_fd: int,
    name: str,
    path: str,
    shown: str,
    refusal: ActionRefused | None = None,
) -> NoReturn:
    """We moved a lock rewritten after our check: link it back, unless the name was
    taken meanwhile (then it stays in the tombstone, and we say where)."""
    try:
        os.link(tomb_name, name, src_dir_fd=tomb_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise ActionFailed(
            "raced",
            f"{path} was rewritten while lockwatch moved it, and a new lock was taken at"
            f" its name since; the rewritten lock is kept in {shown}",
            tombstone=shown,
        ) from None
    except OSError as exc:
        raise ActionFailed(
            "raced",
            f"{path} was rewritten while lockwatch moved it and could not be put back"
            f" ({exc.strerror}); it is kept in {shown}",
            tombstone=shown,
        ) from exc
    os.unlink(tomb_name, dir_fd=tomb_fd)
    os.fsync(dir_fd)
    if refusal is not None:
        raise ActionRefused(refusal.code, f"{refusal.message}; it was put back untouched")
    raise ActionRefused(
        "changed",
        f"{path} changed while lockwatch moved it; it was put back untouched",
    )


def replace(
    path: str,
    expected_sha256: str,
    new_content: bytes,
    *,
    stamp: str,
    token: str,
    tombstone_dir: str | None = None,
) -> Moved:
    """Steal: move the stale lock aside, then create the new one at its name. The
    new lock is linked into place, so a lock someone took in the gap is never
    overwritten (the steal fails and says so; the stale one stays in the tombstone)."""
    with _directory(path) as (dir_fd, directory, name):
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode & 0o666
        except FileNotFoundError:  # as _move_aside says it: nothing touched
            raise _gone(path) from None
        # The new lock is written (and synced) before the old one moves: a full disk
        # refuses the steal with nothing touched.
        try:
            temp = _write_temp(dir_fd, name, token, new_content, mode or 0o644)
        except OSError as exc:
            raise ActionRefused(
                "write_failed", f"cannot write the new lock beside {path}: {exc.strerror}"
            ) from exc
        try:
            moved = _move_aside(
                dir_fd, directory, name, path, expected_sha256, stamp, tombstone_dir
            )
            try:
                os.link(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            except FileExistsError:
                raise ActionFailed(
                    "taken",
                    f"someone took {path} after its stale lock was moved to {moved.tombstone};"
                    " nothing was overwritten",
                    tombstone=moved.tombstone,
                ) from None
            except OSError as exc:
                raise ActionFailed(
                    "link_failed",
                    f"the stale lock was moved to {moved.tombstone}, but the new one could not"
                    f" be put at {path} ({exc.strerror}): no lock is there now",
                    tombstone=moved.tombstone,
                ) from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=dir_fd)
        os.fsync(dir_fd)
        return moved


def rewrite(path: str, expected_sha256: str, new_content: bytes, *, token: str) -> None:
    """A heartbeat of a lock lockwatch holds: replaced atomically if it is still
    exactly what lockwatch last wrote."""
    with _directory(path) as (dir_fd, _directory_path, name):
        _compare(path, expected_sha256, _read(dir_fd, name, path))
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode & 0o666
        temp = _write_temp(dir_fd, name, token, new_content, mode or 0o644)
        try:
            if _exchange(dir_fd, temp, name):
                # The name now has the new bytes and `temp` what it had a moment ago: if
                # someone took the lock between the check and the swap, swap it back.
                try:
                    ours = sha256_hex(_read(dir_fd, temp, path)) == expected_sha256.lower()
                except ActionRefused:  # not even a regular file any more: not ours
                    ours = False
                if not ours:
                    _exchange(dir_fd, temp, name)
                    raise ActionRefused(
                        "changed", f"{path} was taken by someone else; it was left to them"
                    )
            else:  # no atomic exchange here (old kernel, some network filesystems)
                os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=dir_fd)
        os.fsync(dir_fd)


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(dir_fd: int, first: str, second: str) -> bool:
    """Swap two names in one directory atomically (renameat2 RENAME_EXCHANGE).
    False when the system cannot; an OSError when a name is missing."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    renameat2.restype = ctypes.c_int
    if renameat2(dir_fd, os.fsencode(first), dir_fd, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    if err == errno.ENOENT:
        raise ActionRefused("gone", "the lock is gone: released or broken by someone else")
    raise OSError(err, os.strerror(err))


def _write_temp(dir_fd: int, name: str, token: str, content: bytes, mode: int) -> str:
    # `.tmp` names are never taken for locks by the scanner or the watcher.
    temp = f".{name}.lockwatch-{token[:12]}.tmp"
    fd = os.open(
        temp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        mode,
        dir_fd=dir_fd,
    )
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError:
        os.close(fd)
        os.unlink(temp, dir_fd=dir_fd)
        raise
    os.close(fd)
    return temp
