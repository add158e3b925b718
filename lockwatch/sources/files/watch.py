"""Lock directories, live: filesystem events through inotify (or polling, when
inotify cannot be had: the header says why), a full rescan every so often to
reconcile anything the events missed, and a cheap check of holders' pids so a
holder that dies shows without any file changing."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime

from lockwatch import heap
from lockwatch.clock import Clock, SystemClock
from lockwatch.cpus import available_cpus
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.lock import Lock
from lockwatch.model.process import ProcessLookup
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.verdict import same_host
from lockwatch.sources.feed import Coalescer, Differ, Emit
from lockwatch.sources.filelocks import FileKey
from lockwatch.sources.files import pieces
from lockwatch.sources.files.changes import Changes, pace
from lockwatch.sources.files.collect import Collected, parent_name, read_changes, with_listing
from lockwatch.sources.files.decoded import DecodedLocks, worth_keeping
from lockwatch.sources.files.evidence import Evidence, kernel_listed, kernel_table_for
from lockwatch.sources.files.facts import facts_of
from lockwatch.sources.files.inotify import Watcher
from lockwatch.sources.files.inotify_kernel import Inotify, Kernel
from lockwatch.sources.files.polling import Poller, polling_reason
from lockwatch.sources.files.protocols import NO_PROTOCOLS, Protocols
from lockwatch.sources.files.recheck import recheck_dirs, recheck_kernel, recheck_pids
from lockwatch.sources.files.roots import PinnedRoots, root_statuses
from lockwatch.sources.files.scanner import Area, is_lock_dir, partition
from lockwatch.sources.files.unseen import unreadable
from lockwatch.sources.processes import HostProcesses

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
# Under churn (hundreds of lock files written a second) the watcher hands over a
# batch every DEBOUNCE_MS: change sets go to the dashboard at most once per
# COALESCE_S, merged (a lone change still goes at once), so its redraws leave the
# event loop time for keys.
COALESCE_S = 0.25


class FileFeed:
    def __init__(
        self,
        roots: Sequence[str],
        *,
        host: str,
        clock: Clock | None = None,
        processes: Callable[[], ProcessLookup] = HostProcesses,
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
        jobs: int | None = None,
        protocols: Protocols = NO_PROTOCOLS,
    ) -> None:
        self.name = "files"
        self.roots = [os.path.abspath(root) for root in roots]
        self.pinned = PinnedRoots(self.roots)
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
        # Workers for a first scan started early (`prefetch`): one per CPU, as `ls`.
        self.jobs = jobs or available_cpus()
        self._first: pieces.Scan | None = None
        # The running feed's emit: what it holds back goes before anything told
        # another way (a rescan asked for from outside), or a removal could come
        # before the upsert it undoes.
        self._coalescer: Coalescer | None = None
        self._watcher: Watcher | None = None
        # The watcher made for this run, from before its watches are all in place
        # (a large tree takes seconds): till then the header says it is arming.
        self._arming: Watcher | None = None
        self.poller: Poller | None = None
        self._differ = Differ()
        self._turn = asyncio.Lock()  # one collection at a time touches the differ
        self._armed = asyncio.Event()  # events flow (or polling began)
        self._rescan_soon = asyncio.Event()
        self._rescan_cost = 0.0
        self._files: set[str] = set()  # roots that are files, not directories
        self._root_errors: dict[str, ScanError] = {}
        # Locks as decoded from their files: what the kernel's word is added to
        # again when it changes.
        self.decoded = DecodedLocks()
        # Files lockwatch saw a kernel lock on in this run: pid files among them
        # follow the kernel once it is released.
        self._was_held: dict[FileKey, str] = {}
        self.kernel_evidence = kernel_evidence
        self.protocols = protocols  # what the config declares paths' locks to be

    # -- the loops ---------------------------------------------------------------

    def prefetch(self) -> None:
        """Start the first scan now, in forked workers (the scanner `lockwatch ls`
        uses), so that it runs while the dashboard starts; `run` hands over what
        they find as they go. Only while this process has a single thread: a fork
        copies the calling thread alone, and a lock another thread held would stay
        held in the child. Otherwise `run` scans in a thread, in chunks too."""
        if self._first is None and _single_threaded():
            self._first = self._start(fork=True)
            # Forked already: a thread from now on is no danger to the workers.
            self._first.stream.read_ahead()

    async def run(self, emit: Emit) -> None:
        ready = asyncio.Event()
        # Made before the first scan: it takes the roots' measure now, so a root
        # replaced or made unreadable from here on is one it sees change.
        watcher = None if self._force_polling else self._new_watcher(ready)
        if isinstance(watcher, Exception):
            # No inotify at all: the header says so from the first row, not "watching".
            self._polling = polling_reason(watcher)
        else:
            self._arming = watcher
        coalescer = emit = self._coalescer = Coalescer(emit, COALESCE_S)
        try:
            await self._first_scan(emit)
            # One task group: if one loop fails, the others stop with it.
            async with asyncio.TaskGroup() as group:
                group.create_task(self._watch(emit, watcher, ready))
                group.create_task(self._rescan_loop(emit))
                group.create_task(self._liveness_loop(emit))
        except Exception:
            coalescer.flush()  # what was seen before the failure, then the failure
            raise
        finally:
            coalescer.cancel()
            self._coalescer = None
            if isinstance(watcher, Watcher):
                watcher.close()

    async def close(self) -> None:
        if self._first is not None:
            self._first.stream.close()
        if self._watcher is not None:
            self._watcher.close()

    @property
    def watching(self) -> Watcher | None:
        """The inotify watcher, while events flow (None while polling)."""
        return self._watcher

    async def _first_scan(self, emit: Emit) -> None:
        """Everything under the roots, handed over as it is read (see pieces.STREAM_STEP_S);
        the last change set has every error and the roots' statuses."""
        async with self._turn:
            first = self._first or self._start(fork=False)
            self._first = None
            try:
                await self._stream(first, emit)
            finally:
                first.stream.close()
            # The pieces read, given back off the loop; not awaited: the watches
            # start now (a lock written before they are up is missed until a rescan).
            asyncio.get_running_loop().run_in_executor(None, heap.give_back)

    async def _stream(self, first: pieces.Scan, emit: Emit) -> None:
        loop = asyncio.get_running_loop()
        errors = list(first.errors)
        seen: set[str] = set()
        pending: list[Entry] = []
        waiting_since: float | None = None  # when the oldest of `pending` came
        emitted: float | None = None  # when the last change set went
        while True:
            # The first take hands over the first pieces alone (the first rows as
            # soon as they are read); later ones what has come since.
            most = 1 if emitted is None else pieces.STREAM_TAKE_BYTES
            taken = await asyncio.to_thread(first.stream.take, pieces.STREAM_STEP_S, most=most)
            if taken is None:
                break
            for piece in taken:
                self._absorb(piece)
                errors.extend(piece.errors)
                seen.update(entry.lock.id for entry in piece.entries)
                pending.extend(self._settle(piece.entries, ())[0])
            now = loop.time()
            if pending and waiting_since is None:
                waiting_since = now
            if waiting_since is None:
                continue
            if emitted is None:
                due = (
                    len(pending) >= pieces.CHUNK_FIRST
                    or now - waiting_since >= pieces.STREAM_STEP_S
                )
            else:
                due = now - emitted >= pieces.STREAM_STEP_S
            if due:
                emit(self._change(self.clock.now(), pending, with_statuses=False))
                pending, waiting_since, emitted = [], None, now
        # Anything the feed knew that the scan did not find (a scan started again).
        kept, removed = self._settle((), [i for i in self._differ.entries if i not in seen], errors)
        pending.extend(kept)
        self._rescan_cost = time.monotonic() - first.started
        self._existing_roots()
        self._root_errors = {e.path: e for e in errors if e.path in self.roots}
        emit(self._change(self.clock.now(), pending, removed, errors, all_errors=True))
        if isinstance(emit, Coalescer):
            emit.flush()  # every lock on screen now: the first scan is done

    def _start(self, *, fork: bool) -> pieces.Scan:
        return pieces.start_scan(self.pinned, self.jobs if fork else 1, self._pieces(), fork=fork)

    async def rescan(self, emit: Emit) -> None:
        """Read everything again; what the events missed is put right here."""
        async with self._turn:
            self._in_order(emit)
            now = self.clock.now()
            started = time.monotonic()
            watcher = self._watcher
            mark = None if watcher is None else watcher.mark()
            # Diffed in the thread too: comparing 10,000 entries is not the UI's work.
            errors, (upserts, removed) = await asyncio.to_thread(self._scan_all, watcher, mark)
            self._rescan_cost = time.monotonic() - started
            self._existing_roots()
            self._root_errors = {e.path: e for e in errors if e.path in self.roots}
            emit(self._change(now, upserts, removed, errors, all_errors=True))
            await asyncio.to_thread(heap.give_back)  # what it read and found unchanged

    def _settle(
        self, entries: Sequence[Entry], gone: Iterable[str], errors: Sequence[ScanError] = ()
    ) -> tuple[list[Entry], list[str]]:
        """The differ told `entries` and `gone`: what changed. A lock that `errors`
        say cannot be read now is not gone: it stays as last seen, unknown. A lock
        file gone or made again on another inode takes its kernel past with it
        (`was_held`): its inode may be a new file's later."""
        known = self._differ.entries
        gone = list(gone)
        if errors:
            kept = unreadable(known, gone, errors, self._processes(), self.clock.now(), self.host)
            if kept:
                gone = [lock_id for lock_id in gone if lock_id not in kept]
                entries = [*entries, *kept.values()]
        before = [known[i] for i in gone if i in known]
        before.extend(known[e.lock.id] for e in entries if e.lock.id in known)
        if self._was_held and before:
            now = {facts_of(e.lock).file_key for e in entries}
            held = self._was_held
            for entry in before:
                key, path = facts_of(entry.lock).file_key, entry.lock.path
                if key not in now and key is not None and held.get(key) == path:
                    del held[key]
        return self._differ.partial(entries, gone)

    def _in_order(self, emit: Emit) -> None:
        if self._coalescer is not None and emit is not self._coalescer:
            self._coalescer.flush()

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
                moved=self.pinned.moved,
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
        told_armed = False
        try:
            while not watcher.stopped:
                await ready.wait()
                ready.clear()
                if watcher.armed and not told_armed:
                    told_armed = True
                    self._armed.set()
                    # "arming watches" is over: the header says so now, not at
                    # the next change that happens to come.
                    emit(self._change(self.clock.now(), ()))
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
        self.poller = poller = Poller(self.pinned)
        moved = self._moved_roots()
        while True:
            started = time.monotonic()
            changes = await asyncio.to_thread(poller.changes)
            if (now_moved := self._moved_roots()) != moved:
                moved = now_moved
                self._rescan_soon.set()  # the header says where a root leads now
            # Held against the feed's picture too, not only the pass before: a lock a
            # rescan (or the first scan) showed and that went before the poller ever
            # saw it is no change to the poller.
            await self._changed(changes, emit, listed=poller.seen)
            await asyncio.sleep(pace(time.monotonic() - started, self.poll_seconds, POLL_SHARE))

    async def _changed(
        self, changes: Changes, emit: Emit, *, listed: frozenset[str] | None = None
    ) -> None:
        """Put right what `changes` name. `listed`: every lock path a whole walk of the
        roots found just now; the feed's locks it did not find, and those it found
        that the feed does not have, are looked at again too."""
        async with self._turn:
            if listed is not None:
                changes = with_listing(changes, listed, self._differ.entries)
            if not changes:
                return
            now = self.clock.now()
            known = list(self._differ.entries)
            collected = await asyncio.to_thread(self._collect_changes, changes, known)
            upserts, removed = self._settle(collected.entries, collected.gone, collected.errors)
            if upserts or removed or collected.errors or collected.looked:
                emit(self._change(now, upserts, removed, collected.errors, looked=collected.looked))

    async def _liveness_loop(self, emit: Emit) -> None:
        while True:
            await asyncio.sleep(self.liveness_seconds)
            await self.recheck_holders(emit)

    async def recheck_holders(self, emit: Emit) -> None:
        """Judge again the locks whose holder pid started or stopped running, or
        whose kernel lock was taken or released."""
        async with self._turn:
            self._in_order(emit)
            # A lock that cannot be read now stays unknown whatever its pid does:
            # only a look at its file says more (the watcher's, or a rescan's).
            entries = [e for e in self._differ.entries.values() if facts_of(e.lock).unseen is None]
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
                # One look at /proc/locks (and these files' fds) serves both checks.
                evidence = self._evidence([entry.lock for entry in entries])
                decoded, judge_now = self.decoded, self._judge_now
                kernel = {
                    e.lock.id: e for e in recheck_kernel(entries, evidence, decoded, judge_now)
                }
                pids = [
                    e
                    for e in recheck_pids(local, evidence, decoded, judge_now)
                    if e.lock.id not in kernel
                ]
                dirs = [
                    e
                    for e in recheck_dirs(entries, evidence, decoded, judge_now)
                    if e.lock.id not in kernel
                ]
                self._remember_held(evidence)
                return [*kernel.values(), *pids, *dirs]

            fresh = await asyncio.to_thread(recheck)
            upserts, _ = self._settle(fresh, ())
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
        with_statuses: bool = True,
        looked: tuple[str, ...] = (),
    ) -> ChangeSet:
        return ChangeSet(
            self.name,
            now,
            self.statuses(now) if with_statuses else (),
            upserts=tuple(upserts),
            removed=tuple(removed),
            errors=tuple(errors),
            all_errors=all_errors,
            looked=looked,
        )

    # -- work done in threads ------------------------------------------------------

    def _pieces(self) -> Callable[[Sequence[Area]], Iterator[pieces.Piece]]:
        """Areas read and judged a chunk at a time (`pieces.read_pieces`), with the
        files seen held so far: in a forked worker too, changing nothing here."""
        return functools.partial(
            pieces.read_pieces,
            was_held=dict(self._was_held),
            kernel_evidence=self.kernel_evidence,
            judge_now=self._judge_now,
            protocols=self.protocols,
        )

    def _absorb(self, piece: pieces.Piece) -> None:
        """What the feed keeps of a piece besides its entries."""
        self._was_held.update(piece.held)
        self.decoded.keep(piece.entries, piece.decoded)

    def _scan_all(
        self, watcher: Watcher | None = None, mark: int | None = None
    ) -> tuple[list[ScanError], tuple[list[Entry], list[str]]]:
        """A full rescan, diffed a chunk at a time: only what changed is kept, so a
        rescan of a large tree costs no second copy of it."""
        differ = self._differ
        seen: set[str] = set()
        changed: list[Entry] = []
        odd: dict[str, Lock] = {}
        held: dict[FileKey, str] = {}
        try:
            roots, moved = self.pinned.usable()
            (areas,), errors = partition(roots, 1)
            errors = moved + errors
            for piece in self._pieces()(areas):
                held.update(piece.held)
                errors.extend(piece.errors)
                kept = differ.changed(piece.entries)
                changed.extend(kept)
                seen.update(differ.known_ids(piece.entries))
                if kept and piece.decoded:
                    ids = {entry.lock.id for entry in kept}
                    odd.update((lock.id, lock) for lock in piece.decoded if lock.id in ids)
        finally:
            busy = None if watcher is None or mark is None else watcher.busy_since(mark)
        gone = [lock_id for lock_id in differ.entries if lock_id not in seen]
        if busy:
            # Written while this scan read, or not closed by its writer yet: what the
            # scan read may be half of it. The watcher hands these over next; till
            # then what was shown stays.
            busy |= {os.path.dirname(p) for p in busy if is_lock_dir(parent_name(p))}
            changed = [entry for entry in changed if entry.lock.path not in busy]
            gone = [i for i in gone if differ.entries[i].lock.path not in busy]
        self._was_held.update(held)
        self.decoded.keep(changed, [odd[e.lock.id] for e in changed if e.lock.id in odd])
        for lock_id in gone:
            self.decoded.forget(lock_id)
        return errors, self._settle(changed, gone, errors)

    def _collect_changes(self, changes: Changes, known: list[str]) -> Collected:
        """The locks `changes` name read again (collect.read_changes), and judged."""
        result, gone, looked = read_changes(changes, known, self.roots, self._files)
        for lock_id in gone:
            self.decoded.forget(lock_id)
        evidence = self._evidence(result.locks)
        locks = evidence.attach(result.locks)
        self._remember_held(evidence)
        # Process facts are looked up after the files were read: a holder alive
        # when it wrote its lock is then in the process listing.
        entries = self._judge_now(locks)
        self.decoded.keep(result.locks, worth_keeping(result.locks, locks))
        return Collected(entries, gone, result.errors, looked)

    def _judge_now(self, locks: Sequence[Lock]) -> list[Entry]:
        return judge(locks, self._processes(), self.clock.now(), self.host)

    def _evidence(self, locks: Sequence[Lock]) -> Evidence:
        """The kernel's word for `locks` (about to be judged): /proc/locks read now,
        holders looked up for their files alone, never every process's fds."""
        table = kernel_table_for(kernel_listed(), locks) if self.kernel_evidence else None
        return Evidence(table, was_held=self._was_held, protocols=self.protocols)

    def _remember_held(self, evidence: Evidence) -> None:
        """The files of the locks `evidence` saw held: a pid file among them follows
        the kernel once its lock is released (KernelEvidence.was_held). Only files
        of locks listed: the inode of another file held somewhere on the host may be
        a new lock file's later."""
        self._was_held.update(evidence.held_seen)
        evidence.held_seen.clear()

    # -- status ------------------------------------------------------------------

    def _moved_roots(self) -> set[str]:
        return {error.path for error in self.pinned.usable()[1]}

    def _existing_roots(self) -> list[str]:
        existing = [root for root in self.roots if os.path.exists(root)]
        self._files = {root for root in existing if not os.path.isdir(root)}
        return existing

    def statuses(self, at: datetime) -> tuple[SourceStatus, ...]:
        watcher = self._arming
        # Events do not flow yet for what is not watched yet: a lock written there
        # now is seen by the rescan that follows the arming, not at once.
        arming = watcher is not None and not watcher.armed and not watcher.stopped
        return root_statuses(self.roots, self._root_errors, self._polling, arming, at)


def _single_threaded() -> bool:
    """Whether this process runs one thread (any thread, not only Python's)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return threading.active_count() == 1
