"""Process facts read from /proc, cached per pid for the life of one lookup table.

Read here rather than through psutil, whose import (socket, subprocess, selectors,
...) cost a one-shot `ls` more than the reads themselves. Each reading follows
psutil's for Linux (psutil/_pslinux.py: pids, stat, cmdline, status, btime) so
the facts do not change; tests/sources/test_processes.py compares them with
psutil's, field by field, for every live process.
"""

from __future__ import annotations

import os
import pwd
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lockwatch.model.process import HostPid, ProcessFacts, host_pid_in

if TYPE_CHECKING:
    from lockwatch.model.activity import ProcessActivity

# Ancestry is walked this far up at most (a fork bomb's chain must not cost much).
MAX_ANCESTORS = 64
# /proc/PID/stat counts a start in clock ticks since boot.
_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
# psutil decodes a command line as the file system's names are decoded.
_ENCODING, _ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


class HostProcesses:
    """Answers `facts(pid)` for this host. One instance per scan or tick, so a pid
    asked about by many locks costs one look, and a later tick sees fresh facts.

    Create it after the lock files were read: the pid list it takes on first use
    then includes every holder that was alive when its lock was read (a process
    writes its lock after it starts), so "not listed" means dead.
    """

    def __init__(self, proc: str = "/proc") -> None:
        self._proc = proc
        self._cache: dict[int, ProcessFacts] = {}
        self._users: dict[int, str] = {}
        self._running: frozenset[int] | None = None
        self._boot: float | None = None
        # Pid namespace inode -> {pid in it: pid here}, read once, on first need
        # (only a lock naming a pid namespace asks); None in it: cannot tell.
        self._namespaces: dict[int, dict[int, int]] | None = None
        self._namespaces_read = False

    def _is_running(self, pid: int) -> bool:
        # One listing of /proc instead of a kill(pid, 0) per pid: with thousands of
        # stale locks the syscalls add up.
        if self._running is None:
            self._running = frozenset(pids(self._proc))
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
        if pid <= 0 or not self._is_running(pid):
            return dead
        try:
            state, parent, ticks = read_stat(pid, self._proc)
            if state == "Z":
                return dead  # exited; only its parent has not reaped it
            cmdline = _cmdline_or_none(pid, self._proc)
            uid = _real_uid(pid, self._proc)
        except PermissionError:
            # It is listed in /proc, but hides its details from us.
            return ProcessFacts(pid=pid, alive=True)
        except (OSError, ValueError, IndexError):
            return dead  # gone since it was listed
        if cmdline is None:
            return dead  # became a zombie meanwhile
        boot = self._boot_time()
        return ProcessFacts(
            pid=pid,
            alive=True,
            started_at=None if boot is None else _started_at(ticks, boot),
            cmdline=cmdline,
            user=None if uid is None else self._user(uid),
            ancestors=_ancestors(parent, self._proc),
            start_ticks=ticks,
            boot_time=boot,
        )

    def _boot_time(self) -> float | None:
        if self._boot is None:
            self._boot = boot_time(self._proc)
        return self._boot

    def _user(self, uid: int) -> str:
        if uid not in self._users:
            self._users[uid] = user_name(uid)
        return self._users[uid]


def pids(proc: str = "/proc") -> list[int]:
    """Every process listed in /proc (zombies too), as psutil.pids() lists them."""
    return [int(entry) for entry in os.listdir(proc) if entry.isdigit()]


def read_stat(pid: int, proc: str = "/proc") -> tuple[str, int, int]:
    """State letter, parent pid and start (clock ticks since boot) of `pid`, from
    /proc/PID/stat. The command before them may hold spaces and parentheses:
    fields are counted from the last ")"."""
    with open(f"{proc}/{pid}/stat", "rb") as handle:
        data = handle.read()
    fields = data[data.rindex(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1]), int(fields[19])


def zombie(pid: int, proc: str = "/proc") -> bool:
    """Whether `pid` has exited (listed until it is reaped, holding nothing)."""
    try:
        return read_stat(pid, proc)[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True  # gone since it was listed
    except (OSError, ValueError, IndexError):
        return False  # not ours to inspect, but there


def read_cmdline(pid: int, proc: str = "/proc") -> tuple[str, ...]:
    """The arguments of `pid`, split as psutil splits them: by NUL when the text
    ends with one, else by space (a process that rewrote its title, such as
    Chrome, may use spaces); a NUL-ended text with no NUL inside but a space is
    split by space too. Empty for a kernel thread or a zombie. Read in text mode
    with the file system's encoding, as psutil reads it."""
    with open(f"{proc}/{pid}/cmdline", encoding=_ENCODING, errors=_ERRORS) as handle:
        data = handle.read()
    if not data:
        return ()
    sep = "\0" if data.endswith("\0") else " "
    if data.endswith(sep):
        data = data[:-1]
    args = data.split(sep)
    if sep == "\0" and len(args) == 1 and " " in data:
        args = data.split(" ")
    return tuple(args)


def _cmdline_or_none(pid: int, proc: str) -> tuple[str, ...] | None:
    """Its arguments; () when they are hidden; None when it is a zombie now (its
    cmdline reads empty then, like a kernel thread's)."""
    try:
        cmdline = read_cmdline(pid, proc)
    except PermissionError:
        return ()
    if not cmdline and zombie(pid, proc):
        return None
    return cmdline


def _real_uid(pid: int, proc: str) -> int | None:
    """The real uid of `pid` (/proc/PID/status `Uid:`); None when it is hidden."""
    try:
        with open(f"{proc}/{pid}/status", "rb") as handle:
            status = handle.read()
    except PermissionError:
        return None
    for line in status.splitlines():
        if line.startswith(b"Uid:"):
            return int(line.split()[1])
    raise ValueError(f"no Uid line for {pid}")


def user_name(uid: int) -> str:
    """The name of `uid`, or the number when no user has it (psutil's username())."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _started_at(ticks: int, boot: float) -> datetime:
    # psutil's create_time(): seconds since boot plus the boot's time, in that order.
    return datetime.fromtimestamp(ticks / _TICKS_PER_SECOND + boot, tz=UTC)


def _ancestors(parent: int, proc: str) -> tuple[int, ...]:
    chain: list[int] = []
    while parent > 0 and parent not in chain and len(chain) < MAX_ANCESTORS:
        chain.append(parent)
        try:
            parent = read_stat(parent, proc)[1]
        except (OSError, ValueError, IndexError):
            break
    return tuple(chain)


def boot_time(proc: str = "/proc") -> float | None:
    """The boot's time, seconds since the epoch (/proc/stat `btime`)."""
    try:
        with open(f"{proc}/stat", "rb") as handle:
            for line in handle:
                if line.startswith(b"btime"):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
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
