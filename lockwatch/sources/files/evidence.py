"""The kernel's word on lock files: which are held with flock/fcntl, by whom,
and which sentinel files nobody holds (or only has open).

Asked for every lock file wherever /proc/locks can be read; nothing is asked
about files on network filesystems, where a lock another host holds is
invisible here and "nobody holds it" would be a guess.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache

from lockwatch.model.lock import Lock, Reason
from lockwatch.sources.filelocks import NO_EVIDENCE, FileKey, KernelEvidence, KernelLock
from lockwatch.sources.files import kernel_found
from lockwatch.sources.files.decoders import kernel_file
from lockwatch.sources.files.decoders.base import KnownEvidence
from lockwatch.sources.files.decoders.hooks import HeldOn, OpenBy
from lockwatch.sources.files.facts import facts_of, refiled
from lockwatch.sources.files.protocols import NO_PROTOCOLS, Protocols
from lockwatch.sources.files.users import GitProcesses, attach_users, scan_git_processes
from lockwatch.sources.mounts import remote_devices
from lockwatch.sources.procfs import KernelTable, OpenFiles, listed, open_files, read_table

# A format's reading of the kernel's locks (sqlite.explain): the lock and its
# evidence, given the locks on any file and who has a file open.
Explain = Callable[
    [
        Lock,
        KernelEvidence,
        HeldOn,
        OpenBy,
    ],
    tuple[Lock, KernelEvidence],
]


@lru_cache(maxsize=1)
def _remote_now() -> frozenset[str]:
    return remote_devices()


def with_evidence(lock: Lock, evidence: KernelEvidence | None) -> Lock:
    """`lock` (as decoded from its file) with what the kernel says about it. A
    held kernel lock names the holder: its process, not the pid the file may
    still record."""
    if evidence is None:
        return lock if facts_of(lock).evidence is None else refiled(lock, {"evidence": None})
    holder = lock.holder
    if evidence.holds:
        pid = evidence.holds[0].holder_pid
        if pid is not None and pid != holder.pid:
            holder = replace(holder, pid=pid)
    elif evidence.open_by and holder.pid is None and facts_of(lock).policy.kernel_sentinel:
        # Nobody holds a kernel lock on it, but this process has it open: the
        # likely holder (the verdict says `open_by`).
        holder = replace(holder, pid=evidence.open_by[0])
    # The kernel keeps no time, and a bare sentinel's mtime is not the lock's:
    # no age anywhere (verdict, table, JSON) rather than a made-up one.
    policy = facts_of(lock).policy
    if not policy.sentinel_mtime_only:
        if holder is lock.holder:  # most files: only the facts change
            if facts_of(lock).evidence is evidence:
                return lock  # decoded with it (known_evidence): nothing changes
            return refiled(lock, {"evidence": evidence})
        return refiled(lock, {"evidence": evidence}, holder=holder)
    # Where it may be an existence lock instead, its mtime is that lock's age:
    # kept for the reason that names both readings.
    modified = (
        (lock.acquired_at or facts_of(lock).modified_at) if policy.sentinel_unproven else None
    )
    return refiled(
        lock, {"evidence": evidence, "modified_at": modified}, holder=holder, acquired_at=None
    )


def kernel_table() -> KernelTable | None:
    """/proc/locks as it is now, or None where it cannot be read (not Linux, or
    procfs hidden): lock files are then judged by their content alone. The files
    its locks are on are what later walks list whatever their names."""
    table = read_table()
    if not table.readable:
        return None
    kernel_found.remember(lock.file for lock in table.locks)
    return table


def kernel_listed() -> frozenset[FileKey] | None:
    """The files /proc/locks names now, read without looking at any process (or
    None where it cannot be read): what a one-shot scan's walks list whatever
    their names, and what `kernel_table_for` narrows the full read to."""
    return listed_keys(listed())


def listed_keys(locks: Sequence[KernelLock] | None) -> frozenset[FileKey] | None:
    """`kernel_listed` from /proc/locks as `procfs.listed` read it."""
    if locks is None:
        return None
    keys = frozenset(lock.file for lock in locks)
    kernel_found.remember(keys)
    return keys


def kernel_table_for(
    listed_keys: frozenset[FileKey] | None, locks: Sequence[Lock]
) -> KernelTable | None:
    """The kernel's word on `locks` alone: /proc/locks read with owners and
    holders for the files among `locks` that it lists. Every process's fds are
    looked through only when one of them is locked, never for the host's other
    locks (a host may have thousands that no scanned file is concerned with)."""
    if listed_keys is None:
        return None
    if not listed_keys:
        return KernelTable()  # nothing locked anywhere: no file of these to look at
    wanted: set[FileKey] = set()
    inodes = _inodes(listed_keys)
    for lock in locks:
        ff = facts_of(lock)
        key = ff.file_key if ff.kernel_file is None else _key_of(ff.kernel_file)
        if key is not None and key.inode in inodes and key in listed_keys:
            wanted.add(key)
            # Files whose locks its format reads too (an SQLite database's -shm).
            for path in _companions(lock):
                other = _key_of(path)
                if other is not None and other in listed_keys:
                    wanted.add(other)
    if not wanted:
        return KernelTable()
    table = read_table(only=wanted)
    return table if table.readable else None


def known_evidence(listed_keys: frozenset[FileKey] | None) -> KnownEvidence | None:
    """What a one-shot scan tells its decoders of each local file's kernel locks
    before attaching reads them: nothing (NO_EVIDENCE, what attaching finds for
    most files), so most locks are built once with it rather than twice. An
    `Evidence(known=True)` replaces it wherever the kernel says more, and drops
    it where the kernel cannot be asked. None where /proc/locks cannot be read."""
    if listed_keys is None:
        return None
    remote = _remote_now()  # never asked about: their locks keep no evidence

    def known(key: FileKey) -> KernelEvidence | None:
        return None if key.device in remote else NO_EVIDENCE

    return known


def _inodes(keys: Iterable[FileKey]) -> frozenset[int]:
    """The inodes of `keys`: a file is looked up by its FileKey, whose hash is
    Python code (six a lock were a tenth of attaching), only when its inode is
    among them; most lock files' are not."""
    return frozenset(key.inode for key in keys)


