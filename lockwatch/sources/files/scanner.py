"""Walk directories for lock files and read each one safely.

Safety rules: never follow a symlink (scandir's d_type, then O_NOFOLLOW), never
block (O_NONBLOCK: a FIFO named `x.lock` must not hang a scan), never read more
than MAX_LOCK_BYTES, and treat a file that vanishes mid-scan as gone.
"""

from __future__ import annotations

import errno
import hashlib
import operator
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import field
from typing import Any

from lockwatch.model.lock import Lock, Reason
from lockwatch.model.slots import fast_init, lean_dataclass
from lockwatch.model.status import ScanError
from lockwatch.sources.filelocks import FileKey
from lockwatch.sources.files import kernel_found
from lockwatch.sources.files.decoders import (
    decode_file,
    decode_native,
    decode_unread,
    generic,
    invalid,
    wanted_by_format,
    wanters,
)
from lockwatch.sources.files.decoders.base import KnownEvidence, LockFile
from lockwatch.sources.files.tombstones import TOMBSTONE_DIR
from lockwatch.sources.mounts import pseudo_mounts

MAX_LOCK_BYTES = 64 * 1024
# Names listed from inside a lock directory (MkdirLockFile keeps one file there).
MAX_DIR_ENTRIES = 64
# A hard-linked lock's other names are looked for among this many neighbours.
MAX_LINK_SEARCH = 4096
LOCK_SUFFIXES = (".lock", ".pid")
TEMP_SUFFIX = ".tmp"
# Directories that hold no live locks: lockwatch's own tombstones.
SKIP_DIRS = frozenset({TOMBSTONE_DIR})
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


@lean_dataclass
class ScanResult:
    locks: list[Lock] = field(default_factory=list)
    errors: list[ScanError] = field(default_factory=list)
    # Lock files listed though lockwatch's user may not read them (with_unread).
    unread: int = 0


@fast_init
@lean_dataclass(frozen=True, slots=True)
class Candidate:
    """A directory entry that names a lock, as the walk saw it."""

    path: str
    is_symlink: bool
    # A FIFO, socket or device: never opened (opening some devices has effects).
    is_special: bool = False
    # A directory that is a lock (`x.lock/`, the mkdir idiom): listed, not walked.
    is_dir: bool = False
    # Named by the operator (not found by a walk): listed whatever it turns out to be.
    named: bool = False


def never_a_lock(name: str) -> bool:
    """Temp files of atomic writes and dependency lockfiles, even when named."""
    return name.endswith(TEMP_SUFFIX) or name in DEPENDENCY_LOCKFILES


def is_lock_name(name: str) -> bool:
    """`*.lock`, `*.pid` and a bare `.lock`; never temp files of atomic writes."""
    return name.endswith(LOCK_SUFFIXES) and not never_a_lock(name)


def is_lock_dir(name: str) -> bool:
    """A directory made as a lock (mkdir is atomic): `x.lock/`."""
    return name.endswith(".lock") and name != ".lock"


def is_candidate(path: str, kind: str) -> bool:
    """Whether the entry at `path` ("file", "symlink" or "dir") is a lock: a lock
    name, or one a known format gives its locks (Emacs `.#x`, `.~lock.x#`, ...)."""
    return _is_candidate(path.rpartition("/")[2], path, kind)


def _is_candidate(name: str, path: str, kind: str) -> bool:
    if never_a_lock(name):
        return False
    if kind == "dir":
        return is_lock_dir(name) or wanted_by_format(path, kind)
    return name.endswith(LOCK_SUFFIXES) or wanted_by_format(path, kind)


# Whether some format names lock directories its own way (beyond `x.lock/`): if
# none does, a walk asks nothing about the directories it passes.
_DIRS_WANTED = bool(wanters("dir"))


def _error(path: str, exc: OSError) -> ScanError:
    code = {
        errno.ENOENT: "not_found",
        errno.EACCES: "permission_denied",
        errno.EPERM: "permission_denied",
        errno.ENOTDIR: "not_found",
    }.get(exc.errno or 0, "unreadable")
    return ScanError(path=path, code=code, message=exc.strerror or str(exc))


