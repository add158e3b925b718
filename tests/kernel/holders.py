"""Real kernel-lock holders for the kernel-lock tests.

Every helper process here takes its lock with the real library or primitive it
is named after, exactly as that library's users do: filelock, portalocker,
fasteners and zc.lockfile as installed, util-linux `flock(1)`, and Python's
`fcntl.flock`, `fcntl.lockf` and the OFD `fcntl` call. No imitation: nothing
here writes what a library would write or fakes /proc/locks.

A holder is a child process (its own session, so its whole tree can be killed)
that takes the lock, then writes one byte (`R`) to its stdout. The parent blocks
reading that byte, with a deadline, so "held" is never a guess and never a sleep.
It then obeys lines on its stdin:

    release   drop the lock the library's way (unlock and close; libraries that
              unlink their file on release do so), keep living, answer `r`
    unlock    the raw primitives only: unlock but keep the file open, answer `r`
    exit      exit normally (the library's own exit handling runs)

A `waiter` (or `waiter_lockf`) writes `W` just before a blocking lock call; it
counts as started once /proc/locks shows its `->` line (a bounded poll on that
state), and writes `R` once the lock is granted to it.

`library_says_held(kind, path)` asks the library itself, in a fresh process,
with its own non-blocking exclusive attempt, whether the lock is held: the
ground truth lockwatch's verdicts are compared with.

Findings the kinds rely on (Linux, checked by tests/kernel/test_holders.py):
- flock and POSIX (fcntl/lockf) locks do not conflict with each other; OFD and
  POSIX locks do. So every probe uses the primitive of the kind it probes.
- POSIX locks belong to a process and are dropped when that process closes ANY
  descriptor of the file: a holder must never open and close its lock file
  again, and probes must run in a process of their own.
- /proc/locks names the process that made the flock() call: for `flock_fd`
  (`flock 9` in a shell) that is a flock(1) process which has already exited,
  while the shell holds the lock; for `flock_cmd` after its flock(1) process is
  killed, it is a dead pid while the command's process still holds the lock.
  OFD locks show pid -1. Only /proc/<pid>/fdinfo names the real holders.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

# lockf_range locks bytes [RANGE_START, RANGE_START + RANGE_LEN): /proc/locks
# shows "100 109".
RANGE_START = 100
RANGE_LEN = 10
READY_TIMEOUT = 15.0  # seconds a helper may take to lock, answer or die
POLL_S = 0.01

# F_OFD_SETLK on Linux (fcntl.h); Python >= 3.9 also exports it as fcntl.F_OFD_SETLK.
F_OFD_SETLK = 37
# struct flock on x86_64 Linux: short l_type, short l_whence, (pad 4), off_t
# l_start, off_t l_len, pid_t l_pid, (pad 4) = 32 bytes; offsets 0/2/8/16/24
# (checked against <fcntl.h> with gcc). l_pid must be 0 for OFD locks.
FLOCK_STRUCT = "hhqqi4x"


@dataclass(frozen=True, slots=True)
class Kind:
    """How a kind of holder locks, as /proc/locks will show it."""

    name: str
    type: str  # FLOCK, POSIX or OFDLCK
    mode: str = "WRITE"  # or READ
    start: int = 0
    end: int | None = None  # None: to EOF
    releasable: bool = True  # can release and live on
    keeps_open: bool = False  # can `unlock` (release but keep the file open)
    waiter: str = "waiter"  # the waiter kind that contends with it
    writes_pid: bool = False  # the locked file names the holder's pid
    sidecar: str | None = None  # the lock is on path + sidecar, not on path
    unlinks: bool = False  # release removes the file(s)
    library: str | None = None  # the pip package it needs


KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind("flock", "FLOCK", keeps_open=True),
        Kind("flock_shared", "FLOCK", mode="READ", keeps_open=True),
        Kind("lockf", "POSIX", keeps_open=True, waiter="waiter_lockf"),
        Kind(
            "lockf_range",
            "POSIX",
            start=RANGE_START,
            end=RANGE_START + RANGE_LEN - 1,
            keeps_open=True,
            waiter="waiter_lockf",
        ),
        Kind("ofd", "OFDLCK", keeps_open=True, waiter="waiter_lockf"),
        # `flock FILE sh -c ...`: flock(1) locks, then runs the command, which
        # inherits the locked descriptor. Nothing in it can release and go on.
        Kind("flock_cmd", "FLOCK", releasable=False),
        # The shell idiom `exec 9>>FILE; flock 9`: the shell holds the lock that a
        # short-lived flock(1) took; `flock -u 9` releases it.
        Kind("flock_fd", "FLOCK", keeps_open=True),
        Kind("filelock", "FLOCK", library="filelock"),
        Kind("portalocker", "FLOCK", library="portalocker"),
        # PidFileLock: the pid in PATH, the flock on PATH.lock; release unlinks both.
        Kind(
            "portalocker_pidfile",
            "FLOCK",
            writes_pid=True,
            sidecar=".lock",
            unlinks=True,
            library="portalocker",
        ),
        Kind("fasteners", "POSIX", waiter="waiter_lockf", library="fasteners"),
        Kind("fasteners_read", "POSIX", mode="READ", waiter="waiter_lockf", library="fasteners"),
        Kind("zc_lockfile", "FLOCK", writes_pid=True, library="zc.lockfile"),
        Kind("waiter", "FLOCK", keeps_open=True),
        Kind("waiter_lockf", "POSIX", keeps_open=True, waiter="waiter_lockf"),
    )
}
WAITERS = ("waiter", "waiter_lockf")
# Everything that holds a lock the way a program does (not the waiters).
HOLDER_KINDS = tuple(name for name in KINDS if name not in WAITERS)


class HarnessError(AssertionError):
    """A helper did not do what it was started for: a bug in the harness or the
    environment, not in lockwatch."""


# --------------------------------------------------------------------------- /proc


@dataclass(frozen=True, slots=True)
class ProcLock:
    """One line of /proc/locks."""

    ordinal: int
    waiting: bool  # a `->` line: blocked, waiting for lock `ordinal`
    type: str  # FLOCK, POSIX, OFDLCK, LEASE, ...
    mode: str  # READ, WRITE
    pid: int  # -1 for OFD locks
    device: str  # "major:minor", decimal (procfs writes hex)
    inode: int
    start: int
    end: int | None  # None: EOF


def parse_proc_locks(text: str) -> list[ProcLock]:
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        waiting = fields[1] == "->"
        if waiting:
            fields = [fields[0], *fields[2:]]
        try:
            major, minor, inode = fields[5].split(":")
            found.append(
                ProcLock(
                    ordinal=int(fields[0].rstrip(":")),
                    waiting=waiting,
                    type=fields[1],
                    mode=fields[3],
                    pid=int(fields[4]),
                    device=f"{int(major, 16)}:{int(minor, 16)}",
                    inode=int(inode),
                    start=int(fields[6]),
                    end=None if fields[7] == "EOF" else int(fields[7]),
                )
            )
        except (ValueError, IndexError):
            continue
    return found


def proc_locks() -> list[ProcLock]:
    with open("/proc/locks", encoding="ascii") as handle:
        return parse_proc_locks(handle.read())


def file_key(path: Path | str) -> tuple[str, int]:
    """(device "major:minor" in decimal, inode) of `path`, as /proc/locks names it."""
    st = os.stat(path)
    return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}", st.st_ino


def locks_on(path: Path | str) -> list[ProcLock]:
    """The /proc/locks lines (held and waiting) on the file at `path` now."""
    device, inode = file_key(path)
    return [lock for lock in proc_locks() if lock.device == device and lock.inode == inode]


def fdinfo_locks(pid: int, inode: int) -> list[str]:
    """The `lock:` lines of /proc/PID/fdinfo for open files with this inode: who
    really holds a flock or OFD lock (any process sharing the open file)."""
    lines = []
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return []
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as handle:
                text = handle.read()
        except OSError:
            continue
        if f"\nino:\t{inode}\n" in text:
            lines += [line for line in text.splitlines() if line.startswith("lock:")]
    return lines


def children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as handle:
                found += [int(child) for child in handle.read().split()]
    return found


def running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


# --------------------------------------------------------------------------- helpers

_CHILD = r"""
import fcntl, os, struct, sys

