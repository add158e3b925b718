"""Breaking, stealing and releasing lock files without losing anything: the
file source's compare-and-swap (its actions: sources/files/actions.py).

Everything works through a descriptor of the lock's directory, so a path
swapped mid-action (a directory replaced by a symlink) cannot redirect it. That
directory, and the tombstone directory, are reached one component at a time
with O_NOFOLLOW (openat per component): a symlink anywhere on the way, planted
before the action or swapped in since the lock was listed, is refused, never
followed. Renames are relative to those descriptors. When the caller knows the
lock file's device and inode as it was listed, the file acted on must be that
very file: a directory replaced by another one holding the same bytes is not
the lock the operator saw.

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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NoReturn

from lockwatch.model.action import ActionFailed as ActionFailed  # re-exported: callers catch them
from lockwatch.model.action import ActionRefused as ActionRefused
from lockwatch.sources.filelocks import FileKey
from lockwatch.sources.files.scanner import (
    MAX_DIR_ENTRIES,
    MAX_LOCK_BYTES,
    link_bytes,
    listing_bytes,
)
from lockwatch.sources.files.tombstones import TOMBSTONE_DIR
from lockwatch.trusted import read_at_most

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


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


class _Symlinked(Exception):
    """A component of a path is a symlink (`where`: the path up to it)."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


class _GoesUp(Exception):
    """A relative path with a `..`: it would leave the directory it is relative to."""