def _placeholder(path: str, st: os.stat_result | None) -> LockFile:
    return LockFile(path=path, raw=b"", mtime=st.st_mtime if st else 0.0, sha256=None)


def load(
    path: str,
    *,
    is_symlink: bool | None = None,
    is_special: bool = False,
    compact: bool = True,
    known: KnownEvidence | None = None,
) -> Lock | ScanError | None:
    """Read and decode the lock at absolute `path`: a Lock (maybe invalid), a
    ScanError when it cannot be read, or None when it vanished."""
    if is_symlink is None:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:
            return _error(path, exc)
        is_symlink = stat.S_ISLNK(mode)
        if stat.S_ISDIR(mode):
            return _directory(path)
    if is_symlink:
        return _symlink(path)
    if is_special:
        return _not_regular(path)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # became a symlink since the directory was listed
            return _symlink(path)
        if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):  # a socket or device
            return _not_regular(path)
        return _error(path, exc)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return _not_regular(path, st)
        if st.st_size > MAX_LOCK_BYTES:
            return _large(fd, path, st)
        # As much as fstat says, and a byte more to see it grew: a read of the
        # whole limit would allocate 64 KiB per file, which a large scan's heap
        # keeps in pieces long after.
        raw = os.read(fd, st.st_size + 1)
        if len(raw) != st.st_size:  # changing under us: read to the end, still bounded
            chunks = [raw]
            size = len(raw)
            while raw and size <= MAX_LOCK_BYTES:
                raw = os.read(fd, MAX_LOCK_BYTES + 1 - size)
                chunks.append(raw)
                size += len(raw)
            if size > MAX_LOCK_BYTES:
                return _too_large(path, st, size)
            raw = b"".join(chunks)
    except OSError as exc:
        return _error(path, exc)
    finally:
        os.close(fd)
    digest = hashlib.sha256(raw).hexdigest()
    links = _links(path, st) if st.st_nlink > 1 else ()
    # `_as_read`, spelt out: positional, as every regular file of a scan is made.
    key = _file_key(st)
    word = None if known is None else known(key)  # the kernel's, when known before decoding
    file = LockFile(
        path, raw, st.st_mtime, digest, key, "file", None, (), st.st_nlink, links, None, word
    )
    return decode_file(file, compact=compact)


def _as_read(path: str, st: os.stat_result, sha256: str | None, **facts: Any) -> LockFile:
    """The entry at `path` as read, with what lstat/fstat said about it."""
    key, nlink = _file_key(st), st.st_nlink
    return LockFile(path=path, mtime=st.st_mtime, sha256=sha256, key=key, nlink=nlink, **facts)


# "major:minor" of each device seen: one string per device, not one per lock file.
_DEVICES: dict[int, str] = {}


def _file_key(st: os.stat_result) -> FileKey:
    device = _DEVICES.get(st.st_dev)
    if device is None:
        device = _DEVICES[st.st_dev] = FileKey.of(st.st_dev, st.st_ino).device
    return FileKey(device, st.st_ino)


def _links(path: str, st: os.stat_result) -> tuple[str, ...]:
    """Other names of the file at `path` in its own directory, sorted (bounded:
    a claim file lives beside its lock)."""
    directory, _, name = path.rpartition("/")
    found = []
    try:
        with os.scandir(directory or "/") as entries:
            for seen, entry in enumerate(entries):
                if seen >= MAX_LINK_SEARCH:
                    break
                if entry.name != name and entry.inode() == st.st_ino:
                    try:
                        other = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if other.st_dev == st.st_dev and stat.S_ISREG(other.st_mode):
                        found.append(entry.name)
    except OSError:
        return ()
    return tuple(sorted(found))


def _large(fd: int, path: str, st: os.stat_result) -> Lock:
    """A file over the limit: a tool's own format may still claim it by its place
    (git's index.lock of a big repository), from its first bytes; no digest, as
    for any lock not read whole. Anything else is too large to be a lock."""
    head = os.read(fd, MAX_LOCK_BYTES)
    native = decode_native(_as_read(path, st, None, raw=head))
    return native if native is not None else _too_large(path, st, st.st_size)


