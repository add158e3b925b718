"""The kernel's file locks as procfs shows them: /proc/locks, the holders found
through /proc/<pid>/fdinfo, the files' paths through /proc/<pid>/fd.

Linux only; without root, other users' processes hide their fds, and the table
then says how many could not be looked at (`unreadable_fds`, `problem`).

What the kernel prints, and what this module makes of it:

* /proc/locks, one line per lock, waiters (`->`) after the lock they wait for,
  with its ordinal: `1: FLOCK  ADVISORY  WRITE 4242 fe:00:2147556 0 EOF`. The
  device is hex; FileKey wants it in decimal, as `os.major`/`os.minor` give it.
  Waiters of waiters are indented further (`1:  -> ...`); they too are blocked,
  in the end, by the lock with that ordinal.
* /proc/<pid>/fdinfo/<fd> has a `lock:\t` line in the same format for each
  lock held through that open file: flock and OFD locks in every process that
  shares the open file description (a child that inherited the fd, say), POSIX
  locks in their owner only. The ordinal there counts the fd's own locks (it
  is `1` for the first), so lines are matched to /proc/locks by content.
* The pid is the taker's for a flock (it may have exited, leaving the lock with
  a child), the owner's for a POSIX lock, and -1 for an OFD lock, whose holders
  only fdinfo names. An OFD *waiter* is -1 too, and fdinfo lists granted locks
  only: it has no owner here (so no holder's `blocking` names it), though
  `waiters_on` counts it.

A deleted file keeps its locks: `/proc/<pid>/fd/<n>` then reads `<old path>
(deleted)`. That old name is not given as the lock's path: another file may
live there now (unlink-and-recreate is how lock files are often replaced), and
an action on the path would hit the wrong file. Such a lock has `path=None`
unless `known` names the inode (another hard link).

Below both the kernel source (its rows) and the file source (a lock file's
kernel evidence), which read it alike.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import field, replace
from typing import Literal

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.slots import lean_dataclass
from lockwatch.sources.filelocks import NO_EVIDENCE, FileKey, KernelEvidence, KernelLock
from lockwatch.sources.holders import Describer

__all__ = [
    "KernelTable",
    "OpenFiles",
    "open_files",
    "parse_proc_locks",
    "read_table",
]

_TYPES = frozenset({"FLOCK", "POSIX", "OFDLCK"})
_KINDS = {"ADVISORY": False, "MANDATORY": True}
_MODES = frozenset({"READ", "WRITE"})

# One lock as /proc/locks (and fdinfo after `lock:`) prints it. Fields are
# checked by name afterwards so that a lease or an unknown type is skipped, not
# misread; re.ASCII keeps `\d` from accepting other scripts' digits.
_LINE = lazy_compile(
    r"\s*(?P<ordinal>\d+):\s+(?P<arrow>->\s+)?"
    r"(?P<type>\S+)\s+(?P<kind>\S+)\s+(?P<mode>\S+)\s+(?P<pid>-?\d+)\s+"
    r"(?P<major>[0-9a-fA-F]+):(?P<minor>[0-9a-fA-F]+):(?P<inode>\d+)\s+"
    r"(?P<start>\d+)\s+(?P<end>\d+|EOF)\s*",
    re.ASCII,
)

_DELETED = " (deleted)"
_PF_KTHREAD = 0x00200000  # include/linux/sched.h
# Big enough for /proc/locks in one read() on any sane host: the kernel builds
# each chunk afresh, and locks taken between two chunks would shift ordinals.
_READ_CHUNK = 1 << 20


# -- parsing ------------------------------------------------------------------------


def parse_proc_locks(text: str) -> list[KernelLock]:
    """The flock, POSIX and OFD locks in a /proc/locks text, holders and waiters,
    in the kernel's order. Leases, delegations and lines that do not parse are
    skipped: this never raises on what procfs (or a fake of it) says."""
    locks = []
    for line in text.splitlines():
        lock = _parse_line(line)
        if lock is not None:
            locks.append(lock)
    return locks


def _parse_line(line: str) -> KernelLock | None:
    match = _LINE.fullmatch(line)
    if match is None:
        return None
    type_, kind, mode = match["type"], match["kind"], match["mode"]
    if type_ not in _TYPES or kind not in _KINDS or mode not in _MODES:
        return None
    start = int(match["start"])
    end = None if match["end"] == "EOF" else int(match["end"])
    if end is not None and end < start:
        return None
    return KernelLock(
        ordinal=int(match["ordinal"]),
        type=type_,
        mode=mode,
        file=FileKey(f"{int(match['major'], 16)}:{int(match['minor'], 16)}", int(match["inode"])),
        start=start,
        end=end,
        pid=int(match["pid"]),
        waiting=match["arrow"] is not None,
        mandatory=_KINDS[kind],
    )


def _fdinfo_locks(text: str) -> list[KernelLock]:
    return [
        lock
        for line in text.splitlines()
        if line.startswith("lock:") and (lock := _parse_line(line[5:])) is not None
    ]


# A lock as both files print it, minus the ordinal, which differs between them.
_Signature = tuple[str, str, FileKey, int, int | None, int]


def _signature(lock: KernelLock) -> _Signature:
    return (lock.type, lock.mode, lock.file, lock.start, lock.end, lock.pid)


# -- reading procfs -------------------------------------------------------------------


def _read_text(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, _READ_CHUNK):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("ascii", errors="replace")


def _pids(proc: str) -> Iterator[int]:
    try:
        names = os.listdir(proc)
    except OSError:
        return
    for name in names:
        if name.isdigit():
            yield int(name)


def _ignorable(proc: str, pid: int) -> bool:
    """Whether an unreadable fd directory hides nothing: a kernel thread (no
    files), a zombie (its files are closed) or a process gone meanwhile."""
    try:
        text = _read_text(f"{proc}/{pid}/stat")
    except OSError:
        return True
    # `pid (comm) state ppid pgrp session tty tpgid flags ...`; comm may hold
    # spaces and parentheses, so fields count from the last `)`.
    fields = text[text.rfind(")") + 1 :].split()
    try:
        return fields[0] in ("Z", "X") or bool(int(fields[6]) & _PF_KTHREAD)
    except (IndexError, ValueError):
        return False


_Listing = list[str] | Literal["unreadable", "gone"]


def _fd_names(proc: str, pid: int) -> _Listing:
    try:
        return os.listdir(f"{proc}/{pid}/fd")
    except PermissionError:
        return "gone" if _ignorable(proc, pid) else "unreadable"
    except OSError:
        return "gone"


@lean_dataclass(frozen=True, slots=True)
class _Fd:
    """One open regular-looking file of a process."""

    fd_path: str  # /proc/<pid>/fd/<n>
    link: str  # what readlink says: the path, maybe with " (deleted)"
    stat: os.stat_result


def _files(proc: str, pid: int, names: Iterable[str], inodes: frozenset[int] | None) -> list[_Fd]:
    """The fds among `names` that are files (not sockets, pipes or anonymous
    inodes), restricted to those whose inode number is in `inodes` if given."""
    base = f"{proc}/{pid}/fd/"
    if inodes is None:
        found = (_file(base + name) for name in names)
    else:
        found = (_file_with(base + name, inodes) for name in names)
    return [fd for fd in found if fd is not None]


def _file(fd_path: str) -> _Fd | None:
    """The fd at `fd_path` if it is a file; None if not, or closed since the listing."""
    try:
        link = os.readlink(fd_path)
    except OSError:
        return None
    # `socket:[…]`, `pipe:[…]`, `anon_inode:…`: never a lock file, and a
    # readlink is cheaper than the stat that would say so.
    if not link.startswith("/"):
        return None
    try:
        return _Fd(fd_path, link, os.stat(fd_path))
    except OSError:
        return None


def _file_with(fd_path: str, inodes: frozenset[int]) -> _Fd | None:
    """The fd at `fd_path` if its inode number is in `inodes`: the inode first
    (one stat, which a socket or a pipe answers too), the link only then, since
    a scan of every process's fds looks at thousands that never match."""
    try:
        st = os.stat(fd_path)
        if st.st_ino not in inodes:
            return None
        link = os.readlink(fd_path)
    except OSError:
        return None  # closed since the listing
    return _Fd(fd_path, link, st) if link.startswith("/") else None


