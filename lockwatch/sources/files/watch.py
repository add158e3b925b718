"""Lock directories, live: filesystem events through inotify (or polling, when
inotify cannot be had: the header says why), a full rescan every so often to
reconcile anything the events missed, and a cheap check of holders' pids so a
holder that dies shows without any file changing."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import errno
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import psutil

from lockwatch.clock import Clock, SystemClock
from lockwatch.model import ids
from lockwatch.model.board import ChangeSet, Entry, judge
from lockwatch.model.kernel import FileKey
from lockwatch.model.lock import Lock
from lockwatch.model.process import ProcessLookup
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.verdict import same_host
from lockwatch.sources.feed import Differ, Emit
from lockwatch.sources.files.changes import Change, Changes, pace
from lockwatch.sources.files.evidence import Evidence, held_keys, kernel_table
from lockwatch.sources.files.inotify import Inotify, Kernel, Watcher
from lockwatch.sources.files.polling import Poller
from lockwatch.sources.files.scanner import (
    ScanResult,
    find_in,
    is_candidate,
    is_lock_dir,
    load,
    load_all,
    scan,
)
from lockwatch.sources.processes import PsutilProcesses

# Events are batched: handed over once nothing new came for STEP ms, and at the
# latest after DEBOUNCE ms of a steady stream. Both well under the 250 ms in which
# a change must be on screen.
DEBOUNCE_MS = 120
STEP_MS = 30
# A file its writer has not closed yet is read once closed, or after HOLD ms (a
# writer that keeps it open): never half-written, still within the quarter second.
HOLD_MS = 100
RESCAN_SECONDS = 30.0
LIVENESS_SECONDS = 2.0
POLLING_RESCAN_SECONDS = 2.0
# Each root is looked at (one stat) this often: a root replaced, made, or whose
# permissions came back is watched and read again within it.
ROOT_CHECK_SECONDS = 0.5
# While polling, a pass every POLL_SECONDS at most, and never more than these
# shares of a core (the poller's passes, the rescans that back it up): a very large
# tree is polled more slowly, not at a core's cost.
POLL_SECONDS = 0.1
POLL_SHARE = 0.25
POLLING_RESCAN_SHARE = 0.08
# Rescans asked for by the watcher (a root replaced, again and again) likewise.
RESCAN_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class _Collected:
    entries: list[Entry]
    gone: list[str]
    errors: list[ScanError]


class FileFeed:
    def __init__(
        self,
        roots: Sequence[str],
        *,
        host: str,
        clock: Clock | None = None,
        processes: Callable[[], ProcessLookup] = PsutilProcesses,
        rescan_seconds: float = RESCAN_SECONDS,
        liveness_seconds: float = LIVENESS_SECONDS,
        force_polling: bool | None = None,
        settle_seconds: float | None = 1.0,
        polling_rescan_seconds: float = POLLING_RESCAN_SECONDS,
        kernel_evidence: bool = True,
        hold_seconds: float = HOLD_MS / 1000,
        root_check_seconds: float = ROOT_CHECK_SECONDS,
        poll_seconds: float = POLL_SECONDS,
        inotify: Callable[[], Kernel] = Inotify,
    ) -> None:
        self.name = "files"
        self.roots = [os.path.abspath(root) for root in roots]
        self.host = host
        self.clock = clock or SystemClock()
        self._processes = processes
        self.rescan_seconds = rescan_seconds
        self.liveness_seconds = liveness_seconds
        self._force_polling = force_polling
        # Why the trees are polled rather than watched (the header says it), or None.
        self._polling: str | None = "forced" if force_polling else None
        self.settle_seconds = settle_seconds
        self.polling_rescan_seconds = polling_rescan_seconds
        self.hold_seconds = hold_seconds
        self.root_check_seconds = root_check_seconds
        self.poll_seconds = poll_seconds
        self._inotify = inotify
        self._watcher: Watcher | None = None
        self.poller: Poller | None = None
        self._differ = Differ()
        self._turn = asyncio.Lock()  # one collection at a time touches the differ
        self._armed = asyncio.Event()  # events flow (or polling began)
        self._rescan_soon = asyncio.Event()
        self._rescan_cost = 0.0
        self._files: set[str] = set()  # roots that are files, not directories
        self._root_errors: dict[str, ScanError] = {}
        # Locks as decoded from their files, before the kernel's word was added:
        # what that word is added to again when it changes.
        self._decoded: dict[str, Lock] = {}
        # Files lockwatch saw a kernel lock on in this run: pid files among them
        # follow the kernel once it is released.
        self._was_held: set[FileKey] = set()
        self.kernel_evidence = kernel_evidence

    # -- the loops ---------------------------------------------------------------

    async def run(self, emit: Emit) -> None:
        ready = asyncio.Event()
        # Made before the first scan: it takes the roots' measure now, so a root
        # replaced or made unreadable from here on is one it sees change.
        watcher = None if self._force_polling else self._new_watcher(ready)
        try:
            await self.rescan(emit)
            # One task group: if one loop fails, the others stop with it.
            async with asyncio.TaskGroup() as group:
                group.create_task(self._watch(emit, watcher, ready))
                group.create_task(self._rescan_loop(emit))
                group.create_task(self._liveness_loop(emit))
        finally:
            if isinstance(watcher, Watcher):
                watcher.close()

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.close()

    @property
    def watching(self) -> Watcher | None:
        """The inotify watcher, while events flow (None while polling)."""
        return self._watcher

    async def rescan(self, emit: Emit) -> None:
        """Read everything again; what the events missed is put right here."""
        async with self._turn:
            now = self.clock.now()
            started = time.monotonic()
            watcher = self._watcher
            mark = None if watcher is None else watcher.mark()
            # Diffed in the thread too: comparing 10,000 entries is not the UI's work.
            collected, (upserts, removed) = await asyncio.to_thread(self._scan_all, watcher, mark)
            self._rescan_cost = time.monotonic() - started
            self._existing_roots()
            self._root_errors = {e.path: e for e in collected.errors if e.path in self.roots}
            emit(self._change(now, upserts, removed, collected.errors, all_errors=True))

    async def _rescan_loop(self, emit: Emit) -> None:
        # Once soon after start, and once the watches are in place: a lock written
        # between the first scan and then would otherwise wait for the next rescan.
        if self.settle_seconds is not None:
            await asyncio.sleep(self.settle_seconds)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._armed.wait(), timeout=self.rescan_seconds)
            await self.rescan(emit)
        loop = asyncio.get_running_loop()
        while True:
            finished = loop.time()
            # Polling stat()s lock files: a rewrite within the kernel's timestamp
            # granularity, same size, same inode, is put right by these rescans.
            every = self.rescan_seconds
            share = RESCAN_SHARE
            if self._polling is not None:
                every = min(every, self.polling_rescan_seconds)
                share = POLLING_RESCAN_SHARE
            gap = pace(self._rescan_cost, 0.0, share)
            # The watcher asking (a root replaced, events lost), or the fall back to
            # polling, wakes this loop: but never sooner than the gap a rescan costs.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rescan_soon.wait(), timeout=max(every, gap))
            await asyncio.sleep(max(0.0, finished + gap - loop.time()))
            self._rescan_soon.clear()
            await self.rescan(emit)

    def _new_watcher(self, ready: asyncio.Event) -> Watcher | Exception:
        loop = asyncio.get_running_loop()

        def notify() -> None:  # from the watcher's thread
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody to tell
                loop.call_soon_threadsafe(ready.set)

        try:
            return Watcher(
                self.roots,
                notify,
                kernel=self._inotify,
                step_seconds=STEP_MS / 1000,
                debounce_seconds=DEBOUNCE_MS / 1000,
                hold_seconds=self.hold_seconds,
                root_check_seconds=self.root_check_seconds,
            )
        except Exception as exc:  # noqa: BLE001 - no inotify to be had (out of instances, say)
            return exc

    async def _watch(
        self, emit: Emit, watcher: Watcher | Exception | None, ready: asyncio.Event
    ) -> None:
        if watcher is None:
            await self._poll(emit, "forced")
            return
        if isinstance(watcher, Exception):
            await self._poll(emit, polling_reason(watcher))
            return
        self._watcher = watcher
        watcher.start()
        try:
            while not watcher.stopped:
                await ready.wait()
                ready.clear()
                if watcher.armed:
                    self._armed.set()
                batch = watcher.take()
                if batch.rescan:
                    self._rescan_soon.set()
                if batch.changes:
                    await self._changed(batch.changes, emit)
        finally:
            watcher.close()
            self._watcher = None
        if watcher.failure is None:
            return  # closed
        # Out of watches (a big tree): polling still works. Rescans go on.
        await self._poll(emit, polling_reason(watcher.failure))

    async def _poll(self, emit: Emit, why: str) -> None:
        """Our own scanner's walk, over and over, paced by what a pass costs."""
        fell_back = self._polling is None
        self._polling = why
        self._armed.set()
        if fell_back:
            self._rescan_soon.set()  # at once: what the watcher missed, and the header
        self.poller = poller = Poller(self.roots)
        while True:
            started = time.monotonic()
            changes = await asyncio.to_thread(poller.changes)
            if changes:
                await self._changed(changes, emit)
            await asyncio.sleep(pace(time.monotonic() - started, self.poll_seconds, POLL_SHARE))

    async def _changed(self, changes: Changes, emit: Emit) -> None:
        async with self._turn:
            now = self.clock.now()
            known = list(self._differ.entries)
            collected = await asyncio.to_thread(self._collect_changes, changes, known)
            upserts, removed = self._differ.partial(collected.entries, collected.gone)
            if upserts or removed or collected.errors:
                emit(self._change(now, upserts, removed, collected.errors))

    async def _liveness_loop(self, emit: Emit) -> None:
        while True:
            await asyncio.sleep(self.liveness_seconds)
            await self.recheck_holders(emit)

    async def recheck_holders(self, emit: Emit) -> None:
        """Judge again the locks whose holder pid started or stopped running, or
        whose kernel lock was taken or released."""
        async with self._turn:
            entries = list(self._differ.entries.values())
            local = [
                entry
                for entry in entries
                if entry.lock.holder.pid is not None
                and (entry.lock.holder.host is None or same_host(entry.lock.holder.host, self.host))
            ]
            if not entries:
                return
            now = self.clock.now()

            def recheck() -> list[Entry]:
                # One look at /proc/locks (and the fds) serves both checks.
                evidence = self._evidence()
                kernel = {e.lock.id: e for e in self._recheck_kernel(entries, evidence)}
                pids = [e for e in self._recheck(local, evidence) if e.lock.id not in kernel]
                dirs = [e for e in self._recheck_dirs(entries, evidence) if e.lock.id not in kernel]
                return [*kernel.values(), *pids, *dirs]

            fresh = await asyncio.to_thread(recheck)
            upserts, _ = self._differ.partial(fresh, ())
            if upserts:
                emit(self._change(now, upserts))

    def _change(
        self,
        now: datetime,
        upserts: Sequence[Entry],
        removed: Sequence[str] = (),
        errors: Sequence[ScanError] = (),
        *,
        all_errors: bool = False,
    ) -> ChangeSet:
        return ChangeSet(
            self.name,
            now,
            self.statuses(now),
            upserts=tuple(upserts),
            removed=tuple(removed),
            errors=tuple(errors),
            all_errors=all_errors,
        )

    # -- work done in threads ------------------------------------------------------

    def _scan_all(
        self, watcher: Watcher | None = None, mark: int | None = None
    ) -> tuple[_Collected, tuple[list[Entry], list[str]]]:
        try:
            result = scan(self.roots)
        finally:
            busy = None if watcher is None or mark is None else watcher.busy_since(mark)
        kept: list[Entry] = []
        if busy:
            # Written while this scan read, or not closed by its writer yet: what the
            # scan read may be half of it. The watcher hands these over next; till
            # then what was shown stays.
            busy |= {os.path.dirname(p) for p in busy if is_lock_dir(_parent_name(p))}
            result.locks = [lock for lock in result.locks if lock.path not in busy]
            kept = [e for e in self._differ.entries.values() if e.lock.path in busy]
        collected = self._judged(result, [])
        return collected, self._differ.full([*collected.entries, *kept])

    def _collect_changes(self, changes: Changes, known: list[str]) -> _Collected:
        result = ScanResult()
        gone: list[str] = []
        named = set(self.roots)
        dirs: list[str] = []
        dir_roots = [root.rstrip("/") + "/" for root in self.roots if root not in self._files]
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
            if _maybe_lock(path) or (path in named and not os.path.isdir(path)):
                loaded = load(path)
                if loaded is None:
                    gone.append(ids.file_id(path))
                elif isinstance(loaded, ScanError):
                    result.errors.append(loaded)
                else:
                    result.locks.append(loaded)
            elif os.path.isdir(path) and not os.path.islink(path):
                # New, moved in, readable again, or removed and made again: what is
                # under it now is what counts.
                dirs.append(path)
            elif Change.DELETED in changes[changed]:
                # A directory went (or was renamed away): every lock under it went too.
                gone.extend(_under(known, ids.file_prefix(path)))
        if dirs:
            found, errors = find_in(dirs)
            result.errors.extend(errors)
            load_all(found, result)
            present = {ids.file_id(candidate.path) for candidate in found}
            for directory in dirs:
                under = _under(known, ids.file_prefix(directory))
                gone.extend(lock_id for lock_id in under if lock_id not in present)
        return self._judged(result, gone)

    def _judged(self, result: ScanResult, gone: list[str]) -> _Collected:
        for lock_id in gone:
            self._decoded.pop(lock_id, None)
        for lock in result.locks:
            self._decoded[lock.id] = lock
        locks = self._evidence().attach(result.locks)
        # Process facts are looked up after the files were read: a holder alive
        # when it wrote its lock is then in the process listing.
        entries = judge(locks, self._processes(), self.clock.now(), self.host)
        return _Collected(entries, gone, result.errors)

    def _evidence(self) -> Evidence:
        table = kernel_table() if self.kernel_evidence else None
        self._was_held |= held_keys(table)
        return Evidence(table, was_held=self._was_held)

    def _recheck_kernel(self, entries: Sequence[Entry], evidence: Evidence) -> list[Entry]:
        """Judge again the locks whose kernel evidence moved (a lock taken or
        released, a new opener), with the file as it was decoded."""
        if evidence.table is None:
            return []
        decoded = [
            self._decoded[entry.lock.id] for entry in entries if entry.lock.id in self._decoded
        ]
        fresh = evidence.attach(decoded)
        by_id = {entry.lock.id: entry for entry in entries}
        moved = [lock for lock in fresh if _kernel_view(lock) != _kernel_view(by_id[lock.id].lock)]
        if not moved:
            return []
        return judge(moved, self._processes(), self.clock.now(), self.host)

    def _recheck_dirs(self, entries: Sequence[Entry], evidence: Evidence) -> list[Entry]:
        """Lock directories listed again: a file written inside one just after
        its mkdir may come before the watch on it does (cheap: a listing each)."""
        changed = []
        for entry in entries:
            if entry.lock.entry != "dir" or entry.lock.path is None:
                continue
            loaded = load(entry.lock.path)
            if isinstance(loaded, Lock) and loaded.sha256 != entry.lock.sha256:
                self._decoded[loaded.id] = loaded
                changed.append(loaded)
        if not changed:
            return []
        locks = evidence.attach(changed)
        return judge(locks, self._processes(), self.clock.now(), self.host)

    def _recheck(self, entries: list[Entry], evidence: Evidence) -> list[Entry]:
        if not entries:
            return []
        listed = set(psutil.pids())
        pids = {entry.lock.holder.pid for entry in entries} & listed
        # A zombie has exited: its pid is listed until it is reaped, but it holds nothing.
        running = {pid for pid in pids if pid is not None and not _zombie(pid)}
        moved = [
            entry.lock
            for entry in entries
            if entry.lock.holder.pid is not None
            and (entry.lock.holder.pid in running) != bool(entry.verdict.alive)
        ]
        if not moved:
            return []
        # Judged as decoded, with the kernel's word as it is now.
        decoded = [self._decoded.get(lock.id, lock) for lock in moved]
        locks = evidence.attach(decoded)
        return judge(locks, self._processes(), self.clock.now(), self.host)

    # -- status ------------------------------------------------------------------

    def _existing_roots(self) -> list[str]:
        existing = [root for root in self.roots if os.path.exists(root)]
        self._files = {root for root in existing if not os.path.isdir(root)}
        return existing

    def statuses(self, at: datetime) -> tuple[SourceStatus, ...]:
        out = []
        for root in self.roots:
            error = self._root_errors.get(root)
            if error is not None and error.code == "not_found":
                out.append(SourceStatus("file", root, "error", reason="does not exist"))
            elif error is not None:
                out.append(SourceStatus("file", root, "error", reason=error.message))
            elif not os.path.exists(root):
                out.append(SourceStatus("file", root, "error", reason="does not exist"))
            elif self._polling is not None:
                out.append(
                    SourceStatus("file", root, "polling", reason=self._polling, updated_at=at)
                )
            else:
                out.append(SourceStatus("file", root, "watching", updated_at=at))
        return tuple(out)


