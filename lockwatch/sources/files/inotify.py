"""Filesystem events from Linux inotify: one watch per directory under the roots.

Not watchfiles: its recursive watcher follows a symlink to a directory (a `link ->
/` in a root had it watch the whole filesystem, then its poller walk it every
100 ms) and dies on the first file name that is not UTF-8. Here the directories
come from a walk with the scanner's rules (never through a symlink, never out of
the roots, never into lockwatch's tombstones), every watch below a root is added
with IN_DONT_FOLLOW | IN_ONLYDIR, and names are decoded with surrogateescape, so
no name can stop the watcher.

All inotify state lives in one thread: it reads the events, watches directories
as they appear, re-arms a root that was replaced (or whose permissions changed),
batches what changed and hands it over through `take()`. The thread never touches
the feed; the feed never touches inotify. The kernel's flags and the inotify
instance itself are in inotify_kernel.py.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import select
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lockwatch.sources.files.changes import Change, Changes, merge
from lockwatch.sources.files.inotify_kernel import (
    IN_ATTRIB,
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_DELETE_SELF,
    IN_DONT_FOLLOW,
    IN_EXCL_UNLINK,
    IN_IGNORED,
    IN_ISDIR,
    IN_MODIFY,
    IN_MOVE_SELF,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_ONLYDIR,
    IN_Q_OVERFLOW,
    IN_UNMOUNT,
    Event,
    Inotify,
    Kernel,
)
from lockwatch.sources.files.scanner import SKIP_DIRS, is_candidate, never_a_lock, walks_into

EVENTS = (
    IN_CREATE
    | IN_DELETE
    | IN_MODIFY
    | IN_CLOSE_WRITE
    | IN_ATTRIB
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
# A root named through a symlink is followed, as the scanner follows it; nothing below.
ROOT_MASK = EVENTS | IN_ONLYDIR | IN_EXCL_UNLINK
BELOW_MASK = ROOT_MASK | IN_DONT_FOLLOW

# add_watch failing for one directory: it went, became a symlink or cannot be read
# (the scanner reports it). Anything else (ENOSPC: out of watches) stops the watcher.
_SKIPPABLE = frozenset(
    {errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.ELOOP, errno.ENAMETOOLONG}
)


@dataclass(frozen=True, slots=True)
class Batch:
    changes: Changes
    # Read everything again: a root was replaced, came back or changed permissions,
    # or the kernel's queue overflowed and events were lost.
    rescan: bool


# What a root looked like when last checked: the directory watched for it (the root,
# or a file root's directory), its identity and mode; or why it could not be looked at.
_Health = tuple[str, int, int, int] | tuple[str, int]


class Watcher:
    """Watches the directories under `roots` in a thread of its own; `notify` is
    called (from that thread) whenever `take()` has something, or the thread stopped
    (`failure` then says why, when it was not `close()`)."""

    def __init__(
        self,
        roots: Sequence[str],
        notify: Callable[[], None],
        *,
        kernel: Callable[[], Kernel] = Inotify,
        step_seconds: float,
        debounce_seconds: float,
        hold_seconds: float,
        root_check_seconds: float,
        moved: Callable[[str], object | None] | None = None,
    ) -> None:
        # The scanner's order: an ancestor first, the first name of a directory kept.
        self._roots = [root for _, root in sorted((os.path.realpath(r), r) for r in roots)]
        self._notify = notify
        self._step = step_seconds
        self._debounce = debounce_seconds
        self._hold = hold_seconds
        self._root_check = root_check_seconds
        # Whether a root leads elsewhere than when the feed started (not None: why):
        # such a root is not watched (see roots.py).
        self._moved = moved
        self._paths: dict[int, str] = {}  # watch descriptor -> directory
        self._wds: dict[str, int] = {}  # directory -> watch descriptor
        # Watched directory -> its watched subdirectories: the one, or a set of
        # several (most have one; a set for each would cost a large tree more
        # than the paths). Keyed by the directory's own string in `_paths`.
        self._children: dict[str, str | set[str]] = {}
        self._flat: set[int] = set()  # a file root's directory: its subdirectories are not watched
        self._targets: dict[str, str] = {}  # root -> the directory watched for it
        # Measured now, before the feed's first scan: any change from here on is seen.
        self._health = {root: self._health_of(root) for root in self._roots}
        # Directories watched for a root that were symlinks at start (a root named
        # through one): followed. Any other is watched with IN_DONT_FOLLOW, so a
        # root swapped for a symlink between its check and its watch is refused.
        self._follow = {h[0] for h in self._health.values() if len(h) == 4 and os.path.islink(h[0])}
        # Events not handed over yet, and paths a writer has open (not closed since
        # it created or modified them): read then, they may be half-written.
        self._pending: Changes = {}
        self._writing: dict[str, float] = {}
        self._first: float | None = None
        self._last = 0.0
        self._rescan = False
        self._check_now = False
        self._resync = False
        # Shared with the feed's thread, under the lock.
        self._lock = threading.Lock()
        self._ready: Changes = {}
        self._ready_rescan = False
        self._closing = False
        self._closed = False
        # A rescan reading the trees asks, once done, which paths had events since it
        # began or are still to be handed over (`busy_since`): its word on them is
        # not the last (it may have read a file half-written).
        self._rescans = 0
        self._seq = 0
        self._touched: dict[str, int] = {}
        self._asked: dict[int, int] = {}  # request -> the rescan's mark
        self._answers: dict[int, set[str]] = {}
        self._requests = 0
        self._answered = threading.Condition(self._lock)
        self.armed = False  # every root that exists was watched once
        self.failure: Exception | None = None
        self.stopped = False
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            self._kernel = kernel()  # OSError: EMFILE when out of inotify instances
        except BaseException:
            os.close(self._wake_r)
            os.close(self._wake_w)
            raise
        self._thread = threading.Thread(target=self._run, name="lockwatch-inotify", daemon=True)

    # -- the feed's side -------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        with self._lock:
            self._closing = True
            if not self._closed:
                with contextlib.suppress(OSError):
                    os.write(self._wake_w, b"x")
        if not self._thread.is_alive() and not self._thread.ident:
            self._release()  # never started

    def take(self) -> Batch:
        with self._lock:
            batch = Batch(self._ready, self._ready_rescan)
            self._ready = {}
            self._ready_rescan = False
        return batch

    @property
    def watches(self) -> int:
        return len(self._paths)

    def mark(self) -> int:
        """A rescan begins: from here on, paths with events are remembered."""
        with self._lock:
            self._rescans += 1
            return self._seq

    def busy_since(self, mark: int, timeout: float = 1.0) -> set[str] | None:
        """The rescan that took `mark` is done reading: the paths that had events
        since (every event the kernel queued till now, read first), or that are
        still to be handed over. None when the watcher did not answer in time."""
        with self._lock:
            self._requests += 1
            request = self._requests
            self._asked[request] = mark
            if not self._closed:
                with contextlib.suppress(OSError):
                    os.write(self._wake_w, b"x")
            self._answered.wait_for(lambda: request in self._answers or self.stopped, timeout)
            self._asked.pop(request, None)
            self._rescans -= 1
            if not self._rescans:
                self._touched.clear()
            return self._answers.pop(request, None)

    # -- the thread ------------------------------------------------------------------

    def _run(self) -> None:
        try:
            for root in self._roots:
                health = self._health[root]
                if len(health) == 4 and root not in self._targets:
                    self._arm(root, str(health[0]))
            self.armed = True
            self._notify()
            poller = select.poll()
            poller.register(self._kernel.fileno(), select.POLLIN)
            poller.register(self._wake_r, select.POLLIN)
            next_check = time.monotonic() + self._root_check
            while not self._closing:
                wake_at = next_check
                flush_at = self._flush_at()
                if flush_at is not None:
                    wake_at = min(wake_at, flush_at)
                timeout = max(0, math.ceil((wake_at - time.monotonic()) * 1000))
                for fd, _ in poller.poll(timeout):
                    if fd == self._wake_r:
                        with contextlib.suppress(OSError):
                            os.read(self._wake_r, 64)
                    else:
                        self._handle(self._kernel.read(), time.monotonic())
                now = time.monotonic()
                if self._check_now or now >= next_check:
                    self._check_now = False
                    self._check_roots()
                    next_check = now + self._root_check
                if self._resync:
                    self._resync = False
                    self._rewalk()
                if self._asked:
                    self._answer()
                self._flush(time.monotonic())
        except Exception as exc:  # noqa: BLE001 - whatever stops it, the feed must know
            self.failure = exc
        finally:
            self._release()
            with self._lock:
                self.stopped = True
                self._answered.notify_all()
            self._notify()

    def _answer(self) -> None:
        for _ in range(16):  # what the kernel queued till now, not a stream without end
            events = self._kernel.read()
            if not events:
                break
            self._handle(events, time.monotonic())
        with self._lock:
            waiting = set(self._pending) | set(self._writing) | set(self._ready)
            for request, mark in self._asked.items():
                touched = {path for path, seq in self._touched.items() if seq > mark}
                self._answers[request] = waiting | touched
            self._answered.notify_all()

    def _release(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for fd in (self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            with contextlib.suppress(OSError):
                self._kernel.close()

    # -- events ----------------------------------------------------------------------

    def _handle(self, events: list[Event], now: float) -> None:
        for event in events:
            if event.mask & IN_Q_OVERFLOW:
                self._resync = True  # events were lost: watch again, read again
                continue
            directory = self._paths.get(event.wd)
            if directory is None:
                continue  # a watch already dropped
            if event.mask & IN_IGNORED:
                self._forget(event.wd)
                continue
            if not event.name:
                self._itself(directory, event.mask)
                continue
            path = os.path.join(directory, event.name)
            if event.mask & IN_ISDIR:
                self._directory(event.wd, path, event.name, event.mask, now)
            elif not never_a_lock(event.name):
                self._file(path, event.mask, now)

    def _itself(self, directory: str, mask: int) -> None:
        """An event about a watched directory itself. A subdirectory's are told by
        its parent too; a root's mean it went, moved or changed permissions."""
        if directory in self._targets.values() and mask & (
            IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_ATTRIB
        ):
            self._check_now = True

    def _directory(self, wd: int, path: str, name: str, mask: int, now: float) -> None:
        if name in SKIP_DIRS:
            return
        if wd in self._flat:
            # Beside a file root: only the named file matters (a directory by its name).
            if mask & (IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM):
                self._check_now = True
            return
        if mask & (IN_DELETE | IN_MOVED_FROM):
            self._unwatch_tree(path)
            self._record(path, Change.DELETED, now)
        elif mask & (IN_CREATE | IN_MOVED_TO) or (mask & IN_ATTRIB and path not in self._wds):
            # New, moved in, or one that could not be watched whose permissions changed
            # (it may be readable now): watched all the way down, its locks looked for.
            self._watch_tree(path)
            self._record(path, Change.ADDED, now)
        elif mask & IN_ATTRIB:
            # Its permissions changed: the locks under it may be unreadable now (then
            # unknown, not gone) or readable again. Its watch stays either way.
            self._record(path, Change.MODIFIED, now)

    def _file(self, path: str, mask: int, now: float) -> None:
        if mask & (IN_CREATE | IN_MOVED_TO):
            kind = Change.ADDED
        elif mask & (IN_DELETE | IN_MOVED_FROM):
            kind = Change.DELETED
        else:
            kind = Change.MODIFIED
        if mask & (IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO):
            self._writing.pop(path, None)
        elif mask & IN_MODIFY or (mask & IN_CREATE and _empty_file(path)):
            # Created empty or written in place: the writer may not be done. Read it
            # when it closes the file, or after `hold` (a writer keeping it open).
            self._writing.setdefault(path, now)
        self._record(path, kind, now)

    def _record(self, path: str, kind: Change, now: float) -> None:
        if self._rescans:
            with self._lock:
                self._seq += 1
                self._touched[path] = self._seq
        self._pending.setdefault(path, set()).add(kind)
        if self._first is None:
            self._first = now
        self._last = now

    def _flush_at(self) -> float | None:
        times = []
        if self._first is not None:
            times.append(min(self._last + self._step, self._first + self._debounce))
        if self._writing:
            times.append(min(self._writing.values()) + self._hold)
        return min(times) if times else None

    def _flush(self, now: float) -> None:
        """Hand over what settled: everything once no event came for `step` (or
        `debounce` into a steady stream), but a file still being written only once
        it is closed or `hold` passed."""
        due = self._first is not None and now >= min(
            self._last + self._step, self._first + self._debounce
        )
        out: Changes = {}
        for path in list(self._pending):
            since = self._writing.get(path)
            if since is not None and now < since + self._hold:
                continue
            if since is None and not due:
                continue
            out[path] = self._pending.pop(path)
            self._writing.pop(path, None)
        for path in [p for p in self._writing if p not in self._pending]:
            del self._writing[path]
        if due:
            self._first = None
        if not out and not self._rescan:
            return
        with self._lock:
            merge(self._ready, out)
            self._ready_rescan |= self._rescan
        self._rescan = False
        self._notify()

    # -- roots -------------------------------------------------------------------------

    def _check_roots(self) -> None:
        """Each root looked at again (one stat): one replaced, made, removed or whose
        permissions changed is watched anew and read again."""
        for root in self._roots:
            health = self._health_of(root)
            old = self._health.get(root)
            self._health[root] = health
            changed = health != old
            target = self._targets.get(root)
            if target is not None and target not in self._wds:
                # Its watch went with its directory: replaced, maybe by one that got
                # the same inode number (rm -rf d && mkdir d often does).
                del self._targets[root]
                target = None
                changed = True
            if len(health) == 2:  # missing or unreachable: nothing to watch
                if target is not None:
                    self._drop_target(root)
                self._rescan |= changed
                continue
            if target is not None and not changed:
                continue
            if target is not None and old is not None and old[:3] == health[:3]:
                # The same directory, its mode changed: what could not be listed may be now.
                self._watch_tree(target, below=target not in self._flat_dirs(), root=True)
                self._rescan = True
                continue
            if target is not None:
                self._drop_target(root)
            # New, replaced, or there but not watched yet (its watch could not be
            # added: again, until it can).
            self._arm(root, str(health[0]))
            self._rescan |= changed or root in self._targets

    def _health_of(self, root: str) -> _Health:
        health = _health_of(root)
        # Asked after the stat: a root swapped between the two is caught either way.
        if self._moved is not None and self._moved(root) is not None:
            return ("", errno.ELOOP)  # not to be followed: as good as not there
        return health

    def _arm(self, root: str, directory: str) -> None:
        below = directory == root
        if directory in self._wds:
            # Already watched for another root (a file beside it, a root inside it).
            self._targets[root] = directory
            return
        if self._watch_tree(directory, below=below, root=True):
            self._targets[root] = directory
            if not below:
                self._flat.add(self._wds[directory])

    def _drop_target(self, root: str) -> None:
        directory = self._targets.pop(root)
        if directory not in self._targets.values():
            wd = self._wds.get(directory)
            self._flat.discard(wd if wd is not None else -1)
            self._unwatch_tree(directory)

    def _rewalk(self) -> None:
        """After lost events: every root walked again for directories not watched
        yet (watching one twice is harmless), and everything read again."""
        flat = self._flat_dirs()
        for directory in set(self._targets.values()):
            self._watch_tree(directory, below=directory not in flat, root=True)
        self._rescan = True

    def _flat_dirs(self) -> set[str]:
        return {self._paths[wd] for wd in self._flat if wd in self._paths}

    # -- watches -----------------------------------------------------------------------

    def _watch_tree(self, top: str, *, below: bool = True, root: bool = False) -> bool:
        """Watch `top` and, with `below`, every directory under it as the scanner
        walks them; False when `top` itself could not be watched."""
        if not self._add(top, ROOT_MASK if root and top in self._follow else BELOW_MASK):
            return False
        if not below or (not root and is_candidate(top, "dir")):
            return True  # a lock directory (x.lock/): the names in it, not deeper
        pending = [top]
        while pending:
            for subdirectory in _subdirectories(pending.pop()):
                if self._add(subdirectory, BELOW_MASK) and not is_candidate(subdirectory, "dir"):
                    pending.append(subdirectory)
        return True

    def _add(self, path: str, mask: int) -> bool:
        """Watch `path`; whether to go on below it."""
        try:
            wd = self._kernel.add_watch(path, mask)
        except OSError as exc:
            if exc.errno in _SKIPPABLE:
                return False
            raise
        known = self._paths.get(wd)
        if known is not None:
            # Watched already: under this name (walked again), or under another (one
            # directory mounted twice; once is enough, and a mount loop ends here).
            return known == path
        self._paths[wd] = path
        self._wds[path] = wd
        self._adopt(path)
        return True

    def _adopt(self, path: str) -> None:
        """`path` among its watched parent's children (a root's parent is none)."""
        parent_wd = self._wds.get(os.path.dirname(path))
        if parent_wd is None:
            return
        parent = self._paths[parent_wd]
        if parent == path:
            return  # "/"
        known = self._children.get(parent)
        if known is None or known == path:
            self._children[parent] = path
        elif isinstance(known, set):
            known.add(path)
        else:
            self._children[parent] = {known, path}

    def _disown(self, path: str) -> None:
        parent = os.path.dirname(path)
        known = self._children.get(parent)
        if known == path:
            del self._children[parent]
        elif isinstance(known, set):
            known.discard(path)
            if len(known) == 1:
                self._children[parent] = known.pop()

    def _unwatch_tree(self, top: str) -> None:
        pending = [top]
        while pending:
            path = pending.pop()
            below = self._children.pop(path, ())
            if isinstance(below, str):
                pending.append(below)
            else:
                pending.extend(below)
            wd = self._wds.pop(path, None)
            if wd is None:
                continue
            self._paths.pop(wd, None)
            self._flat.discard(wd)
            with contextlib.suppress(OSError):  # already gone with its directory
                self._kernel.rm_watch(wd)
        self._disown(top)

    def _forget(self, wd: int) -> None:
        """The kernel dropped a watch (its directory went)."""
        path = self._paths.pop(wd)
        self._flat.discard(wd)
        if self._wds.get(path) == wd:
            del self._wds[path]
        if path in self._targets.values():
            self._check_now = True


def _health_of(root: str) -> _Health:
    """The directory watched for `root` (itself, or a file root's directory), with
    its device, inode and mode; or ("", errno) when there is none to watch."""
    try:
        st = os.stat(root)
        if not stat.S_ISDIR(st.st_mode):
            directory = os.path.dirname(root)
            st = os.stat(directory)
            return (directory, st.st_dev, st.st_ino, st.st_mode)
        return (root, st.st_dev, st.st_ino, st.st_mode)
    except OSError as exc:
        return ("", exc.errno or 0)


def _empty_file(path: str) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == 0


def _subdirectories(directory: str) -> list[str]:
    """The directories in `directory` the scanner would walk into: never a symlink,
    never lockwatch's tombstones. None when it is gone or not ours to list (the
    scanner says so)."""
    found = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False) and walks_into(entry.name, entry.path):
                        found.append(entry.path)
    except OSError:
        return []
    return found
