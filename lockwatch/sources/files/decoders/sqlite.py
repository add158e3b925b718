"""SQLite databases: their locks are byte ranges of POSIX (fcntl) locks, read
in SQLite's own words.

SQLite (src/os.h, src/os_unix.c) locks a rollback-journal database by bytes
past its first GiB: PENDING_BYTE (0x40000000), RESERVED_BYTE (+1) and the
510 bytes from SHARED_FIRST (+2). A reader read-locks the shared range
(SHARED); a write transaction write-locks the reserved byte as well
(RESERVED: others may still read, nobody else may write); to commit it
write-locks the pending byte (PENDING: no new reader) and then the shared
range (EXCLUSIVE). In WAL mode (src/wal.c, os_unix.c's UNIX_SHM_BASE) every
connection keeps a read lock on the shared range and on the `-shm` file's
byte 128 (the "dead man switch") while it is open; the `-shm` bytes from 120
are the WAL's locks: 120 the write lock (a write transaction), 121 a
checkpoint, 122 a recovery, 123-127 the readers' marks.

A writer that gets "database is locked" is not queued in the kernel: SQLite
retries (busy_timeout) and gives up. So besides the locks, who else has the
database open is told: the writers that wait are among them.

Only the kernel's locks say whether it is held (the database's mtime is its
data's); a database is never moved by a break (its holder is signalled).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from lockwatch.model.lock import Lock, Reason, amended
from lockwatch.sources.filelocks import FileKey, KernelEvidence, KernelLock
from lockwatch.sources.files.decoders.base import Claims, LockFile, file_lock_for
from lockwatch.sources.files.decoders.hooks import (
    HeldOn,
    OpenBy,
    no_handover,
    no_refresh,
    wants_none,
)
from lockwatch.sources.files.facts import facts_of
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "sqlite"
POLICY = StalenessPolicy(kernel_sentinel=True, kernel_only=True, sentinel_mtime_only=True)
MOVABLE = False
# An open connection with no transaction holds nothing: who has it open is told
# in SQLite's words (`explain`), never taken for a holder.
OWN_OPENERS = True
WHAT = "an SQLite database (or one of its -wal, -shm, -journal files)"

MAGIC = b"SQLite format 3\x00"
PENDING_BYTE = 0x40000000
RESERVED_BYTE = PENDING_BYTE + 1
SHARED_FIRST = PENDING_BYTE + 2
SHARED_SIZE = 510
SHARED_LAST = SHARED_FIRST + SHARED_SIZE - 1
# The -shm file's lock bytes (UNIX_SHM_BASE = (22 + SQLITE_SHM_NLOCK) * 4).
SHM_BASE = 120
SHM_WRITE = SHM_BASE
SHM_CHECKPOINT = SHM_BASE + 1
SHM_RECOVER = SHM_BASE + 2
SHM_READERS = range(SHM_BASE + 3, SHM_BASE + 8)
SHM_DMS = SHM_BASE + 8
_WAL_MAGICS = (b"\x37\x7f\x06\x82", b"\x37\x7f\x06\x83")
_JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")
# The parts beside a database, by suffix: what each is, in words.
PARTS = {"-wal": "write-ahead log", "-shm": "WAL index", "-journal": "rollback journal"}
# Header byte 18: the write version, 1 legacy (rollback journal), 2 WAL.
_WRITE_VERSION = 18

LEVELS = ("SHARED", "RESERVED", "PENDING", "EXCLUSIVE")
_LEVEL_WORDS = {
    "SHARED": "SHARED (reading)",
    "RESERVED": "RESERVED (a write transaction: others may still read, nobody else may write)",
    "PENDING": "PENDING (a write transaction about to commit: waiting for its readers, no new"
    " reader gets in)",
    "EXCLUSIVE": "EXCLUSIVE (a write transaction committing: writing the database file)",
}

# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ()
# The only entries `read` may claim (base.Claims):
# a database (its header), its -wal, -shm, -journal.
CLAIMS = Claims(suffixes=tuple(PARTS), leading=MAGIC[:1])


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


wants = wants_none  # any name: a database is found when locked, or named


def _part(file: LockFile) -> tuple[str, str] | None:
    """(the database's path, what this part is) for a `-wal`, `-shm` or
    `-journal` file beside an existing database; None otherwise."""
    for suffix, what in PARTS.items():
        if file.path.endswith(suffix) and len(file.name) > len(suffix):
            database = file.path[: -len(suffix)]
            if not os.path.isfile(database):
                return None
            raw = file.raw
            if suffix == "-wal" and raw and raw[:4] not in _WAL_MAGICS:
                return None
            if suffix == "-journal" and raw.strip(b"\x00") and not raw.startswith(_JOURNAL_MAGIC):
                return None
            return database, what
    return None


def read(file: LockFile) -> Lock | None:
    if file.kind != "file":
        return None
    if file.raw.startswith(MAGIC):
        wal = len(file.raw) > _WRITE_VERSION and file.raw[_WRITE_VERSION] == 2
        return _file_lock(
            file, name=file.name, content={"journal_mode": "wal" if wal else "rollback"}
        )
    part = _part(file)
    if part is None:
        return None
    database, what = part
    note = Reason(
        "sqlite_part",
        f"the {what} of the SQLite database {os.path.basename(database)}: its locks are told"
        " on the database's own row",
    )
    return _file_lock(
        file, name=f"{file.name}", content={"database": database, "part": what}, notes=(note,)
    )


# -- the kernel's locks in SQLite's words --------------------------------------


def _covers(lock: KernelLock, first: int, last: int) -> bool:
    return lock.start <= first and (lock.end is None or lock.end >= last)


def database_level(locks: Sequence[KernelLock]) -> str | None:
    """One process's SQLite lock on a database from its kernel locks there
    (POSIX locks of one process merge: EXCLUSIVE is one range over all three)."""
    writes = [lock for lock in locks if lock.mode == "WRITE"]
    if any(_covers(lock, SHARED_FIRST, SHARED_LAST) for lock in writes):
        return "EXCLUSIVE"
    if any(_covers(lock, PENDING_BYTE, PENDING_BYTE) for lock in writes):
        return "PENDING"
    if any(_covers(lock, RESERVED_BYTE, RESERVED_BYTE) for lock in writes):
        return "RESERVED"
    if any(_covers(lock, SHARED_FIRST, SHARED_LAST) for lock in locks):
        return "SHARED"
    if any(_covers(lock, PENDING_BYTE, PENDING_BYTE) for lock in locks):
        return "SHARED"  # taking it: the pending byte is read-locked for a moment
    return None


def shm_roles(locks: Sequence[KernelLock]) -> list[str]:
    """One process's WAL locks on a `-shm` file, in words, most telling first."""
    roles = []
    writes = [lock for lock in locks if lock.mode == "WRITE"]
    if any(_covers(lock, SHM_WRITE, SHM_WRITE) for lock in writes):
        roles.append("the WAL write lock (a write transaction)")
    if any(_covers(lock, SHM_CHECKPOINT, SHM_CHECKPOINT) for lock in writes):
        roles.append("checkpointing")
    if any(_covers(lock, SHM_RECOVER, SHM_RECOVER) for lock in writes):
        roles.append("recovering the WAL index")
    if any(_covers(lock, mark, mark) for lock in locks for mark in SHM_READERS):
        roles.append("reading (a WAL read mark)")
    if any(_covers(lock, SHM_DMS, SHM_DMS) for lock in locks):
        roles.append("open")
    return roles


def _by_process(locks: Sequence[KernelLock]) -> dict[int, list[KernelLock]]:
    out: dict[int, list[KernelLock]] = {}
    for lock in locks:
        pid = lock.holder_pid
        if pid is not None:
            out.setdefault(pid, []).append(lock)
    return out


def _one_each(locks: Sequence[KernelLock]) -> tuple[KernelLock, ...]:
    seen: set[int | None] = set()
    out = []
    for lock in locks:
        if lock.holder_pid not in seen:
            seen.add(lock.holder_pid)
            out.append(lock)
    return tuple(out)


def _label(pid: int, locks: Sequence[KernelLock]) -> str:
    for lock in locks:
        for holder in lock.holders:
            if holder.pid == pid:
                return holder.label
    return f"pid {pid}"


def _key_of(path: str) -> FileKey | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return FileKey.of(st.st_dev, st.st_ino)


def companions(lock: Lock) -> tuple[str, ...]:
    """The files besides the database whose locks `explain` reads: its -shm."""
    if lock.path is None or not isinstance(lock.content, dict) or "part" in lock.content:
        return ()
    return (lock.path + "-shm",)


def explain(
    lock: Lock, evidence: KernelEvidence, held_on: HeldOn, open_by: OpenBy
) -> tuple[Lock, KernelEvidence]:
    """The database's kernel locks (and its `-shm` file's) in SQLite's words,
    with the process holding a write transaction first (the holder), and who
    else has it open. A part (`-wal`, `-shm`) is told on its database's row."""
    if lock.path is None or not isinstance(lock.content, dict) or "part" in lock.content:
        return lock, evidence
    shm_key = _key_of(lock.path + "-shm")
    shm_locks = held_on(shm_key) if shm_key is not None else ()
    db = _by_process(evidence.holds)
    shm = _by_process(shm_locks)
    notes: list[Reason] = []
    writers: list[KernelLock] = []
    readers: list[str] = []
    for pid in sorted(set(db) | set(shm)):
        level = database_level(db.get(pid, ()))
        roles = shm_roles(shm.get(pid, ()))
        who = _label(pid, [*db.get(pid, ()), *shm.get(pid, ())])
        if level in ("RESERVED", "PENDING", "EXCLUSIVE"):
            notes.append(Reason("sqlite_write", f"{who} holds {_LEVEL_WORDS[level]}"))
            writers.extend(db[pid])
        elif roles and roles[0].startswith("the WAL write lock"):
            notes.append(Reason("sqlite_write", f"{who} holds {roles[0]} in WAL mode"))
            writers.extend(lock for lock in shm[pid] if _covers(lock, SHM_WRITE, SHM_WRITE))
        elif roles and roles[0] in ("checkpointing", "recovering the WAL index"):
            notes.append(Reason("sqlite_wal", f"{who} is {roles[0]}"))
            writers.extend(shm[pid])
        elif level == "SHARED" and roles and roles[0].startswith("reading"):
            readers.append(f"{who}: SHARED, reading in WAL mode")
        elif level == "SHARED" and roles:
            readers.append(f"{who}: open in WAL mode (no transaction)")
        elif level == "SHARED":
            readers.append(f"{who}: {_LEVEL_WORDS['SHARED']}")
    if readers:
        notes.append(Reason("sqlite_read", "; ".join(readers)))
    if evidence.holds and not notes:
        notes.append(Reason("sqlite_locks", "kernel locks on it outside SQLite's lock bytes"))
    holders = {pid for pid in (*db, *shm)}
    key = facts_of(lock).file_key
    others = [pid for pid in (open_by(key) if key is not None else ()) if pid not in holders]
    if others and writers:
        listed = ", ".join(f"pid {pid}" for pid in others[:8])
        notes.append(
            Reason(
                "sqlite_open",
                f"also open in {listed}: SQLite's other writers wait by retrying (busy_timeout),"
                ' not in the kernel\'s queue; one that gives up says "database is locked"',
            )
        )
    elif others:
        listed = ", ".join(f"pid {pid}" for pid in others[:8])
        notes.append(Reason("sqlite_open", f"open in {listed}, no SQLite lock held there"))
    # One hold per process, the writer's first: "held by X and N more" counts processes.
    holds = _one_each((*writers[:1], *evidence.holds, *shm_locks))
    if holds != evidence.holds:
        evidence = replace(evidence, holds=holds)
    return amended(lock, notes=(*lock.notes, *notes)), evidence


handover = no_handover  # a database, not a lock record


refresh = no_refresh
