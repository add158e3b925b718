"""Polling, when inotify cannot be had (out of watches, out of instances, forced).

A pass is the scanner's own walk (never through a symlink, never out of the
roots) and one lstat per lock file, compared with the pass before: what it holds
is one small tuple per lock file, whatever else the trees hold. The feed waits
after each pass in proportion to what the pass cost (`changes.pace`), so polling a
very large tree slows down instead of taking a core.
"""

from __future__ import annotations

import errno
import os
import time

from lockwatch.model.status import failure_cause
from lockwatch.sources.files.changes import Change, Changes
from lockwatch.sources.files.roots import PinnedRoots
from lockwatch.sources.files.scanner import find

# What a rewrite changes: an atomic replace the inode, a write the size or the
# times (nanoseconds: two writes in the same second differ).
Signature = tuple[int, int, int, int, int]


class Poller:
    def __init__(self, roots: PinnedRoots) -> None:
        self._roots = roots
        self._last: dict[str, Signature] | None = None
        self.last_pass_seconds = 0.0

    @property
    def seen(self) -> frozenset[str]:
        """The lock files the last pass looked at."""
        return frozenset(self._last or ())

    def changes(self) -> Changes:
        """What changed since the last pass (nothing, the first time)."""
        started = time.monotonic()
        # Unreadable places, and roots that lead elsewhere now: the rescans report them.
        found, _ = find(self._roots.usable()[0])
        now: dict[str, Signature] = {}
        for candidate in found:
            try:
                st = os.lstat(candidate.path)
            except OSError:
                continue  # went since the walk: not there
            now[candidate.path] = (
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
                st.st_mode,
            )
        last, self._last = self._last, now
        self.last_pass_seconds = time.monotonic() - started
        if last is None:
            return {}
        out: Changes = {}
        for path, signature in now.items():
            before = last.get(path)
            if before is None:
                out[path] = {Change.ADDED}
            elif before != signature:
                out[path] = {Change.MODIFIED}
        for path in last.keys() - now.keys():
            out[path] = {Change.DELETED}
        return out


def polling_reason(exc: BaseException) -> str:
    """Why the trees are polled, for the header: `polling (<this>)`."""
    code = exc.errno if isinstance(exc, OSError) else None
    if code == errno.ENOSPC:
        return "out of inotify watches"
    if code == errno.EMFILE:
        return "out of inotify instances"
    if code == errno.ENOSYS:
        return "no inotify on this system"
    return f"cannot watch: {failure_cause(exc)}"
