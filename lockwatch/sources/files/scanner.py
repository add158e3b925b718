"""Walk directories for lock files and read each one safely.

Safety rules: never follow a symlink (scandir's d_type, then O_NOFOLLOW), never
block (O_NONBLOCK: a FIFO named `x.lock` must not hang a scan), never read more
than MAX_LOCK_BYTES, and treat a file that vanishes mid-scan as gone.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from lockwatch.model.lock import Lock
from lockwatch.model.report import ScanError
from lockwatch.sources.files.decoders import decode_file, invalid
from lockwatch.sources.files.decoders.base import LockFile

MAX_LOCK_BYTES = 64 * 1024
LOCK_SUFFIXES = (".lock", ".pid")
TEMP_SUFFIX = ".tmp"
# Directories that hold no live locks: lockwatch's own tombstones.
SKIP_DIRS = frozenset({".lockwatch-broken"})
# Package managers' dependency lockfiles end in .lock but lock nothing.
DEPENDENCY_LOCKFILES = frozenset(
    {
        "Cargo.lock",
        "Gemfile.lock",
        "Pipfile.lock",
        "Podfile.lock",
        "bun.lock",
        "composer.lock",
        "conan.lock",
        "flake.lock",
        "mix.lock",
        "packages.lock",
        "pdm.lock",
        "poetry.lock",
        "pubspec.lock",
        "uv.lock",
        "yarn.lock",
    }
)

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


@dataclass
class ScanResult:
    locks: list[Lock] = field(default_factory=list)
    errors: list[ScanError] = field(default_factory=list)


def is_lock_name(name: str) -> bool:
    """`*.lock`, `*.pid` and a bare `.lock`; never temp files of atomic writes."""
    if name.endswith(TEMP_SUFFIX) or name in DEPENDENCY_LOCKFILES:
        return False
    return name.endswith(LOCK_SUFFIXES)


def _mtime(st: os.stat_result) -> datetime:
    return datetime.fromtimestamp(st.st_mtime, tz=UTC)


def _error(path: str, exc: OSError) -> ScanError:
    code = {
        errno.ENOENT: "not_found",
        errno.EACCES: "permission_denied",
        errno.EPERM: "permission_denied",
        errno.ENOTDIR: "not_found",
    }.get(exc.errno or 0, "unreadable")
    return ScanError(path=path, code=code, message=exc.strerror or str(exc))


def _placeholder(path: str, st: os.stat_result | None) -> LockFile:
    mtime = _mtime(st) if st is not None else datetime.fromtimestamp(0, tz=UTC)
    return LockFile(path=path, raw=b"", mtime=mtime, sha256=None)


def read_lock(path: str, result: ScanResult, *, is_symlink: bool | None = None) -> None:
    """Decode the lock at absolute `path` into `result`; vanished files are skipped."""
    if is_symlink is None:
        try:
            is_symlink = stat.S_ISLNK(os.lstat(path).st_mode)
        except FileNotFoundError:
            return
        except OSError as exc:
            result.errors.append(_error(path, exc))
            return
    if is_symlink:
        _symlink(path, result)
        return
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # became a symlink since the directory was listed
            _symlink(path, result)
        else:
            result.errors.append(_error(path, exc))
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            result.locks.append(
                invalid(
                    _placeholder(path, st),
                    "not_regular_file",
                    "not a regular file (a FIFO, socket or device)",
                )
            )
            return
        if st.st_size > MAX_LOCK_BYTES:
            result.locks.append(_too_large(path, st, st.st_size))
            return
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_LOCK_BYTES:
            chunk = os.read(fd, MAX_LOCK_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_LOCK_BYTES:  # grew after fstat
            result.locks.append(_too_large(path, st, size))
            return
    except OSError as exc:
        result.errors.append(_error(path, exc))
        return
    finally:
        os.close(fd)
    raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    lock_file = LockFile(
        path=path, raw=raw, mtime=_mtime(st), sha256=hashlib.sha256(raw).hexdigest()
    )
    result.locks.append(decode_file(lock_file))


def _too_large(path: str, st: os.stat_result, size: int) -> Lock:
    return invalid(
        _placeholder(path, st),
        "too_large",
        f"{size} bytes, over the {MAX_LOCK_BYTES}-byte limit for a lock file; not read",
    )


def _symlink(path: str, result: ScanResult) -> None:
    try:
        target: str | None = os.readlink(path)
        st: os.stat_result | None = os.lstat(path)
    except OSError:
        target, st = None, None
    result.locks.append(
        invalid(
            _placeholder(path, st),
            "symlink",
            f"a symlink (to {target!r}); lockwatch never follows links in lock directories",
            {"symlink_target": target},
        )
    )


def _walk(root: str, result: ScanResult) -> None:
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    name = entry.name
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if name not in SKIP_DIRS:
                                pending.append(entry.path)
                        elif is_lock_name(name):
                            read_lock(entry.path, result, is_symlink=entry.is_symlink())
                    except OSError as exc:
                        result.errors.append(_error(entry.path, exc))
        except FileNotFoundError:
            continue  # removed while we walked
        except OSError as exc:
            result.errors.append(_error(directory, exc))


def scan(roots: Iterable[str]) -> ScanResult:
    """Scan files and directory trees. A named root that is a lock file is read even
    without a lock suffix; a named root that is a symlinked directory is followed
    (the operator named it), links inside it are not."""
    result = ScanResult()
    seen: set[str] = set()
    for given in roots:
        root = os.path.abspath(given)
        if root in seen:
            continue
        seen.add(root)
        try:
            st = os.stat(root)
        except OSError as exc:
            if os.path.islink(root):
                _symlink(root, result)
            else:
                result.errors.append(_error(root, exc))
            continue
        if stat.S_ISDIR(st.st_mode):
            _walk(root, result)
        else:
            read_lock(root, result)
    # Nested roots ("a" and "a/b") would list the same file twice.
    unique = {lock.id: lock for lock in result.locks}
    result.locks = sorted(unique.values(), key=lambda lock: lock.id)
    return result