class _NotOurs(Exception):
    """A component of a path is someone else's to change (`where`, and why)."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(where, why)
        self.where = where
        self.why = why


# Looks at each directory walked (its status, whether it is the last): why it will
# not do, or None.
Vet = Callable[[os.stat_result, bool], str | None]


def _open_dirs(
    path: str, *, base_fd: int | None = None, create: bool = False, vet: Vet | None = None
) -> int:
    """A descriptor of the directory `path`, reached one component at a time with
    O_NOFOLLOW, so no symlink on the way is ever followed (_Symlinked names it).
    An absolute path starts at `/`; a relative one at `base_fd` (else the current
    directory), and may not go up. `create`: missing components are made, 0700.
    `vet`: each component opened is checked on its descriptor (_NotOurs)."""
    absolute = os.path.isabs(path)
    fd = os.open("/" if absolute else ".", _DIR_FLAGS, dir_fd=None if absolute else base_fd)
    walked = "/" if absolute else ""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    try:
        for number, part in enumerate(parts, start=1):
            if part == ".." and not absolute:
                raise _GoesUp(path)
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
            try:
                inner = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(fd, part):
                    raise _Symlinked(os.path.join(walked, part)) from exc
                raise
            os.close(fd)
            fd = inner
            walked = os.path.join(walked, part)
            why = vet(os.fstat(fd), number == len(parts)) if vet is not None else None
            if why is not None:
                raise _NotOurs(walked, why)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def _directory(path: str) -> Iterator[tuple[int, str, str]]:
    """(descriptor of the lock's directory, the directory's path, the lock's name).
    The directory is reached without following any symlink: one on the way (a
    directory swapped for a link since the lock was listed) refuses the action."""
    directory, name = os.path.split(os.path.abspath(path))
    if not name or name in (".", ".."):
        raise ActionRefused("not_a_lock", f"{path} names no file")
    try:
        fd = _open_dirs(directory)
    except _Symlinked as link:
        raise ActionRefused(
            "symlink",
            f"{_link_seen(link.where)}: lockwatch never acts on a lock through one, since it"
            " could be swapped under the action; nothing done (name the real path if that is"
            " the lock you mean)",
        ) from None
    except OSError as exc:
        raise ActionRefused(
            "not_found",
            f"cannot open {directory} ({exc.strerror}): it is not there, or was being swapped"
            " as lockwatch reached it; nothing done",
        ) from exc
    try:
        yield fd, directory, name
    finally:
        os.close(fd)


def _link_seen(where: str) -> str:
    """The symlink found at `where`, in words for a refusal. Looked at again by name,
    it may be swapped back since (realpath's readlink: ENOENT, EINVAL): said so, never
    raised, or the refusal would escape as an OSError, a failure."""
    try:
        target = os.path.realpath(where)
    except OSError:
        target = where
    if target == where:  # no link there any more: a directory again, or nothing
        return f"{where} was a symlink as lockwatch reached it, swapped again since"
    return f"{where} is a symlink (to {target})"


def _gone(shown: str) -> ActionRefused:
    return ActionRefused(
        "gone", f"{shown} is gone: released, or broken by someone else a moment ago"
    )


def _read(
    dir_fd: int, name: str, shown: str, entry: str = "file", listed: FileKey | None = None
) -> bytes:
    """The lock's bytes, if it is still the kind of entry it was seen as: a
    regular file, or (only when the lock was seen as one) a symlink lock or a
    lock directory; and, when `listed` is given, still the very file (device and
    inode) that was listed."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise _gone(shown) from None
    except OSError as exc:  # nothing touched yet: a refusal, never a failure
        raise ActionRefused("unreadable", f"cannot look at {shown}: {exc.strerror}") from exc
    if listed is not None and FileKey.of(st.st_dev, st.st_ino) != listed:
        raise ActionRefused(
            "replaced",
            f"{shown} is not the file that was listed (device {listed.device}, inode"
            f" {listed.inode}): replaced since, or its directory swapped for another; nothing"
            " done",
        )
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
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise ActionRefused("not_regular_file", f"{shown} is not a regular file")
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            raise ActionRefused("replaced", f"{shown} was replaced while lockwatch read it")
        return read_at_most(fd, MAX_LOCK_BYTES)
    finally:
        os.close(fd)


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


def check(path: str, expected_sha256: str | None, *, listed: FileKey | None = None) -> bytes:
    """The lock's bytes now, if they are still those the operator saw."""
    with _directory(path) as (dir_fd, _directory_path, name):
        current = _read(dir_fd, name, path, listed=listed)
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
    """The tombstone directory, made 0700 if missing. Every component of its path
    (`trash/lw` has two) is opened with O_NOFOLLOW, so a planted `trash ->
    elsewhere` cannot carry the lock out of its directory; a relative one may not
    go up (`..`)."""
    where = configured or TOMBSTONE_DIR
    shown = where if os.path.isabs(where) else os.path.join(directory, where)
    try:
        fd = _open_dirs(where, base_fd=dir_fd, create=True, vet=_private_tombstone)
    except _NotOurs as planted:
        place = (
            planted.where
            if os.path.isabs(planted.where)
            else os.path.join(directory, planted.where)
        )
        raise ActionRefused(
            "tombstone_unsafe",
            f"the tombstone directory {shown} will not do: {place} is {planted.why}; someone"
            " else could read, swap or remove what lockwatch moves there; nothing done",
        ) from None
    except _Symlinked as link:
        place = link.where if os.path.isabs(link.where) else os.path.join(directory, link.where)
        raise ActionRefused(
            "tombstone_unsafe",
            f"the tombstone directory {shown} is reached through a symlink ({place}); lockwatch"
            " never moves a lock through one",
        ) from None
    except _GoesUp:
        raise ActionRefused(
            "tombstone_unsafe",
            f"the tombstone directory {where} goes up (..) out of the lock's directory: name"
            " an absolute path instead",
        ) from None
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


def _private_tombstone(st: os.stat_result, last: bool) -> str | None:
    """The tombstone directory must be yours and private (made 0700), as the docs
    promise: one another user made first (`mkdir -m 777 /run/lock/.lockwatch-broken`)
    is theirs. A directory on the way to it must not let others replace what is in
    it (owned by you or root, writable by others only with the sticky bit)."""
    from lockwatch.trusted import owned_problem, passage_problem

    if last:
        return owned_problem(st)
    return passage_problem(st, {os.geteuid(), 0})


def move_aside(
    path: str,
    expected_sha256: str | None,
    *,
    stamp: str,
    tombstone_dir: str | None = None,
    entry: str = "file",
    listed: FileKey | None = None,
) -> Moved:
    """Rename the lock into the tombstone directory if its bytes are as expected.
    `entry`: what it was seen as, a "file", a "symlink" lock (the link itself
    moves, never what it points to) or a lock "dir". `listed`: its device and
    inode as it was listed, when known: another file at its name is refused."""
    with _directory(path) as (dir_fd, directory, name):
        return _move_aside(
            dir_fd, directory, name, path, expected_sha256, stamp, tombstone_dir, entry, listed
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
    listed: FileKey | None = None,
) -> Moved:
    _compare(path, expected, _read(dir_fd, name, path, entry, listed))
    tomb_fd, tomb_dir = _tombstone_fd(dir_fd, directory, tombstone_dir)
    try:
        tomb_name = f"{name}@{stamp}"
        shown = os.path.join(tomb_dir, tomb_name)
        try:
            os.stat(tomb_name, dir_fd=tomb_fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        except OSError as exc:  # nothing moved yet: a refusal, never a failure
            raise ActionRefused(
                "tombstone_unwritable", f"cannot look in {tomb_dir}: {exc.strerror}"
            ) from exc
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
            moved = _read(tomb_fd, tomb_name, shown, entry, listed)
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
    _link_or_fail(
        (tomb_fd, tomb_name),
        (dir_fd, name),
        shown,
        taken=(
            "raced",
            f"{path} was rewritten while lockwatch moved it, and a new lock was taken at"
            f" its name since; the rewritten lock is kept in {shown}",
        ),
        failed=lambda why: (
            "raced",
            f"{path} was rewritten while lockwatch moved it and could not be put back"
            f" ({why}); it is kept in {shown}",
        ),
    )
    os.unlink(tomb_name, dir_fd=tomb_fd)
    os.fsync(dir_fd)
    if refusal is not None:
        raise ActionRefused(refusal.code, f"{refusal.message}; it was put back untouched")
    raise ActionRefused(
        "changed",
        f"{path} changed while lockwatch moved it; it was put back untouched",
    )


def _link_or_fail(
    source: tuple[int, str],
    target: tuple[int, str],
    tombstone: str,
    *,
    taken: tuple[str, str],
    failed: Callable[[str], tuple[str, str]],
) -> None:
    """Link `source` (a directory fd, a name in it) at `target`, never over a file
    there: else ActionFailed, its code and message `taken` when the name is taken,
    `failed(why)` when the link fails otherwise; either names `tombstone`."""
    try:
        os.link(
            source[1], target[1], src_dir_fd=source[0], dst_dir_fd=target[0], follow_symlinks=False
        )
    except FileExistsError:
        raise ActionFailed(*taken, tombstone=tombstone) from None
    except OSError as exc:
        raise ActionFailed(*failed(f"{exc.strerror}"), tombstone=tombstone) from exc


def replace(
    path: str,
    expected_sha256: str,
    new_content: bytes,
    *,
    stamp: str,
    token: str,
    tombstone_dir: str | None = None,
    listed: FileKey | None = None,
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
                dir_fd, directory, name, path, expected_sha256, stamp, tombstone_dir, "file", listed
            )
            _link_or_fail(
                (dir_fd, temp),
                (dir_fd, name),
                moved.tombstone,
                taken=(
                    "taken",
                    f"someone took {path} after its stale lock was moved to {moved.tombstone};"
                    " nothing was overwritten",
                ),
                failed=lambda why: (
                    "link_failed",
                    f"the stale lock was moved to {moved.tombstone}, but the new one could not"
                    f" be put at {path} ({why}): no lock is there now",
                ),
            )
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
