"""The procfs reader against real kernel locks held by real helper processes.

Each helper is a child process that takes its lock with the real primitive
(`fcntl.flock`, `fcntl.lockf`, the OFD `fcntl` call, util-linux `flock(1)`)
and then writes one byte to its stdout; the test blocks on that byte (with a
deadline), so "held" is never a guess. A helper lives until its stdin closes
and is SIGKILLed with its whole session at teardown, pass or fail. Waiters
write a byte just before their blocking call; the test then waits (bounded)
for their `->` line in /proc/locks, the only sign the kernel gives of it.

Only the parser tests and the fake-/proc tests use hand-written text.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

import lockwatch
from lockwatch.sources.filelocks import FileKey, KernelLock
from lockwatch.sources.procfs import (
    KernelTable,
    OpenFiles,
    open_files,
    parse_proc_locks,
    read_table,
)

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux /proc/locks")

DEADLINE_S = 15.0

# The helper: `python -c CHILD MODE PATH`. F_OFD_SETLK(W) are 37/38 on Linux;
# struct flock on x86_64 and aarch64 is short, short, (pad), off_t, off_t,
# pid_t, (pad): "hhqqi4x", 32 bytes (as <fcntl.h> lays it out).
CHILD = textwrap.dedent(
    r"""
    import fcntl, os, struct, sys

    mode, path = sys.argv[1], sys.argv[2]

    def say(text):
        os.write(1, text.encode())

    def ofd(fd, cmd, type_):
        fcntl.fcntl(fd, cmd, struct.pack("hhqqi4x", type_, 0, 0, 0, 0))

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    if mode == "flock_ex":
        fcntl.flock(fd, fcntl.LOCK_EX)
    elif mode == "flock_sh":
        fcntl.flock(fd, fcntl.LOCK_SH)
    elif mode == "lockf":
        fcntl.lockf(fd, fcntl.LOCK_EX)
    elif mode == "lockf_range":
        fcntl.lockf(fd, fcntl.LOCK_EX, 10, 5)  # bytes 5..14
    elif mode == "ofd":
        ofd(fd, 37, fcntl.F_WRLCK)
    elif mode == "flock_unlocked":
        fcntl.flock(fd, fcntl.LOCK_EX)
        fcntl.flock(fd, fcntl.LOCK_UN)
    elif mode == "flock_wait":
        say("W")
        fcntl.flock(fd, fcntl.LOCK_EX)
    elif mode == "lockf_wait":
        say("W")
        fcntl.lockf(fd, fcntl.LOCK_EX)
    elif mode == "ofd_wait":
        say("W")
        ofd(fd, 38, fcntl.F_WRLCK)
    elif mode == "flock_then_fork":
        # The taker forks and exits: the child keeps the lock through the
        # inherited open file, while /proc/locks still names the taker.
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fork() != 0:
            os._exit(0)
        say(f"{os.getpid()}\n")
    else:
        raise SystemExit(f"unknown mode {mode}")
    say("R")
    sys.stdin.buffer.read()  # until the test closes stdin (or kills us)
    """
)


class Helper:
    """A child process tree that holds (or waits for) a lock."""

    def __init__(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own group: one killpg ends the whole tree
        )
        self.pid = self.process.pid
        self.child: int | None = None  # flock_then_fork: the pid that holds on

    def read(self, count: int = 1) -> bytes:
        """`count` bytes from the helper's stdout, failing after the deadline."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        out = b""
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < count:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"helper {self.pid} silent; stderr: {self.stderr()}")
            chunk = os.read(fd, count - len(out))
            if not chunk:
                raise AssertionError(f"helper {self.pid} exited; stderr: {self.stderr()}")
            out += chunk
        return out

    def read_line(self) -> str:
        line = b""
        while not line.endswith(b"\n"):
            line += self.read()
        return line.decode().strip()

    def stderr(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return "(still running)"
        return self.process.stderr.read().decode(errors="replace")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.process.wait()

    def close(self) -> None:
        self.kill()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


Spawn = Callable[..., Helper]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """`spawn(mode, path)` starts a CHILD helper and returns once it holds its
    lock (a waiter: once it is about to block); `spawn(argv=[...])` any command."""
    helpers: list[Helper] = []
    extra: list[int] = []  # pids of helpers' children that left the group's leader

    def start(mode: str = "", path: Path | None = None, argv: list[str] | None = None) -> Helper:
        helper = Helper(argv or [sys.executable, "-c", CHILD, mode, str(path)])
        helpers.append(helper)
        if mode.endswith("_wait"):
            assert helper.read() == b"W"
        elif mode == "flock_then_fork":
            helper.child = int(helper.read_line())
            extra.append(helper.child)
            assert helper.read() == b"R"
        else:
            assert helper.read() == b"R"
        return helper

    try:
        yield start
    finally:
        for helper in helpers:
            helper.close()
        for pid in extra:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def key_of(path: Path) -> FileKey:
    st = os.stat(path)
    return FileKey.of(st.st_dev, st.st_ino)


def on(table: KernelTable, path: Path | FileKey) -> list[KernelLock]:
    key = path if isinstance(path, FileKey) else key_of(path)
    return [lock for lock in table.locks if lock.file == key]


def table_when(path: Path, done: Callable[[list[KernelLock]], bool]) -> KernelTable:
    """read_table() once the locks on `path` satisfy `done`: for waiters, whose
    blocking the kernel shows only in /proc/locks (a bounded poll of state)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        table = read_table()
        if done(on(table, path)):
            return table
        if time.monotonic() > deadline:
            raise AssertionError(f"locks on {path} never settled: {on(table, path)}")
        time.sleep(0.01)


def waiting(count: int) -> Callable[[list[KernelLock]], bool]:
    return lambda locks: sum(lock.waiting for lock in locks) == count


@pytest.fixture
def lockfile(tmp_path: Path) -> Path:
    path = tmp_path / "job.lock"
    path.write_text("")
    return Path(os.path.realpath(path))


# -- parsing (hand-written text) --------------------------------------------------------


# Hand-written, in the kernel's format (fs/locks.c lock_get_status), with junk.
HAND_WRITTEN = """\
1: FLOCK  ADVISORY  WRITE 4242 fe:00:2147556 0 EOF
1: -> FLOCK  ADVISORY  WRITE 4243 fe:00:2147556 0 EOF
1:  -> FLOCK  ADVISORY  WRITE 4244 fe:00:2147556 0 EOF
2: POSIX  ADVISORY  READ 77 103:1a:12 5 14
3: OFDLCK ADVISORY  WRITE -1 00:27:99 0 EOF
3: -> OFDLCK ADVISORY  WRITE -1 00:27:99 0 EOF
4: POSIX  MANDATORY WRITE 78 08:01:13 100 EOF
5: LEASE  ACTIVE    READ 79 08:01:14 0 EOF
6: LEASE  BREAKING  UNLCK 80 08:01:15 0 EOF
7: DELEG  ACTIVE    READ 81 08:01:16 0 EOF
8: FLOCK  ADVISORY  WRITE 82 <none>:0 0 EOF
9: POSIX  ADVISORY  UNLCK 83 08:01:17 0 EOF
10: ACCESS ADVISORY  READ 84 08:01:18 0 EOF
11: UNKNOWN UNKNOWN  UNKNOWN 0 08:01:19 0 EOF

garbage
12: FLOCK  ADVISORY  WRITE abc 08:01:20 0 EOF
x: FLOCK  ADVISORY  WRITE 85 08:01:21 0 EOF
13: FLOCK  ADVISORY  WRITE 86 08:01:22 0
14: FLOCK  ADVISORY  WRITE 87 zz:01:23 0 EOF
15: POSIX  ADVISORY  WRITE 88 08:01:24 9 3
16: FLOCK  ADVISORY  WRITE 89 08:01:25 0 EOF extra
17: FLOCK  ADVISORY  WRITE 90 08:01:1_000 0 EOF
\u0661: FLOCK  ADVISORY  WRITE 91 08:01:26 0 EOF
18: -> -> FLOCK  ADVISORY  WRITE 92 08:01:27 0 EOF
"""


def test_parser_reads_holders_and_waiters_and_skips_the_rest() -> None:
    locks = parse_proc_locks(HAND_WRITTEN)
    assert [(lock.ordinal, lock.waiting, lock.pid) for lock in locks] == [
        (1, False, 4242),
        (1, True, 4243),
        (1, True, 4244),  # a waiter's waiter, indented one more
        (2, False, 77),
        (3, False, -1),
        (3, True, -1),
        (4, False, 78),
    ]
    flock, _, _, posix, ofd, _, mandatory = locks
    assert flock == KernelLock(
        ordinal=1,
        type="FLOCK",
        mode="WRITE",
        file=FileKey("254:0", 2147556),
        start=0,
        end=None,
        pid=4242,
    )
    # Hex device numbers become decimal, as os.major/os.minor give them.
    assert (posix.type, posix.mode, posix.file) == ("POSIX", "READ", FileKey("259:26", 12))
    assert (posix.start, posix.end, posix.range_text()) == (5, 14, "5-14")
    assert (ofd.type, ofd.file, ofd.holder_pid) == ("OFDLCK", FileKey("0:39", 99), None)
    assert mandatory.mandatory and not flock.mandatory
    assert (mandatory.start, mandatory.end) == (100, None)


@pytest.mark.parametrize(
    "text",
    ["", "\n\n", "\x00\xff", "1:", "1: FLOCK", "-1: FLOCK  ADVISORY  WRITE 1 08:01:2 0 EOF"],
)
def test_parser_never_raises_on_junk(text: str) -> None:
    assert parse_proc_locks(text) == []


# -- a fake /proc tree (hand-written) -------------------------------------------------------


def fake_proc(root: Path, locks: str, fds: dict[int, dict[int, tuple[Path, str]]]) -> str:
    """A /proc with `locks` and, per pid, fds linking to real files with the given
    fdinfo text."""
    root.mkdir()
    (root / "locks").write_text(locks)
    for pid, table in fds.items():
        (root / str(pid) / "fd").mkdir(parents=True)
        (root / str(pid) / "fdinfo").mkdir()
        for fd, (target, info) in table.items():
            (root / str(pid) / "fd" / str(fd)).symlink_to(target)
            (root / str(pid) / "fdinfo" / str(fd)).write_text(info)
    return str(root)


def test_unreadable_proc_locks_says_why(tmp_path: Path) -> None:
    table = read_table(str(tmp_path / "no-proc"))
    assert not table.readable
    assert table.locks == ()
    assert table.problem == f"{tmp_path}/no-proc/locks unreadable: No such file or directory"


def test_fake_tree_ofd_owner_from_fdinfo_and_known_path(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("")
    key = key_of(data)
    major, minor = (int(part) for part in key.device.split(":"))
    where = f"{major:02x}:{minor:02x}"
    line = f"OFDLCK ADVISORY  WRITE -1 {where}:{key.inode} 0 EOF"
    proc = fake_proc(
        tmp_path / "proc",
        f"1: {line}\n2: POSIX  ADVISORY  WRITE 999999 {where}:424242 0 EOF\n",
        {
            # fdinfo counts its own locks from 1 and a socket is never stat'ed.
            321: {3: (data, f"pos:\t0\nflags:\t02\nlock:\t1: {line}\n")},
            322: {4: (Path("socket:[1234]"), "")},
        },
    )
    elsewhere = FileKey(key.device, 424242)
    table = read_table(proc, known={elsewhere: "/srv/known.lock"})
    ofd, posix = table.locks
    assert (ofd.owners, ofd.holder_pid, ofd.path) == ((321,), 321, str(data))
    # pid 999999 is gone and no fd names inode 424242: the caller's map places it.
    assert (posix.owners, posix.holder_pid, posix.path) == ((), 999999, "/srv/known.lock")
    assert table.unreadable_fds == 0 and table.problem is None


def test_lookups_by_file_take_constant_time() -> None:
    locks = tuple(
        KernelLock(n, "FLOCK", "WRITE", FileKey("8:1", n), 0, None, 1000 + n) for n in range(10_000)
    )
    table = KernelTable(locks)
    started = time.perf_counter()
    for n in range(10_000):
        assert table.held_on(FileKey("8:1", n)) == (locks[n],)
        assert table.evidence(FileKey("8:2", n)).holds == ()
    # A linear search would take seconds here; a dict lookup, milliseconds.
    assert time.perf_counter() - started < 2.0


def test_evidence_counts_holders_waiters_and_open_files() -> None:
    key = FileKey("8:1", 7)
    holder = KernelLock(1, "FLOCK", "WRITE", key, 0, None, 10, owners=(10,))
    waiter = KernelLock(1, "FLOCK", "WRITE", key, 0, None, 11, waiting=True)
    table = KernelTable((holder, waiter))
    evidence = table.evidence(key, OpenFiles({key: (10, 11)}, unreadable=2), was_held=True)
    assert evidence.holds == (holder,)
    assert (evidence.waiters, evidence.open_by) == (1, (10, 11))
    assert evidence.open_unknown and evidence.was_held
    assert table.evidence(FileKey("8:1", 8)) == table.evidence(FileKey("8:1", 9))


# -- real locks ---------------------------------------------------------------------------


def test_flock_exclusive(spawn: Spawn, lockfile: Path) -> None:
    helper = spawn("flock_ex", lockfile)
    table = read_table()
    [lock] = on(table, lockfile)
    assert (lock.type, lock.mode, lock.pid, lock.waiting) == ("FLOCK", "WRITE", helper.pid, False)
    assert lock.owners[0] == helper.pid
    assert lock.path == str(lockfile)
    assert table.held_on(key_of(lockfile)) == (lock,)
    assert table.waiters_on(key_of(lockfile)) == 0


def test_flock_shared_by_two(spawn: Spawn, lockfile: Path) -> None:
    first, second = spawn("flock_sh", lockfile), spawn("flock_sh", lockfile)
    locks = on(read_table(), lockfile)
    assert sorted((lock.mode, lock.pid) for lock in locks) == sorted(
        [("READ", first.pid), ("READ", second.pid)]
    )
    for lock in locks:
        assert lock.owners == (lock.pid,)
        assert lock.path == str(lockfile)


def test_lockf_whole_file(spawn: Spawn, lockfile: Path) -> None:
    helper = spawn("lockf", lockfile)
    [lock] = on(read_table(), lockfile)
    assert (lock.type, lock.mode, lock.start, lock.end) == ("POSIX", "WRITE", 0, None)
    assert lock.owners == (helper.pid,)
    assert lock.path == str(lockfile)


def test_lockf_byte_range(spawn: Spawn, lockfile: Path) -> None:
    helper = spawn("lockf_range", lockfile)
    [lock] = on(read_table(), lockfile)
    assert (lock.type, lock.start, lock.end, lock.owners) == ("POSIX", 5, 14, (helper.pid,))


def test_ofd_lock_owner_comes_from_fdinfo(spawn: Spawn, lockfile: Path) -> None:
    helper = spawn("ofd", lockfile)
    [lock] = on(read_table(), lockfile)
    assert (lock.type, lock.pid) == ("OFDLCK", -1)
    assert lock.owners == (helper.pid,)
    assert lock.holder_pid == helper.pid
    assert lock.path == str(lockfile)


def test_flock_command(spawn: Spawn, lockfile: Path) -> None:
    flock = shutil.which("flock")
    if flock is None:
        pytest.skip("util-linux flock(1) is not installed")
    # flock(1) takes the lock, forks and waits; the command inherits the fd.
    helper = spawn(argv=[flock, str(lockfile), "sh", "-c", "printf R; exec cat"])
    [lock] = on(read_table(), lockfile)
    assert (lock.type, lock.pid) == ("FLOCK", helper.pid)
    assert lock.owners[0] == helper.pid
    assert lock.path == str(lockfile)

    # With flock(1) gone, the command (`cat`, its child) holds on alone.
    [command] = [child.pid for child in psutil.Process(helper.pid).children()]
    os.kill(helper.pid, signal.SIGKILL)
    helper.process.wait()
    [lock] = on(read_table(), lockfile)
    assert lock.pid == helper.pid  # /proc/locks still names the taker
    assert lock.owners == (command,)
    assert lock.holder_pid == command


def test_flock_inherited_by_child_of_exited_taker(spawn: Spawn, lockfile: Path) -> None:
    helper = spawn("flock_then_fork", lockfile)
    helper.process.wait()  # the taker has exited
    child = helper.child
    [lock] = on(read_table(), lockfile)
    assert lock.pid == helper.pid
    assert lock.owners == (child,)
    assert lock.holder_pid == child
    assert lock.path == str(lockfile)


def test_waiter_is_linked_to_holder(spawn: Spawn, lockfile: Path) -> None:
    holder = spawn("flock_ex", lockfile)
    waiter = spawn("flock_wait", lockfile)
    table = table_when(lockfile, waiting(1))
    [held] = [lock for lock in on(table, lockfile) if not lock.waiting]
    [wait] = [lock for lock in on(table, lockfile) if lock.waiting]
    assert wait.ordinal == held.ordinal
    assert (wait.pid, wait.owners, wait.blocked_by) == (waiter.pid, (waiter.pid,), (holder.pid,))
    assert held.blocking == (waiter.pid,)
    assert wait.path == str(lockfile)
    key = key_of(lockfile)
    assert table.held_on(key) == (held,)
    assert table.waiters_on(key) == 1
    assert table.evidence(key).waiters == 1

    # Once the holder dies, the waiter gets the lock.
    holder.kill()
    assert waiter.read() == b"R"
    [now] = on(read_table(), lockfile)
    assert (now.waiting, now.owners, now.blocking) == (False, (waiter.pid,), ())


def test_two_waiters_even_nested(spawn: Spawn, lockfile: Path) -> None:
    holder = spawn("flock_ex", lockfile)
    first = spawn("flock_wait", lockfile)
    table_when(lockfile, waiting(1))
    second = spawn("flock_wait", lockfile)
    table = table_when(lockfile, waiting(2))
    # Kernels since 5.0 queue a waiter that conflicts with an earlier waiter
    # under it: `1:  -> ...`, one level deeper. It still waits for lock 1.
    inode = f":{key_of(lockfile).inode} "
    raw = [line for line in Path("/proc/locks").read_text().splitlines() if inode in line]
    assert any(":  -> " in line for line in raw), raw
    [held] = [lock for lock in on(table, lockfile) if not lock.waiting]
    waiters = [lock for lock in on(table, lockfile) if lock.waiting]
    assert {lock.pid for lock in waiters} == {first.pid, second.pid}
    assert all(lock.blocked_by == (holder.pid,) for lock in waiters)
    assert set(held.blocking) == {first.pid, second.pid}


def test_posix_waiter(spawn: Spawn, lockfile: Path) -> None:
    holder = spawn("lockf", lockfile)
    waiter = spawn("lockf_wait", lockfile)
    table = table_when(lockfile, waiting(1))
    [held] = [lock for lock in on(table, lockfile) if not lock.waiting]
    [wait] = [lock for lock in on(table, lockfile) if lock.waiting]
    assert (wait.type, wait.pid, wait.blocked_by) == ("POSIX", waiter.pid, (holder.pid,))
    assert held.blocking == (waiter.pid,)


def test_ofd_waiter_has_no_pid(spawn: Spawn, lockfile: Path) -> None:
    holder = spawn("ofd", lockfile)
    spawn("ofd_wait", lockfile)
    table = table_when(lockfile, waiting(1))
    [held] = [lock for lock in on(table, lockfile) if not lock.waiting]
    [wait] = [lock for lock in on(table, lockfile) if lock.waiting]
    # procfs names no process for a blocked OFD request: -1 in /proc/locks, and
    # fdinfo lists granted locks only.
    assert (wait.pid, wait.owners, wait.holder_pid) == (-1, (), None)
    assert wait.blocked_by == (holder.pid,)
    assert held.blocking == ()
    assert table.waiters_on(key_of(lockfile)) == 1


def test_sigkilled_holder_leaves_no_lock(spawn: Spawn, lockfile: Path) -> None:
    helper = spawn("flock_ex", lockfile)
    assert on(read_table(), lockfile)
    helper.kill()  # SIGKILL and reap: the kernel closed its files on exit
    table = read_table()
    assert on(table, lockfile) == []
    assert table.held_on(key_of(lockfile)) == ()


def test_unlocked_but_open_is_in_open_files_only(spawn: Spawn, lockfile: Path) -> None:
    helper = spawn("flock_unlocked", lockfile)
    key = key_of(lockfile)
    table = read_table()
    assert on(table, lockfile) == []
    files = open_files()
    assert helper.pid in files.pids(key)
    evidence = table.evidence(key, files)
    assert evidence.holds == () and helper.pid in evidence.open_by


def test_open_files_leaves_out_the_caller(lockfile: Path) -> None:
    with open(lockfile, "rb"):
        assert os.getpid() not in open_files().pids(key_of(lockfile))


def test_deleted_file_keeps_its_lock_but_not_its_path(spawn: Spawn, lockfile: Path) -> None:
    helper = spawn("flock_ex", lockfile)
    key = key_of(lockfile)
    lockfile.unlink()
    lockfile.write_text("")  # a new file under the old name: not the locked one
    [lock] = on(read_table(), key)
    assert lock.owners == (helper.pid,)
    assert lock.path is None
    [lock] = on(read_table(known={key: "/elsewhere/hard-link"}), key)
    assert lock.path == "/elsewhere/hard-link"


def test_file_named_deleted_keeps_its_path(spawn: Spawn, tmp_path: Path) -> None:
    path = Path(os.path.realpath(tmp_path)) / "odd (deleted)"
    path.write_text("")
    spawn("flock_ex", path)
    [lock] = on(read_table(), path)
    assert lock.path == str(path)


# -- without root ------------------------------------------------------------------------


NOBODY_SCRIPT = """
import json, sys
from lockwatch.sources.procfs import read_table
table = read_table()
print(json.dumps({
    "readable": table.readable,
    "problem": table.problem,
    "unreadable_fds": table.unreadable_fds,
    "locks": [
        {"pid": lock.pid, "owners": list(lock.owners), "path": lock.path, "inode": lock.file.inode}
        for lock in table.locks
    ],
}))
"""


def as_nobody() -> list[str]:
    if os.geteuid() != 0:
        pytest.skip("switching to user nobody needs root")
    if setpriv := shutil.which("setpriv"):
        return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    if runuser := shutil.which("runuser"):
        return [runuser, "-u", "nobody", "--"]
    pytest.skip("neither setpriv nor runuser is installed")


def run_as_nobody(code: str, pythonpath: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": pythonpath, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [*as_nobody(), sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=60,
        check=False,
    )


@pytest.fixture
def nobody_pythonpath() -> Iterator[str]:
    """Where `nobody` can import lockwatch from: the checkout if it may read it,
    else a world-readable copy of the package."""
    checkout = str(Path(lockwatch.__file__).resolve().parent.parent)
    probe = run_as_nobody("import lockwatch.sources.procfs", checkout)
    if probe.returncode == 0:
        yield checkout
        return
    copy = tempfile.mkdtemp(prefix="lockwatch-nobody-")
    try:
        os.chmod(copy, 0o755)
        shutil.copytree(
            Path(checkout) / "lockwatch",
            Path(copy) / "lockwatch",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        for directory, _, files in os.walk(copy):
            os.chmod(directory, 0o755)
            for name in files:
                os.chmod(os.path.join(directory, name), 0o644)
        probe = run_as_nobody("import lockwatch.sources.procfs", copy)
        if probe.returncode != 0:
            pytest.skip(f"user nobody cannot run {sys.executable}: {probe.stderr.strip()}")
        yield copy
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def test_without_root_other_users_fds_are_counted_unreadable(
    spawn: Spawn, lockfile: Path, nobody_pythonpath: str
) -> None:
    helper = spawn("flock_ex", lockfile)  # a root process
    result = run_as_nobody(NOBODY_SCRIPT, nobody_pythonpath)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["readable"] is True
    [lock] = [lock for lock in seen["locks"] if lock["inode"] == key_of(lockfile).inode]
    # Its fds are hidden: the pid /proc/locks gives is the best guess, no path.
    assert (lock["pid"], lock["owners"], lock["path"]) == (helper.pid, [helper.pid], None)
    assert seen["unreadable_fds"] > 0
    assert "unreadable" in seen["problem"] and "root" in seen["problem"]
