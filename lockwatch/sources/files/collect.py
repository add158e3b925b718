"""What a batch of changed paths (the watcher's, or the poller's) means for the
file feed: which lock files to read again, which lock ids are gone, which
directories to list anew, as the scanner would have found them."""

from __future__ import annotations

import bisect
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lockwatch.model.changes import Entry
from lockwatch.model.status import ScanError
from lockwatch.sources.files import ids
from lockwatch.sources.files.changes import Change, Changes
from lockwatch.sources.files.scanner import (
    ScanResult,
    find_in,
    is_candidate,
    is_lock_dir,
    load,
    load_all,
    unread_lock,
)


@dataclass(frozen=True, slots=True)
class Collected:
    """What a batch of changes came to, judged: for the feed's differ."""

    entries: list[Entry]
    gone: list[str]
    errors: list[ScanError]
    looked: tuple[str, ...] = ()  # directories listed anew, without an error


def read_changes(
    changes: Changes, known: list[str], roots: Sequence[str], file_roots: set[str]
) -> tuple[ScanResult, list[str], tuple[str, ...]]:
    """The locks the paths in `changes` hold now, read (and the errors met), the
    `known` lock ids gone, and the directories listed anew without an error.
    `roots`: the feed's roots; `file_roots`: those that are files."""
    result = ScanResult()
    gone: list[str] = []
    named = set(roots)
    dirs: list[str] = []
    dir_roots = [root.rstrip("/") + "/" for root in roots if root not in file_roots]
    known = sorted(known)
    seen: set[str] = set()
    for changed in sorted(changes):
        if changed not in named and not any(changed.startswith(d) for d in dir_roots):
            continue  # beside a file root, in a directory nobody asked about
        parent = os.path.dirname(changed)
        # Inside a lock directory, a change is that lock's (MkdirLockFile
        # writes its holder's file there after the mkdir).
        path = parent if is_lock_dir(os.path.basename(parent)) else changed
        if path in seen:
            continue
        seen.add(path)
        kind = kind_of(path)
        if kind is None:
            # Gone: the lock it was, or a directory and every lock under it.
            gone.append(ids.file_id(path))
            gone.extend(under(known, ids.file_prefix(path)))
        elif (path in named and kind != "dir") or is_candidate(path, kind):
            # Judged by what it is now, as the scanner judges it: a directory
            # named `x.pid` is walked into, not taken for a pid file.
            loaded = load(path)
            if isinstance(loaded, ScanError) and not _known(known, ids.file_id(path)):
                # Never read: a row from its place (one read before is kept as last read).
                loaded = unread_lock(loaded) or loaded
            if loaded is None:
                gone.append(ids.file_id(path))
            elif isinstance(loaded, ScanError):
                result.errors.append(loaded)
            else:
                result.locks.append(loaded)
        elif kind == "dir":
            # New, moved in, readable again, or removed and made again: what is
            # under it now is what counts (a lock file it replaced is gone).
            gone.append(ids.file_id(path))
            dirs.append(path)
        else:
            gone.append(ids.file_id(path))  # no lock now (a lock file replaced by one)
    looked: tuple[str, ...] = ()
    if dirs:
        found, errors = find_in(dirs)
        result.errors.extend(errors)
        failed = {error.path for error in errors}
        looked = tuple(directory for directory in dirs if directory not in failed)
        present = {ids.file_id(candidate.path) for candidate in found}
        # The listing looked last: what it found is there, what it did not find
        # under its directories is gone, whatever a look at one path said before.
        prefixes = tuple(ids.file_prefix(directory) for directory in dirs)
        gone = [lock_id for lock_id in gone if lock_id not in present]
        for prefix in prefixes:
            gone.extend(i for i in under(known, prefix) if i not in present)
        result.locks = [
            lock
            for lock in result.locks
            if not lock.id.startswith(prefixes) and lock.id not in present
        ]
        load_all(found, result)
    return result, gone, looked


def kind_of(path: str) -> str | None:
    """What is at `path` now, in `is_candidate`'s words ("file" for any other
    kind, as the scanner lists a fifo); None when nothing is."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        # Not to be looked at (a directory made unreadable): `load` says why, for a
        # name that is a lock's.
        return next((k for k in ("file", "symlink", "dir") if is_candidate(path, k)), "file")
    if stat.S_ISDIR(mode):
        return "dir"
    return "symlink" if stat.S_ISLNK(mode) else "file"


def with_listing(changes: Changes, listed: frozenset[str], known: Iterable[str]) -> Changes:
    """`changes`, and a look at each path `listed` and the `known` lock ids differ on."""
    shown = {path for lock_id in known if (path := ids.file_path(lock_id)) is not None}
    missing, new = shown - listed, listed - shown
    if not (missing or new):
        return changes
    out: Changes = {path: set(kinds) for path, kinds in changes.items()}
    for path in missing:
        out.setdefault(path, set()).add(Change.DELETED)
    for path in new:
        out.setdefault(path, set()).add(Change.ADDED)
    return out


def parent_name(path: str) -> str:
    return os.path.basename(os.path.dirname(path))


def _known(known: list[str], lock_id: str) -> bool:
    """Whether sorted `known` holds `lock_id`."""
    at = bisect.bisect_left(known, lock_id)
    return at < len(known) and known[at] == lock_id


def under(known: list[str], prefix: str) -> list[str]:
    """The ids in sorted `known` that start with `prefix`."""
    start = bisect.bisect_left(known, prefix)
    end = start
    while end < len(known) and known[end].startswith(prefix):
        end += 1
    return known[start:end]