def _companions(lock: Lock) -> tuple[str, ...]:
    """The other files whose kernel locks `lock`'s format reads (its `explain`)."""
    if lock.format not in _explainers():
        return ()
    from lockwatch.sources.files.decoders import writer

    module = writer(lock.format)
    companions = getattr(module, "companions", None)
    return () if companions is None else tuple(companions(lock))


@lru_cache(maxsize=1)
def _own_openers() -> frozenset[str]:
    """Formats for which having the file open is no holding (an idle SQLite
    connection): their `explain` tells who has it open in its own words."""
    from lockwatch.sources.files.decoders import NATIVE

    return frozenset(m.FORMAT for m in NATIVE if getattr(m, "OWN_OPENERS", False))


@lru_cache(maxsize=1)
def _explainers() -> dict[str, Explain]:
    """The formats that read the kernel's locks in their tool's words, by name."""
    from lockwatch.sources.files.decoders import NATIVE

    return {m.FORMAT: m.explain for m in NATIVE if hasattr(m, "explain")}


class Evidence:
    """Attaches the kernel's word to freshly decoded lock files."""

    def __init__(
        self,
        table: KernelTable | None,
        *,
        remote: frozenset[str] | None = None,
        was_held: Mapping[FileKey, str] | None = None,
        protocols: Protocols = NO_PROTOCOLS,
        known: bool = False,
    ) -> None:
        self.table = table
        # Whether the locks were decoded with `known_evidence`: then a lock the
        # kernel cannot be asked about loses what was presumed of it.
        self._known = known
        # What the config declares paths' locks to be, where their files cannot say.
        self._protocols = protocols
        self._remote = _remote_now() if remote is None else remote
        # File -> the path of the lock it was seen held for: a lock at another
        # path on that inode later is another file that reused it.
        self._was_held = {} if was_held is None else was_held
        # The files of attached locks a kernel lock is held on now, and their
        # locks' paths: what a feed remembers as held once released (`was_held`).
        self.held_seen: dict[FileKey, str] = {}
        self._open: OpenFiles | None = None
        self._git: tuple[GitProcesses | None] | None = None  # (the scan,) once made

    def _open_files(self) -> OpenFiles:
        if self._open is None:
            self._open = open_files()
        return self._open

    def _open_pids(self, key: FileKey) -> tuple[int, ...]:
        return self._open_files().pids(key)

    def attach(self, locks: Sequence[Lock]) -> list[Lock]:
        """The kernel's word, and who works on what each lock guards (users)."""
        return attach_users(self._attach_kernel(locks), self._git_processes)

    def _git_processes(self) -> GitProcesses | None:
        # One /proc pass per moment, however many times locks are attached.
        if self._git is None:
            self._git = (scan_git_processes(),)
        return self._git[0]

    def _attach_kernel(self, locks: Sequence[Lock]) -> list[Lock]:
        table = self.table
        explainers, own_openers = _explainers(), _own_openers()
        locked = _inodes(lock.file for lock in table.locks) if table is not None else frozenset()
        seen_held = _inodes(self._was_held)
        # Most configs declare no protocols: no call per lock then.
        declared = self._protocols.declared if self._protocols.entries else None
        out = []
        for lock in locks:
            if declared is not None:
                lock = declared(lock)  # before the kernel's word: it reads the policy
            ff = facts_of(lock)
            key = ff.file_key if ff.kernel_file is None else _key_of(ff.kernel_file)
            if key is None and ff.kernel_file is not None:
                # No file, no kernel lock on it: the tool's next run creates
                # the file, locks it and goes ahead.
                out.append(with_evidence(_without(lock, ff.kernel_file), KernelEvidence()))
                continue
            if table is None or key is None or key.device in self._remote:
                out.append(with_evidence(lock, None) if self._known else lock)
                continue
            on_it = key.inode in locked  # else no kernel lock, held or waiting, is on it
            held = on_it and bool(table.held_on(key))
            path = lock.path or ""
            if held:
                self.held_seen[key] = path
            # Found because a kernel lock was on it (even one released since).
            kernel_locked = held or (on_it and table.waiters_on(key)) or kernel_found.is_locked(key)
            if kernel_locked and kernel_file.replaces(lock):
                lock = kernel_file.of(lock)  # no lock format of its own: the kernel's
            explain = explainers.get(lock.format)
            # Who has the file open is only worth a look through every process's
            # fds for a sentinel that no kernel lock covers.
            needs_open = (
                facts_of(lock).policy.kernel_sentinel
                and lock.holder.pid is None
                and not held
                and lock.format not in own_openers
            )
            was_held = held or (key.inode in seen_held and self._was_held.get(key) == path)
            if on_it or needs_open or was_held or explain is not None:
                evidence = table.evidence(
                    key, self._open_files() if needs_open else None, was_held=was_held
                )
            else:
                evidence = NO_EVIDENCE  # what table.evidence says of such a file

            if explain is not None:
                # A format that reads the kernel's locks in its tool's words
                # (SQLite's byte ranges): its holder first, its words as notes.
                lock, evidence = explain(lock, evidence, table.held_on, self._open_pids)
            out.append(with_evidence(lock, evidence))
        return out


def _without(lock: Lock, missing: str) -> Lock:
    if any(note.code == "file_missing" for note in lock.notes):
        return lock  # attached again (the dashboard's recheck)
    note = Reason("file_missing", f"{missing}, which the lock is taken on, does not exist")
    return replace(lock, notes=(*lock.notes, note))


def _key_of(path: str) -> FileKey | None:
    """The device and inode of the file another lock's kernel lock is on (never
    through a symlink), or None when it is not there."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return FileKey.of(st.st_dev, st.st_ino)


def held_keys(table: KernelTable | None) -> set[FileKey]:
    """Files a kernel lock is held on now."""
    if table is None:
        return set()
    return {lock.file for lock in table.locks if not lock.waiting}
