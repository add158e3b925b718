"""Process facts from psutil, cached per pid for the life of one lookup table."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import psutil

from lockwatch.model.process import HostPid, ProcessFacts, host_pid_in

if TYPE_CHECKING:
    from lockwatch.model.activity import ProcessActivity

# Ancestry is walked this far up at most (a fork bomb's chain must not cost much).
MAX_ANCESTORS = 64


class PsutilProcesses:
    """Answers `facts(pid)` for this host. One instance per scan or tick, so a pid
    asked about by many locks costs one look, and a later tick sees fresh facts.

    Create it after the lock files were read: the pid list it takes on first use
    then includes every holder that was alive when its lock was read (a process
    writes its lock after it starts), so "not listed" means dead.
    """

    def __init__(self) -> None:
        self._cache: dict[int, ProcessFacts] = {}
        self._users: dict[int, str | None] = {}
        self._running: frozenset[int] | None = None
        # Pid namespace inode -> {pid in it: pid here}, read once, on first need
        # (only a lock naming a pid namespace asks); None in it: cannot tell.
        self._namespaces: dict[int, dict[int, int]] | None = None
        self._namespaces_read = False

    def _is_running(self, pid: int) -> bool:
        # One listing of /proc instead of a kill(pid, 0) per pid: with thousands of
        # stale locks the syscalls add up.
        if self._running is None:
            self._running = frozenset(psutil.pids())
        return pid in self._running

    def facts(self, pid: int) -> ProcessFacts:
        cached = self._cache.get(pid)
        if cached is None:
            cached = self._cache[pid] = self._look(pid)
        return cached

    def host_pid(self, pid: int, namespace: int) -> HostPid:
        if not self._namespaces_read:
            self._namespaces = _pid_namespaces()
            self._namespaces_read = True
        return host_pid_in(self._namespaces, pid, namespace)

    def _look(self, pid: int) -> ProcessFacts:
        # Positional (pid, alive): made for each dead pid a scan meets, thousands of them.
        dead = ProcessFacts(pid, False)
        try:
            if pid <= 0 or not self._is_running(pid):
                return dead
            process = psutil.Process(pid)
            with process.oneshot():
                if process.status() == psutil.STATUS_ZOMBIE:
                    return dead  # exited; only its parent has not reaped it
                started = datetime.fromtimestamp(process.create_time(), tz=UTC)
                try:
                    cmdline = tuple(process.cmdline())
                except psutil.AccessDenied:
                    cmdline = ()
                user = self._user(process)
                parent = process.ppid()
        except (psutil.NoSuchProcess, ValueError, OverflowError):
            return dead
        except psutil.AccessDenied:
            # It is listed in /proc, but hides its details from us.
            return ProcessFacts(pid=pid, alive=True)
        return ProcessFacts(
            pid=pid,
            alive=True,
            started_at=started,
            cmdline=cmdline,
            user=user,
            ancestors=_ancestors(parent),
            start_ticks=_start_ticks(pid),
            boot_time=_boot_time(),
        )

    def _user(self, process: psutil.Process) -> str | None:
        try:
            uid = process.uids().real
        except psutil.AccessDenied:
            return None
        if uid not in self._users:
            try:
                self._users[uid] = process.username()
            except (psutil.AccessDenied, KeyError):
                self._users[uid] = str(uid)
        return self._users[uid]


def _ancestors(parent: int) -> tuple[int, ...]:
    chain: list[int] = []
    while parent > 0 and parent not in chain and len(chain) < MAX_ANCESTORS:
        chain.append(parent)
        try:
            parent = psutil.Process(parent).ppid()
        except (psutil.Error, ValueError):
            break
    return tuple(chain)


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (after the command, which may hold spaces
    and parentheses: counted from the last ")")."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read()
        fields = text[text.rindex(b")") + 2 :].split()
        return int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _boot_time() -> float | None:
    try:
        return float(psutil.boot_time())
    except (OSError, RuntimeError):
        return None


def _pid_namespaces(proc: str = "/proc") -> dict[int, dict[int, int]] | None:
    """Every pid namespace a process here is in, by inode, with each of its
    processes' pid in it (the last `NSpid:` column) and here (the first). A
    process whose namespace link cannot be read (a non-dumpable one) but that
    has one `NSpid:` column is in /proc's own namespace. None when that is not
    enough (not root: other users' processes may be hidden; some unreadable
    process is in a namespace of its own; no /proc): a namespace
    not found may then still exist."""
    if os.geteuid() != 0:
        return None  # other users' processes may be hidden (hidepid) or unreadable
    namespaces: dict[int, dict[int, int]] = {}
    own: int | None = None  # the inode of /proc's pid namespace, once seen
    hidden: list[int] = []  # pids of /proc's namespace whose link could not be read
    try:
        entries = os.listdir(proc)
    except OSError:
        return None
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/status", "rb") as handle:
                pids = _nspid(handle.read())
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited meanwhile
        except OSError:
            return None
        try:
            link: str | None = os.readlink(f"{proc}/{entry}/ns/pid")
        except (FileNotFoundError, ProcessLookupError):
            continue
        except PermissionError:
            link = None
        except OSError:
            return None
        if pids is None:
            return None  # a kernel before 4.1: no NSpid line
        if link is None:
            if len(pids) > 1:
                return None
            hidden.append(pids[0])
            continue
        if not link.startswith("pid:[") or not link.endswith("]"):
            return None
        inode = int(link[5:-1])
        if len(pids) == 1:
            own = inode
        namespaces.setdefault(inode, {})[pids[-1]] = pids[0]
    if hidden:
        if own is None:
            return None
        mine = namespaces.setdefault(own, {})
        mine.update((pid, pid) for pid in hidden)
    return namespaces


def _nspid(status: bytes) -> list[int] | None:
    for line in status.splitlines():
        if line.startswith(b"NSpid:"):
            try:
                pids = [int(field) for field in line.split()[1:]]
            except ValueError:
                return None
            return pids or None
    return None


# System calls that wait on input, by machine: read(fd, ...), and select-like
# calls whose first argument is the highest fd watched plus one (1: stdin alone).
# poll-like calls name their fds in memory: read from /proc/PID/mem (root).
_READS = {"x86_64": {0: "read"}, "aarch64": {63: "read"}}
_SELECTS = {"x86_64": {23: "select", 270: "pselect6"}, "aarch64": {72: "pselect6"}}
_POLLS = {"x86_64": {7: "poll", 271: "ppoll"}, "aarch64": {73: "ppoll"}}


def read_activity(pid: int, proc: str = "/proc") -> ProcessActivity | None:
    """What process `pid` is doing at this moment, as /proc shows it: its state,
    whether it is in the foreground of the terminal on its stdin and, where its
    system call can be read, whether that call waits on that terminal alone.
    None: no such process (or /proc hides it)."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as handle:
            stat = handle.read()
        fields = stat[stat.rindex(b")") + 2 :].split()
        state, pgrp, tpgid = fields[0].decode(), int(fields[2]), int(fields[5])
    except (OSError, ValueError, IndexError):
        return None
    from lockwatch.model.activity import ProcessActivity

    terminal = _stdin_terminal(pid, proc)
    foreground = terminal is not None and pgrp == tpgid
    reads = _reads_stdin(pid, proc) if foreground and state == "S" else None
    wchan = _read_text(f"{proc}/{pid}/wchan")
    children = _children(pid, proc) if (wchan or "").startswith("do_wait") else ()
    return ProcessActivity(state, terminal, foreground, reads, wchan, children)


