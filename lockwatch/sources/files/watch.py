"""Lock directories, live: filesystem events through watchfiles, a full rescan
every so often to reconcile anything the events missed, and a cheap check of
holders' pids so a holder that dies shows without any file changing."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import psutil
import watchfiles

from lockwatch.clock import Clock, SystemClock
from lockwatch.model import ids
from lockwatch.model.board import ChangeSet, Entry, judge
from lockwatch.model.kernel import FileKey
from lockwatch.model.lock import Lock
from lockwatch.model.process import ProcessLookup
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.verdict import same_host
from lockwatch.sources.feed import Differ, Emit
from lockwatch.sources.files.evidence import Evidence, held_keys, kernel_table
from lockwatch.sources.files.scanner import (
    SKIP_DIRS,
    ScanResult,
    find_in,
    is_candidate,
    is_lock_dir,
    load,
    load_all,
    never_a_lock,
    scan,
)
from lockwatch.sources.processes import PsutilProcesses

# watchfiles batches events: it yields once nothing new came for STEP ms, and at
# the latest after DEBOUNCE ms of a steady stream. Both well under the 250 ms in
# which a change must be on screen.
DEBOUNCE_MS = 120
STEP_MS = 30
RESCAN_SECONDS = 30.0
LIVENESS_SECONDS = 2.0
POLLING_RESCAN_SECONDS = 2.0


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
    ) -> None:
        self.name = "files"
        self.roots = [os.path.abspath(root) for root in roots]
        self.host = host
        self.clock = clock or SystemClock()
        self._processes = processes
        self.rescan_seconds = rescan_seconds
        self.liveness_seconds = liveness_seconds
        self._force_polling = force_polling
        self._polling = bool(force_polling)
        self.settle_seconds = settle_seconds
        self.polling_rescan_seconds = polling_rescan_seconds
        self._differ = Differ()
        self._turn = asyncio.Lock()  # one collection at a time touches the differ
        self._watched: frozenset[str] = frozenset()
        self._restart = asyncio.Event()
        self._fell_back = asyncio.Event()
        self._files: set[str] = set()  # roots that are files, not directories
        self._watch_problem: str | None = None
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
        await self.rescan(emit)
        # One task group: if one loop fails, the others stop with it.
        async with asyncio.TaskGroup() as group:
            group.create_task(self._watch(emit))
            group.create_task(self._rescan_loop(emit))
            group.create_task(self._liveness_loop(emit))

    async def close(self) -> None:
        self._restart.set()

    async def rescan(self, emit: Emit) -> None:
        """Read everything again; what the events missed is put right here."""
        async with self._turn:
            now = self.clock.now()
            # Diffed in the thread too: comparing 10,000 entries is not the UI's work.
            collected, (upserts, removed) = await asyncio.to_thread(self._scan_all)
            self._root_errors = {e.path: e for e in collected.errors if e.path in self.roots}
            emit(self._change(now, upserts, removed, collected.errors, all_errors=True))
        if frozenset(self._existing_roots()) != self._watched:
            self._restart.set()

    async def _rescan_loop(self, emit: Emit) -> None:
        # Once soon after start: a lock written between the first scan and the
        # watcher being in place would otherwise wait for the next full rescan.
        if self.settle_seconds is not None:
            await asyncio.sleep(self.settle_seconds)
            await self.rescan(emit)
        while True:
            # watchfiles' poller sees mtimes in whole seconds and misses a rewrite
            # within the same second: while polling, rescans make up for it.
            every = self.rescan_seconds
            if self._polling:
                every = min(every, self.polling_rescan_seconds)
            # The watcher failing wakes this loop: rescans take over at once.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._fell_back.wait(), timeout=every)
            self._fell_back.clear()
            await self.rescan(emit)

    async def _watch(self, emit: Emit) -> None:
        polling = self._force_polling
        while True:
            roots = self._existing_roots()
            self._watched = frozenset(roots)
            self._restart.clear()
            if not roots:
                await self._restart.wait()
                continue
            # A file named as a root is watched through its directory: an atomic
            # replace gives it a new inode, which a watch on the file would lose.
            targets = sorted(
                {root if os.path.isdir(root) else os.path.dirname(root) for root in roots}
            )
            try:
                async for changes in watchfiles.awatch(
                    *targets,
                    watch_filter=_wanted,
                    debounce=DEBOUNCE_MS,
                    step=STEP_MS,
                    stop_event=self._restart,
                    force_polling=polling,
                    poll_delay_ms=100,
                    ignore_permission_denied=True,
                ):
                    self._watch_problem = None
                    await self._changed(changes, emit)
            except Exception as exc:  # noqa: BLE001 - watchfiles fails in many ways
                # inotify limits run out on big trees: polling still works.
                # (inotify limits run out on big trees; a file name that is not
                # UTF-8 stops watchfiles' watcher altogether.) Rescans go on.
                self._watch_problem = f"cannot watch for events ({exc}); polling instead"
                if polling:
                    self._watch_problem = f"cannot watch ({exc}); rescanning every" + (
                        f" {self.rescan_seconds:g} s"
                    )
                    await self._restart.wait()
                polling = True
                self._polling = True
                self._fell_back.set()

    async def _changed(self, changes: set[tuple[watchfiles.Change, str]], emit: Emit) -> None:
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

    def _scan_all(self) -> tuple[_Collected, tuple[list[Entry], list[str]]]:
        collected = self._judged(scan(self.roots), [])
        return collected, self._differ.full(collected.entries)

    def _collect_changes(
        self, changes: set[tuple[watchfiles.Change, str]], known: list[str]
    ) -> _Collected:
        result = ScanResult()
        gone: list[str] = []
        named = set(self.roots)
        dirs: list[str] = []
        dir_roots = [root.rstrip("/") + "/" for root in self.roots if root not in self._files]
        seen: set[str] = set()
        for change, changed in sorted(changes, key=lambda c: c[1]):
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
            elif change is watchfiles.Change.deleted:
                # A directory went (or was renamed away): every lock under it went too.
                prefix = ids.file_prefix(path)
                gone.extend(lock_id for lock_id in known if lock_id.startswith(prefix))
            elif change is watchfiles.Change.added and os.path.isdir(path):
                dirs.append(path)
        if dirs:
            found, errors = find_in(dirs)
            result.errors.extend(errors)
            load_all(found, result)
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
            else:
                problem = self._watch_problem
                out.append(SourceStatus("file", root, "watching", reason=problem, updated_at=at))
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


def _wanted(change: watchfiles.Change, path: str) -> bool:
    name = os.path.basename(path)
    if never_a_lock(name) or name in SKIP_DIRS:
        return False
    parts = path.split(os.sep)
    return not any(part in SKIP_DIRS for part in parts)