def _too_large(path: str, st: os.stat_result, size: int) -> Lock:
    return invalid(
        _placeholder(path, st),
        "too_large",
        f"{size} bytes, over the {MAX_LOCK_BYTES}-byte limit for a lock file; not read",
    )


def _not_regular(path: str, st: os.stat_result | None = None) -> Lock:
    if st is None:
        try:
            st = os.lstat(path)
        except OSError:
            st = None
    return invalid(
        _placeholder(path, st), "not_regular_file", "not a regular file (a FIFO, socket or device)"
    )


def link_bytes(target: str) -> bytes:
    """A symlink lock as bytes (its digest is what a break compares): its text."""
    return os.fsencode(target)


def listing_bytes(entries: Iterable[str]) -> bytes:
    """A lock directory as bytes (its digest is what a break compares): the
    names inside it, sorted, NUL-separated."""
    return b"\0".join(sorted(os.fsencode(name) for name in entries))


def _symlink(path: str) -> Lock | ScanError | None:
    """A symlink is read, never followed: some formats' locks are symlinks whose
    target text names the holder (Emacs, lockfile's SymlinkLockFile)."""
    try:
        target = os.readlink(path)
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _error(path, exc)
    if not stat.S_ISLNK(st.st_mode):  # replaced since it was listed
        return load(path)
    digest = hashlib.sha256(link_bytes(target)).hexdigest()
    return decode_file(_as_read(path, st, digest, raw=b"", kind="symlink", target=target))


def _directory(path: str) -> Lock | ScanError | None:
    """A lock directory (the mkdir idiom): its mtime and the names inside it."""
    try:
        st = os.lstat(path)
        with os.scandir(path) as listing:
            names = []
            for entry in listing:
                names.append(entry.name)
                if len(names) > MAX_DIR_ENTRIES:
                    break
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _error(path, exc)
    entries = tuple(sorted(names))
    digest = hashlib.sha256(listing_bytes(entries)).hexdigest()
    locked = path[: -len(".lock")] if path.endswith(".lock") else None
    return decode_file(
        _as_read(
            path,
            st,
            digest,
            raw=b"",
            kind="dir",
            entries=entries,
            unlocked_exists=None if locked is None else os.path.lexists(locked),
        )
    )


_PSEUDO: list[frozenset[str]] = []


def _pseudo_mounts() -> frozenset[str]:
    """Where pseudo filesystems are mounted, read once per run (mountinfo)."""
    if not _PSEUDO:
        _PSEUDO.append(pseudo_mounts())
    return _PSEUDO[0]


def walks_into(name: str, path: str) -> bool:
    """Whether a walk goes into the directory `name` at `path`: never lockwatch's
    tombstones, never a pseudo filesystem (a watch's walk asks this too)."""
    return name not in SKIP_DIRS and path not in _pseudo_mounts()


def _list_dir(
    directory: str, found: list[Candidate], subdirs: list[str], errors: list[ScanError]
) -> None:
    """One level: lock files go to `found`, directories to walk go to `subdirs`.
    A pseudo filesystem's mount point (/proc, /sys, …) is never walked into: only
    a root named as such is (`_named_roots`)."""
    pseudo = _pseudo_mounts()
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                name = entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        path = entry.path
                        if name in SKIP_DIRS or path in pseudo:
                            continue
                        if (_DIRS_WANTED or name.endswith(".lock")) and _is_candidate(
                            name, path, "dir"
                        ):
                            found.append(Candidate(path, False, is_dir=True))
                        else:
                            subdirs.append(path)
                        continue
                    link = entry.is_symlink()
                    # *.lock and *.pid (most names a scan meets) are never temp files': no call.
                    listed = name.endswith(LOCK_SUFFIXES) and name not in DEPENDENCY_LOCKFILES
                    if listed or _is_candidate(name, entry.path, "symlink" if link else "file"):
                        special = not link and not entry.is_file(follow_symlinks=False)
                        found.append(Candidate(entry.path, link, special))
                    elif kernel_found.INODES and not link and kernel_found.locked(entry):
                        # Any name: the kernel holds a lock on it (listed as named).
                        found.append(Candidate(entry.path, False, named=True))
                except OSError as exc:
                    errors.append(_error(entry.path, exc))
    except FileNotFoundError:
        pass  # removed while we walked
    except OSError as exc:
        errors.append(_error(directory, exc))