kind, path = sys.argv[1], sys.argv[2]
start, length = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (0, 0)
F_OFD_SETLK, FLOCK_STRUCT = @F_OFD_SETLK@, "@FLOCK_STRUCT@"


def say(byte):
    os.write(1, byte)


def open_rw():
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def raw(lock, unlock):
    fd = open_rw()
    lock(fd)

    def release(keep_open):
        unlock(fd)
        if not keep_open:
            os.close(fd)

    return release


def ofd(fd, type_):
    fcntl.fcntl(fd, F_OFD_SETLK, struct.pack(FLOCK_STRUCT, type_, os.SEEK_SET, 0, 0, 0))


if kind == "flock":
    release = raw(lambda fd: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB),
                  lambda fd: fcntl.flock(fd, fcntl.LOCK_UN))
elif kind == "flock_shared":
    release = raw(lambda fd: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB),
                  lambda fd: fcntl.flock(fd, fcntl.LOCK_UN))
elif kind == "lockf":
    release = raw(lambda fd: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB),
                  lambda fd: fcntl.lockf(fd, fcntl.LOCK_UN))
elif kind == "lockf_range":
    release = raw(lambda fd: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, length, start),
                  lambda fd: fcntl.lockf(fd, fcntl.LOCK_UN, length, start))