def _path_of(fd: _Fd) -> str | None:
    """The file's path now, or None if its name is gone (see the module doc)."""
    if not fd.link.endswith(_DELETED):
        return fd.link
    if fd.stat.st_nlink == 0:
        return None
    # Still linked somewhere: either the name that was unlinked (another hard
    # link remains) or a file whose real name ends in " (deleted)". Only the
    # second is a path to this file.
    try:
        st = os.stat(fd.link)
    except OSError:
        return None
    return fd.link if (st.st_dev, st.st_ino) == (fd.stat.st_dev, fd.stat.st_ino) else None


# -- open files -------------------------------------------------------------------------


@lean_dataclass(frozen=True)
class OpenFiles:
    """Which live processes have which files open, the calling process aside
    (lockwatch's own fds never hold anybody's lock file)."""

    by_file: Mapping[FileKey, tuple[int, ...]] = field(default_factory=dict)
    # Processes whose fds could not be read (another user's, without root):
    # a file may be open in one of them.
    unreadable: int = 0

    def pids(self, key: FileKey) -> tuple[int, ...]:
        return self.by_file.get(key, ())


def open_files(proc: str = "/proc") -> OpenFiles:
    """Every process's open files, once: for lock files no kernel lock covers,
    to tell "nobody has it open" from "someone has it open without a lock"."""
    me = os.getpid()
    found: dict[FileKey, list[int]] = {}
    unreadable = 0
    for pid in _pids(proc):
        if pid == me:
            continue
        names = _fd_names(proc, pid)
        if names == "unreadable":
            unreadable += 1
            continue
        if names == "gone":
            continue
        keys = {FileKey.of(fd.stat.st_dev, fd.stat.st_ino) for fd in _files(proc, pid, names, None)}
        for key in keys:
            found.setdefault(key, []).append(pid)
    return OpenFiles({key: tuple(pids) for key, pids in found.items()}, unreadable)