def _kernel_view(lock: Lock) -> tuple[object, ...]:
    """What of the kernel's word changes a verdict: who holds, who has it open
    (and who works on what it guards)."""
    evidence = lock.evidence
    if evidence is None:
        return (lock.users,)
    return (
        tuple((hold.holder_pid, hold.type, hold.mode) for hold in evidence.holds),
        evidence.waiters,
        evidence.open_by,
        evidence.was_held,
        lock.users,
    )


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True  # gone since it was listed
    except psutil.Error:
        return False  # not ours to inspect, but there


def _maybe_lock(path: str) -> bool:
    """Whether `path` names a lock, whatever it is (or was: it may be gone)."""
    return any(is_candidate(path, kind) for kind in ("file", "symlink", "dir"))


def _parent_name(path: str) -> str:
    return os.path.basename(os.path.dirname(path))


def _under(known: list[str], prefix: str) -> list[str]:
    """The ids in sorted `known` that start with `prefix`."""
    start = bisect.bisect_left(known, prefix)
    end = start
    while end < len(known) and known[end].startswith(prefix):
        end += 1
    return known[start:end]


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


def failure_cause(exc: BaseException) -> str:
    """What went wrong, in words. Failures may arrive wrapped in exception groups
    ("unhandled errors in a TaskGroup (1 sub-exception)", which named no cause):
    the exceptions inside are the cause, named with their type."""
    leaves: list[BaseException] = []
    pending = [exc]
    while pending and len(leaves) < 3:
        current = pending.pop(0)
        if isinstance(current, BaseExceptionGroup):
            pending[:0] = current.exceptions
        else:
            leaves.append(current)
    if not leaves:
        return type(exc).__name__
    words = [
        f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__ for leaf in leaves
    ]
    return "; ".join(dict.fromkeys(words))