elif kind == "ofd":
    release = raw(lambda fd: ofd(fd, fcntl.F_WRLCK), lambda fd: ofd(fd, fcntl.F_UNLCK))
elif kind in ("waiter", "waiter_lockf"):
    def blocking(fd):
        say(b"W")
        if kind == "waiter":
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            fcntl.lockf(fd, fcntl.LOCK_EX)

    release = raw(blocking, (lambda fd: fcntl.flock(fd, fcntl.LOCK_UN)) if kind == "waiter"
                  else (lambda fd: fcntl.lockf(fd, fcntl.LOCK_UN)))
elif kind == "filelock":
    import filelock

    lock = filelock.FileLock(path, timeout=0)
    lock.acquire()
    release = lambda keep_open: lock.release()
elif kind == "portalocker":
    import portalocker

    lock = portalocker.Lock(path, mode="a", timeout=0, fail_when_locked=True)
    lock.acquire()
    release = lambda keep_open: lock.release()
elif kind == "portalocker_pidfile":
    import portalocker

    lock = portalocker.PidFileLock(path)
    lock.acquire()
    release = lambda keep_open: lock.release()
elif kind == "fasteners":
    import fasteners

    lock = fasteners.InterProcessLock(path)
    if not lock.acquire(blocking=False):
        sys.exit("fasteners: already locked")
    release = lambda keep_open: lock.release()
elif kind == "fasteners_read":
    import fasteners

    lock = fasteners.InterProcessReaderWriterLock(path)
    if not lock.acquire_read_lock(blocking=False):
        sys.exit("fasteners: already write-locked")
    release = lambda keep_open: lock.release_read_lock()
elif kind == "zc_lockfile":
    import zc.lockfile

    lock = zc.lockfile.LockFile(path)
    release = lambda keep_open: lock.close()
else:
    sys.exit(f"unknown kind {kind!r}")

say(b"R")
while True:
    line = sys.stdin.buffer.readline().strip()
    if not line or line == b"exit":
        break
    if line in (b"release", b"unlock"):
        release(line == b"unlock")
        say(b"r")
    else:
        sys.exit(f"unknown command {line!r}")
"""

# flock(1) runs the command with the locked descriptor inherited.
_FLOCK_CMD_SCRIPT = """printf R
while read -r cmd; do
  case "$cmd" in
    exit) exit 0 ;;
    *) echo "flock_cmd: unsupported: $cmd" >&2; exit 2 ;;
  esac
done
"""

# The shell idiom: open on fd 9, `flock 9` (a flock(1) process locks the shell's
# open file and exits), `flock -u 9` to release.
_FLOCK_FD_SCRIPT = """exec 9>>"$1" || exit 3
flock -n 9 || exit 4
printf R
while read -r cmd; do
  case "$cmd" in
    release) flock -u 9; exec 9>&-; printf r ;;
    unlock) flock -u 9; printf r ;;
    exit) exit 0 ;;
    *) echo "flock_fd: unsupported: $cmd" >&2; exit 2 ;;
  esac