# -- the table ----------------------------------------------------------------------------


@lean_dataclass(frozen=True)
class KernelTable:
    """/proc/locks at one moment: every flock, POSIX and OFD lock, granted and
    waiting, with owners, paths and who blocks whom filled in."""

    locks: tuple[KernelLock, ...] = ()
    readable: bool = True  # False: /proc/locks could not be read; `locks` is empty
    problem: str | None = None  # one line for an operator, if something was hidden
    unreadable_fds: int = 0  # processes whose fds were needed but could not be read
    # Lookups by file, built once: a scan asks about thousands of lock files.
    _held: dict[FileKey, tuple[KernelLock, ...]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    _waiting: dict[FileKey, int] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        held: dict[FileKey, list[KernelLock]] = {}
        for lock in self.locks:
            if lock.waiting:
                self._waiting[lock.file] = self._waiting.get(lock.file, 0) + 1
            else:
                held.setdefault(lock.file, []).append(lock)
        self._held.update((key, tuple(locks)) for key, locks in held.items())

    def held_on(self, key: FileKey) -> tuple[KernelLock, ...]:
        """The granted kernel locks on the file."""
        return self._held.get(key, ())

    def waiters_on(self, key: FileKey) -> int:
        """How many lock requests on the file are blocked."""
        return self._waiting.get(key, 0)

    def evidence(
        self, key: FileKey, open_files: OpenFiles | None = None, was_held: bool = False
    ) -> KernelEvidence:
        """What the kernel says about one lock file. `open_files` is only worth
        passing (and building) when nobody holds a lock on it."""
        holds = self.held_on(key)
        waiters = self.waiters_on(key)
        open_by = open_files.pids(key) if open_files is not None else ()
        open_unknown = open_files is not None and open_files.unreadable > 0
        if not (holds or waiters or open_by or open_unknown or was_held):
            return NO_EVIDENCE
        return KernelEvidence(holds, waiters, open_by, open_unknown, was_held)


def read_table(
    proc: str = "/proc",
    known: Mapping[FileKey, str] | None = None,
    only: AbstractSet[FileKey] | None = None,
) -> KernelTable:
    """/proc/locks now, with each lock's owners (as processes too) and path.

    A flock or OFD lock belongs to an open file, which every process that
    inherited it shares: its owners are all of them (lslocks' HOLDERS), so
    with such a lock every process's fds are looked through, once, and only
    the fds whose inode a lock is on are read further. With POSIX locks alone
    the processes /proc/locks names are enough, unless one of them does not
    have its file (exited): then every process's. Nothing is read beyond
    /proc/locks while it lists no lock. `known` gives paths (by inode, under
    watched roots) for files no fd names. `only`: the files that matter (a
    scan's lock files); the locks on others are left out before any process
    is looked at, so a host's thousands of other locks cost a scan nothing.
    """
    where = f"{proc}/locks"
    try:
        text = _read_text(where)
    except OSError as exc:
        return KernelTable(readable=False, problem=f"{where} unreadable: {exc.strerror or exc}")
    parsed = parse_proc_locks(text)
    if only is not None:
        parsed = [lock for lock in parsed if lock.file in only]
    if not parsed:
        return KernelTable()
    finder = _OwnerFinder(proc, parsed)
    if any(lock.type != "POSIX" and not lock.waiting for lock in parsed):
        finder.scan(_pids(proc))
    else:
        finder.scan(_first_pids(parsed))
        if finder.needs_full_scan():
            finder.scan(_pids(proc))
    locks = _with_holders(proc, _link_waiters(finder.resolve(known or {})))
    problem = None
    if finder.unreadable:
        n = finder.unreadable
        problem = (
            f"fds of {n} process{'es' if n != 1 else ''} unreadable"
            " (other users'; run as root to see them)"
        )
    return KernelTable(tuple(locks), problem=problem, unreadable_fds=finder.unreadable)


def _first_pids(locks: Iterable[KernelLock]) -> list[int]:
    # Waiters' pids too: their fds name the file when its holder's cannot.
    return list(dict.fromkeys(lock.pid for lock in locks if lock.pid > 0))


class _OwnerFinder:
    """Who holds each lock, and where its file is, from processes' fds."""

    def __init__(self, proc: str, locks: list[KernelLock]) -> None:
        self.proc = proc
        self.locks = locks
        self.keys = frozenset(lock.file for lock in locks)
        # Inode numbers alone pick out the fds worth a look at fdinfo: the
        # device the kernel prints need not be the one stat gives (btrfs
        # subvolumes), and fdinfo's own lines then still name the lock.
        self.inodes = frozenset(key.inode for key in self.keys)
        self.state: dict[int, Literal["read", "unreadable", "gone"]] = {}
        self.holders: dict[_Signature, list[int]] = {}
        self.has_file: dict[int, set[FileKey]] = {}
        # Per file, per process that has it open: its path (None: deleted).
        self.paths: dict[FileKey, dict[int, str | None]] = {}
        self.unreadable = 0

    def scan(self, pids: Iterable[int]) -> None:
        for pid in pids:
            if pid in self.state:
                continue
            names = _fd_names(self.proc, pid)
            if names == "unreadable":
                self.unreadable += 1
            if names == "unreadable" or names == "gone":
                self.state[pid] = names
                continue
            self.state[pid] = "read"
            for fd in _files(self.proc, pid, names, self.inodes):
                self._look(pid, fd)

    def _look(self, pid: int, fd: _Fd) -> None:
        try:
            pid_dir, _, number = fd.fd_path.rpartition("/fd/")
            held = _fdinfo_locks(_read_text(f"{pid_dir}/fdinfo/{number}"))
        except OSError:
            held = []
        names = {FileKey.of(fd.stat.st_dev, fd.stat.st_ino)} | {lock.file for lock in held}
        for key in names & self.keys:
            self.has_file.setdefault(pid, set()).add(key)
            per_pid = self.paths.setdefault(key, {})
            if per_pid.get(pid) is None:
                per_pid[pid] = _path_of(fd)
        for lock in held:
            pids = self.holders.setdefault(_signature(lock), [])
            if pid not in pids:
                pids.append(pid)

    def _known_holder(self, lock: KernelLock) -> bool:
        """Whether the fds looked at so far settle who holds `lock`."""
        if lock.type == "OFDLCK" or lock.pid <= 0:
            return bool(self.holders.get(_signature(lock)))
        state = self.state.get(lock.pid)
        if state == "unreadable":
            # Nothing better can be learnt without root: the pid is the guess.
            return True
        if state != "read":
            return False
        if lock.pid in self.holders.get(_signature(lock), ()):
            return True
        # A POSIX lock belongs to its pid while that process has the file.
        return lock.type == "POSIX" and lock.file in self.has_file.get(lock.pid, set())

    def needs_full_scan(self) -> bool:
        return any(not lock.waiting and not self._known_holder(lock) for lock in self.locks)

    def _owners(self, lock: KernelLock) -> tuple[int, ...]:
        if lock.waiting:
            return (lock.pid,) if lock.pid > 0 else ()
        found = self.holders.get(_signature(lock), [])
        state = self.state.get(lock.pid)
        # The taker comes first when it holds the lock, or when its fds are
        # hidden: then nothing better is known. A POSIX lock is its pid's as
        # long as that process has the file (fdinfo names it in one fd only).
        taker = lock.pid > 0 and (
            lock.pid in found
            or state == "unreadable"
            or (lock.type == "POSIX" and lock.file in self.has_file.get(lock.pid, ()))
        )
        if taker:
            return (lock.pid, *(pid for pid in found if pid != lock.pid))
        return tuple(found)

    def _path(self, lock: KernelLock, owners: tuple[int, ...]) -> str | None:
        per_pid = self.paths.get(lock.file, {})
        for pid in owners:
            path = per_pid.get(pid)
            if path is not None:
                return path
        return next((path for path in per_pid.values() if path is not None), None)

    def resolve(self, known: Mapping[FileKey, str]) -> list[KernelLock]:
        out = []
        for lock in self.locks:
            owners = self._owners(lock)
            path = self._path(lock, owners) or known.get(lock.file)
            # A flock belongs to its open file, which nobody's fds hold: the
            # taker's were read or it is gone (with its fds hidden it stays the
            # best guess, among `owners`). A POSIX lock is its pid's, fd or not.
            unseen = not owners and not lock.waiting and lock.pid > 0 and lock.type != "POSIX"
            out.append(replace(lock, owners=owners, path=path, owner_unseen=unseen))
        return out


def _with_holders(proc: str, locks: list[KernelLock]) -> list[KernelLock]:
    """Each lock's owners described as processes, each process once."""
    describe = Describer(proc)
    out = []
    for lock in locks:
        found = (describe(pid) for pid in lock.owners)
        holders = tuple(holder for holder in found if holder is not None)
        out.append(replace(lock, holders=holders) if holders else lock)
    return out


def holds(proc: str, pid: int, lock: KernelLock) -> bool:
    """Whether process `pid` holds `lock` (a granted lock as read_table gave
    it) through one of its fds now: only that process's fds are read."""
    finder = _OwnerFinder(proc, [replace(lock, owners=())])
    finder.scan([pid])
    return finder.state.get(pid) == "read" and pid in finder.resolve({})[0].owners


def listed(proc: str = "/proc") -> list[KernelLock] | None:
    """/proc/locks alone (no owners, no paths); None when it cannot be read."""
    try:
        return parse_proc_locks(_read_text(f"{proc}/locks"))
    except OSError:
        return None


def _link_waiters(locks: list[KernelLock]) -> list[KernelLock]:
    """Each waiter's `blocked_by` (the owners of the lock its ordinal names)
    and each holder's `blocking` (the pids waiting for it)."""
    granted: dict[int, KernelLock] = {}
    blocked: dict[int, list[int]] = {}
    for lock in locks:
        if not lock.waiting:
            granted.setdefault(lock.ordinal, lock)
        elif lock.holder_pid is not None:
            pids = blocked.setdefault(lock.ordinal, [])
            if lock.holder_pid not in pids:
                pids.append(lock.holder_pid)
    if not blocked and len(granted) == len(locks):
        return locks
    out = []
    for lock in locks:
        if lock.waiting:
            holder = granted.get(lock.ordinal)
            if holder is not None:
                pid = holder.holder_pid
                by = holder.owners or ((pid,) if pid is not None else ())
                lock = replace(lock, blocked_by=by)
        elif granted.get(lock.ordinal) is lock and lock.ordinal in blocked:
            lock = replace(lock, blocking=tuple(blocked[lock.ordinal]))
        out.append(lock)
    return out