def _walk(root: str, found: list[Candidate], errors: list[ScanError]) -> None:
    pending = [root]
    while pending:
        _list_dir(pending.pop(), found, pending, errors)


def _named_roots(roots: Iterable[str]) -> tuple[list[str], list[Candidate], list[ScanError]]:
    """Directories to walk and files to read, as the operator named them.

    A named file is read whatever its suffix (the operator named it), except temp
    files of atomic writes and dependency lockfiles, which a glob easily sweeps
    in. A named symlinked directory is followed; links inside it are not. A root
    inside another root, or the same directory reached through a symlink, is
    dropped, so nothing is listed twice."""
    dirs: list[str] = []
    real_dirs: list[str] = []
    files: list[Candidate] = []
    errors: list[ScanError] = []
    named = {os.path.abspath(given) for given in roots}
    # Resolved paths in order: an ancestor (however it was named) comes before
    # everything under it, so one pass drops every root it already covers.
    for real, root in sorted((os.path.realpath(root), root) for root in named):
        if never_a_lock(os.path.basename(root)):
            continue
        try:
            st = os.stat(root)
        except OSError as exc:
            if os.path.islink(root):
                files.append(Candidate(root, True))
            else:
                errors.append(_error(root, exc))
            continue
        if any(real == d or real.startswith(d.rstrip("/") + "/") for d in real_dirs):
            continue
        if stat.S_ISDIR(st.st_mode) and is_candidate(root, "dir") and not os.path.islink(root):
            files.append(Candidate(root, False, is_dir=True, named=True))  # a lock directory
        elif stat.S_ISDIR(st.st_mode):
            dirs.append(root)
            real_dirs.append(real)
        else:
            link = os.path.islink(root)
            special = not link and not stat.S_ISREG(st.st_mode)
            files.append(Candidate(root, link, special, named=True))
    return dirs, files, errors


# What a worker is handed: directories to walk whole, and files found on the way.
Area = str | Candidate
_PATH = operator.attrgetter("path")
_ID = operator.attrgetter("id")


def find_in(areas: Iterable[Area]) -> tuple[list[Candidate], list[ScanError]]:
    """Every lock file in `areas`, each once, sorted by path (and so by lock id)."""
    found: list[Candidate] = []
    errors: list[ScanError] = []
    for area in areas:
        if isinstance(area, Candidate):
            found.append(area)
        else:
            _walk(area, found, errors)
    unique = {candidate.path: candidate for candidate in found}
    return sorted(unique.values(), key=_PATH), errors


def find(roots: Iterable[str]) -> tuple[list[Candidate], list[ScanError]]:
    """Every lock file under `roots`, each once, sorted by path (and so by lock id)."""
    dirs, files, errors = _named_roots(roots)
    found, walk_errors = find_in([*dirs, *files])
    return found, errors + walk_errors


def _area_key(area: Area) -> str:
    # Files under directory d sort as one run right after d + "/": keying
    # directories that way keeps contiguous runs of areas in global path order.
    return area.path if isinstance(area, Candidate) else area + "/"