done
"""


@functools.cache
def _scripts() -> Path:
    """A private directory for the helper scripts, removed when this process exits."""
    directory = Path(tempfile.mkdtemp(prefix="lockwatch-holders-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


@functools.cache
def script(name: str) -> str:
    """The helper script `name` (holder.py, probe.py), written once per test run:
    a file rather than `-c`, so a holder's command line reads like a program's
    (`python holder.py flock /x/y.lock`) in lockwatch's messages."""
    source = {"holder.py": _CHILD, "probe.py": _PROBE}[name]
    path = _scripts() / name
    source = source.replace("@F_OFD_SETLK@", str(F_OFD_SETLK))
    path.write_text(source.replace("@FLOCK_STRUCT@", FLOCK_STRUCT).lstrip(), encoding="utf-8")
    return str(path)


def lock_path_of(kind: str, path: Path) -> Path:
    """The file the kernel lock is on (portalocker's PidFileLock: a sidecar)."""
    sidecar = KINDS[kind].sidecar
    return path if sidecar is None else path.with_name(path.name + sidecar)


class Holder:
    """A real process holding (or, for a waiter, waiting for) a lock."""

    def __init__(
        self,
        kind: str,
        path: Path,
        *,
        start: int = RANGE_START,
        length: int = RANGE_LEN,
        timeout: float = READY_TIMEOUT,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
        self.kind = KINDS[kind]
        self.path = path
        self.lock_path = lock_path_of(kind, path)
        self.timeout = timeout
        self._gone = False
        # Closed by close(); a file, not a pipe, so a chatty helper never blocks.
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        if kind == "flock_cmd":
            argv = ["flock", "-n", str(path), "sh", "-c", _FLOCK_CMD_SCRIPT]
        elif kind == "flock_fd":
            argv = ["sh", "-c", _FLOCK_FD_SCRIPT, "sh", str(path)]
        else:
            argv = [sys.executable, script("holder.py"), kind, str(path)]
            if kind == "lockf_range":
                argv += [str(start), str(length)]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,  # its own process group: kill() takes the whole tree
        )
        self.pid = self.proc.pid
        # The processes that hold the lock once it is held (see `holder_pids`).
        self._tree: frozenset[int] = frozenset({self.pid})
        try:
            if kind in WAITERS:
                self._expect(b"W", "start waiting")
                self._await_waiting()
            else:
                self._expect(b"R", "take the lock")
                self._settle()
        except BaseException:
            self.close()
            raise

    # -- what it is ------------------------------------------------------------

    @property
    def holder_pids(self) -> frozenset[int]:
        """The processes whose open file holds the lock: the helper itself; for
        flock_cmd flock(1) and the command it runs (which inherits the locked
        descriptor and keeps it if flock(1) dies)."""
        return self._tree

    @property
    def alive(self) -> bool:
        return any(running(pid) for pid in self._tree)

    def __repr__(self) -> str:
        return f"<Holder {self.kind.name} pid={self.pid} {self.lock_path}>"

    # -- commands --------------------------------------------------------------

    def release(self, *, keep_open: bool = False) -> None:
        """Release the lock and keep living; with `keep_open` (raw primitives
        only) keep the file open as well. Returns once the helper says done."""
        if not self.kind.releasable:
            raise HarnessError(f"{self.kind.name} cannot release and live on; kill it")
        if keep_open and not self.kind.keeps_open:
            raise HarnessError(f"{self.kind.name} closes its file on release")
        self._send(b"unlock" if keep_open else b"release")
        self._expect(b"r", "release the lock")

    def wait_acquired(self) -> None:
        """A waiter: block (bounded) until the lock is granted to it."""
        if self.kind.name not in WAITERS:
            raise HarnessError(f"{self.kind.name} is not a waiter")
        self._expect(b"R", "get the lock it waited for")

    def exit(self) -> None:
        """Let it exit normally (its library's exit handling runs) and reap it."""
        self._send(b"exit")
        try:
            code = self.proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise HarnessError(f"{self!r} did not exit; killed") from None
        self._await_gone()
        self._gone = True
        if code != 0:
            raise HarnessError(f"{self!r} exited {code}: {self.stderr()}")

    def kill(self) -> None:
        """SIGKILL the helper's whole process tree and reap it."""
        if not self._gone:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        self._reap()
        self._await_gone()
        self._gone = True

    def kill_leader(self) -> None:
        """SIGKILL only the process the harness started (for flock_cmd: flock(1)
        itself, whose command lives on with the locked descriptor) and reap it."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=self.timeout)
        self._tree = frozenset(pid for pid in self._tree if pid != self.pid)

    def close(self) -> None:
        """kill(), then drop what the harness kept for it."""
        try:
            self.kill()
        finally:
            self._stderr.close()

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace").strip()

    # -- plumbing --------------------------------------------------------------

    def _send(self, command: bytes) -> None:
        stdin = self.proc.stdin
        if stdin is None or self.proc.poll() is not None:
            raise HarnessError(f"{self!r} is not running: {self.stderr()}")
        stdin.write(command + b"\n")
        stdin.flush()

    def _read_byte(self, deadline: float) -> bytes | None:
        """One byte of the helper's stdout; b"" at EOF; None at the deadline."""
        stdout = self.proc.stdout
        assert stdout is not None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        ready, _, _ = select.select([stdout], [], [], remaining)
        if not ready:
            return None
        return os.read(stdout.fileno(), 1)

    def _expect(self, byte: bytes, what: str) -> None:
        got = self._read_byte(time.monotonic() + self.timeout)
        if got == byte:
            return
        if got is None:
            raise HarnessError(f"{self!r} did not {what} within {self.timeout:g}s")
        code = self.proc.wait(timeout=self.timeout) if got == b"" else None
        raise HarnessError(
            f"{self!r} did not {what}: got {got!r}, exit {code}, stderr: {self.stderr()}"
        )

    def _settle(self) -> None:
        if self.kind.name == "flock_cmd":
            # The command flock(1) runs printed the byte: it exists by now.
            self._tree = frozenset({self.pid, *children(self.pid)})

    def _await_waiting(self) -> None:
        """Poll /proc/locks (bounded) until this waiter's `->` line is there."""
        device, inode = file_key(self.path)
        deadline = time.monotonic() + self.timeout
        while True:
            if any(
                lock.waiting
                and lock.pid == self.pid
                and (lock.device, lock.inode) == (device, inode)
                for lock in proc_locks()
            ):
                return
            # Meanwhile, it must not have been granted the lock, nor died.
            got = self._read_byte(min(deadline, time.monotonic() + POLL_S))
            if got == b"R":
                raise HarnessError(f"{self!r} got the lock at once: nobody held it")
            if got == b"":
                raise HarnessError(f"{self!r} died: {self.stderr()}")
            if time.monotonic() > deadline:
                raise HarnessError(f"{self!r} never showed up waiting in /proc/locks")

    def _reap(self) -> None:
        try:
            self.proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"{self!r} survived SIGKILL") from None
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def _await_gone(self) -> None:
        """Descendants that outlived the helper (reparented, so init reaps them)
        are gone: poll /proc, bounded."""
        deadline = time.monotonic() + self.timeout
        while any(running(pid) for pid in self._tree):
            if time.monotonic() > deadline:
                raise HarnessError(f"{self!r}: processes {sorted(self._tree)} outlived it")
            time.sleep(POLL_S)  # polling a state with a deadline, not waiting on a guess