def _children(pid: int, proc: str) -> tuple[str, ...]:
    """Its children as `sleep (pid 4243)` (/proc/PID/task/PID/children: Linux ≥ 3.5)."""
    listed = _read_text(f"{proc}/{pid}/task/{pid}/children") or ""
    said = []
    for child in listed.split()[:3]:
        name = _read_text(f"{proc}/{child}/comm")
        said.append(f"{name} (pid {child})" if name else f"pid {child}")
    return tuple(said)


def _stdin_terminal(pid: int, proc: str) -> str | None:
    try:
        target = os.readlink(f"{proc}/{pid}/fd/0")
    except OSError:
        return None
    return target if target.startswith(("/dev/pts/", "/dev/tty")) else None


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def _reads_stdin(pid: int, proc: str) -> bool | None:
    """Whether the system call `pid` sleeps in waits on fd 0 alone: True, False
    (another call or other fds), None (unreadable: /proc/PID/syscall needs
    ptrace access; or a call whose fds cannot be read)."""
    said = _read_text(f"{proc}/{pid}/syscall")
    if said is None or said == "running":
        return None
    parts = said.split()
    try:
        number, first, second = int(parts[0]), int(parts[1], 16), int(parts[2], 16)
    except (ValueError, IndexError):
        return None  # "-1 …": blocked outside a system call
    machine = os.uname().machine
    if number in _READS.get(machine, {}):
        return first == 0
    if number in _SELECTS.get(machine, {}):
        return first == 1
    if number in _POLLS.get(machine, {}):
        return _polls_stdin(pid, proc, first, second)
    return False


def _polls_stdin(pid: int, proc: str, fds: int, count: int) -> bool | None:
    """poll(fds, count, …) waits on stdin alone: one struct pollfd, its fd 0."""
    if count != 1:
        return False
    try:
        with open(f"{proc}/{pid}/mem", "rb") as handle:
            handle.seek(fds)
            raw = handle.read(4)
    except (OSError, ValueError, OverflowError):
        return None
    return None if len(raw) != 4 else int.from_bytes(raw, sys.byteorder, signed=True) == 0