def partition(
    roots: Iterable[str], parts: int, *, enough: int = 8
) -> tuple[list[list[Area]], list[ScanError]]:
    """Split the trees under `roots` into at most `parts` runs of areas of similar
    size, so each worker walks and reads its own share.

    Directories are opened breadth-first until there are `enough` per part (or
    nothing left to open). Each run is contiguous in path order, so workers' sorted
    results joined in order are sorted too. Returns a single run when the trees
    are too small to be worth sharing.
    """
    dirs, files, errors = _named_roots(roots)
    if parts <= 1:
        return [[*dirs, *files]], errors
    areas: list[Area] = list(files)
    level = dirs
    while level and len(level) < parts * enough:
        deeper: list[str] = []
        found: list[Candidate] = []
        for directory in level:
            _list_dir(directory, found, deeper, errors)
        areas.extend(found)
        level = deeper
    areas.extend(level)
    areas.sort(key=_area_key)
    if len(areas) < parts * enough:
        return [areas], errors
    size = -(-len(areas) // parts)  # ceiling division
    return [areas[i : i + size] for i in range(0, len(areas), size)], errors


def _unclaimed(candidate: Candidate, lock: Lock) -> bool:
    """A file a walk found only because a tool names its locks so (a `.x.swp`)
    that this tool did not recognise: not a lock, and not listed (named, it is)."""
    if candidate.named or candidate.is_dir or lock.format != generic.FORMAT:
        return False
    return not is_lock_name(candidate.path.rpartition("/")[2])


def load_all(
    candidates: Iterable[Candidate],
    result: ScanResult,
    *,
    compact: bool = True,
    known: KnownEvidence | None = None,
) -> ScanResult:
    """`result` with every candidate's lock or error added (`compact`: see `load`;
    `known`: the kernel's word on a file, where a scan knows it before decoding)."""
    for c in candidates:  # each candidate's `load`, inlined: one call a file less
        if c.is_dir:
            loaded = _directory(c.path)
        else:
            link, special = c.is_symlink, c.is_special
            loaded = load(c.path, is_symlink=link, is_special=special, compact=compact, known=known)
        if isinstance(loaded, ScanError):
            result.errors.append(loaded)
        elif loaded is not None and not _unclaimed(c, loaded):
            result.locks.append(loaded)
    return result


def scan_chunks(areas: Iterable[Area], *, first: int, most: int) -> Iterator[ScanResult]:
    """Every lock in `areas`, each read as soon as the walk finds it, handed over
    in chunks as it goes: the first of `first` locks (and errors), each next one
    twice as large, up to `most`. Nothing is sorted: the first chunk comes after
    reading `first` locks, not after walking the whole tree."""
    size = max(1, first)
    chunk = ScanResult()
    found: list[Candidate] = []
    for area in areas:
        pending = [] if isinstance(area, Candidate) else [area]
        if isinstance(area, Candidate):
            found.append(area)
        while found or pending:
            if not found:
                _list_dir(pending.pop(), found, pending, chunk.errors)
            load_all(found, chunk)
            found.clear()
            if len(chunk.locks) + len(chunk.errors) >= size:
                yield chunk
                chunk = ScanResult()
                size = min(size * 2, max(most, 1))
    if chunk.locks or chunk.errors:
        yield chunk


def scan(roots: Iterable[str]) -> ScanResult:
    """Find and load every lock under `roots`; locks come sorted by id."""
    candidates, errors = find(roots)
    return with_unread(load_all(candidates, ScanResult(errors=errors)))


def with_unread(result: ScanResult) -> ScanResult:
    """`result` with each lock file its errors say lockwatch's user may not read
    listed as a row (`unread_lock`), its error dropped: a root-only lock is
    there, and a kernel lock on it is found whoever runs lockwatch. Still sorted
    by id; `result.unread` counts them."""
    errors: list[ScanError] = []
    for error in result.errors:
        lock = unread_lock(error)
        if lock is None:
            errors.append(error)
        else:
            result.locks.append(lock)
            result.unread += 1
    if result.unread:
        result.errors = errors
        result.locks.sort(key=_ID)
    return result


def unread_lock(error: ScanError) -> Lock | None:
    """The lock file at `error.path` that lockwatch's user may not read, from what
    its directory tells anyone who may search it (lstat: its inode, owner, mode,
    mtime); None for any other error, or a place that is no regular file."""
    if error.code != "permission_denied":
        return None
    try:
        st = os.lstat(error.path)
    except OSError:
        return None  # its directory cannot be searched either: the error says it
    if not stat.S_ISREG(st.st_mode):
        return None
    reason = Reason(
        "permission_denied",
        f"cannot read it ({error.message}: it is uid {st.st_uid}'s, mode"
        f" {stat.S_IMODE(st.st_mode):04o}; lockwatch runs as uid {os.geteuid()}):"
        " only a kernel lock held on it can tell who holds it",
    )
    return decode_unread(_as_read(error.path, st, None, raw=b""), reason)