class Holders:
    """Starts holders and, on close, kills and reaps every one it started."""

    def __init__(self) -> None:
        self.started: list[Holder] = []

    def start(
        self,
        kind: str,
        path: Path,
        *,
        start: int = RANGE_START,
        length: int = RANGE_LEN,
    ) -> Holder:
        """A helper of `kind` holding the lock on `path` (a waiter: waiting for it)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        holder = Holder(kind, path, start=start, length=length)
        self.started.append(holder)
        return holder

    __call__ = start

    def close(self) -> None:
        errors = []
        for holder in reversed(self.started):
            try:
                holder.close()
            except HarnessError as exc:  # keep reaping the others
                errors.append(str(exc))
        self.started.clear()
        if errors:
            raise HarnessError("; ".join(errors))


# --------------------------------------------------------------------------- probes

_PROBE = r"""
import errno, fcntl, os, struct, sys

kind, path = sys.argv[1], sys.argv[2]
start, length = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (0, 0)
F_OFD_SETLK, FLOCK_STRUCT = @F_OFD_SETLK@, "@FLOCK_STRUCT@"
CONTENDED = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)


def raw(attempt):
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        attempt(fd)
    except OSError as exc:
        if exc.errno in CONTENDED:
            return True
        raise
    finally:
        os.close(fd)
    return False


if kind in ("flock", "flock_shared", "flock_fd", "waiter"):
    held = raw(lambda fd: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))
elif kind in ("lockf", "waiter_lockf"):
    held = raw(lambda fd: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))
elif kind == "lockf_range":
    held = raw(lambda fd: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, length, start))
elif kind == "ofd":
    held = raw(lambda fd: fcntl.fcntl(
        fd, F_OFD_SETLK, struct.pack(FLOCK_STRUCT, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)))
elif kind == "filelock":
    import filelock

    lock = filelock.FileLock(path, timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        held = True
    else:
        lock.release()
        held = False
elif kind in ("portalocker", "portalocker_pidfile"):
    # PidFileLock takes exactly this Lock on its sidecar (path is the sidecar
    # here); acquiring a PidFileLock itself would rewrite and unlink its files.
    import portalocker

    lock = portalocker.Lock(path, mode="a", timeout=0, fail_when_locked=True)
    try:
        lock.acquire()
    except portalocker.AlreadyLocked:
        held = True
    else:
        lock.release()
        held = False
elif kind in ("fasteners", "fasteners_read"):
    import fasteners

    if kind == "fasteners":
        lock = fasteners.InterProcessLock(path)
        held = not lock.acquire(blocking=False)
        if not held:
            lock.release()
    else:
        lock = fasteners.InterProcessReaderWriterLock(path)
        held = not lock.acquire_write_lock(blocking=False)
        if not held:
            lock.release_write_lock()
elif kind == "zc_lockfile":
    # SimpleLockFile: zc.lockfile's own lock attempt, without LockFile's
    # writing of the prober's pid into the file.
    import zc.lockfile

    try:
        zc.lockfile.SimpleLockFile(path).close()
    except zc.lockfile.LockError:
        held = True
    else:
        held = False
else:
    sys.exit(f"unknown kind {kind!r}")
print("held" if held else "free")
"""

FLOCK_CMD_CONFLICT = 75  # `flock -E 75`: the exit status when the lock is held


def library_says_held(
    kind: str,
    path: Path,
    *,
    start: int = RANGE_START,
    length: int = RANGE_LEN,
    timeout: float = 30.0,
) -> bool:
    """Whether the library (or primitive) of `kind` finds the lock on `path` held:
    its own non-blocking exclusive attempt, made in a fresh process (POSIX locks
    never conflict within one process). Creates and changes nothing: a missing
    file is not held, and an attempt that succeeds is undone at once."""
    target = lock_path_of(kind, path)
    if not target.exists():
        return False
    if kind == "flock_cmd":
        argv = ["flock", "-n", "-E", str(FLOCK_CMD_CONFLICT), str(target), "true"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if done.returncode not in (0, FLOCK_CMD_CONFLICT):
            raise HarnessError(f"flock -n {target}: exit {done.returncode}: {done.stderr}")
        return done.returncode == FLOCK_CMD_CONFLICT
    argv = [sys.executable, script("probe.py"), kind, str(target), str(start), str(length)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    answer = done.stdout.strip()
    if done.returncode != 0 or answer not in ("held", "free"):
        raise HarnessError(f"probe {kind} {target}: exit {done.returncode}: {done.stderr}")
    return answer == "held"


def unavailable(kind: str) -> str | None:
    """Why a kind cannot run here (a skip reason), or None. A missing library is
    not a reason: the `test` extra installs them all; only an API that the lower
    bound lacks (PidFileLock came in portalocker 4.0) or a missing flock(1)."""
    import shutil

    if kind == "portalocker_pidfile":
        import portalocker

        if not hasattr(portalocker, "PidFileLock"):
            return f"portalocker {portalocker.__version__} has no PidFileLock"
    if kind in ("flock_cmd", "flock_fd") and shutil.which("flock") is None:
        return "no flock(1) (Debian: apt-get install util-linux)"
    return None
