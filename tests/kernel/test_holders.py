"""The harness itself: each kind of helper really holds its lock (its library says
so and /proc/locks shows it), and release, exit and SIGKILL really free it.

These pass without lockwatch's kernel source: they check the helpers (which use
the real libraries, no imitation), so that test_real_libraries.py fails only
on lockwatch's verdicts.
"""

from __future__ import annotations

import fcntl
import os
import struct
import sys
from pathlib import Path

import pytest

from tests.kernel.conftest import need
from tests.kernel.holders import (
    FLOCK_STRUCT,
    HOLDER_KINDS,
    KINDS,
    RANGE_LEN,
    RANGE_START,
    HarnessError,
    Holder,
    Holders,
    ProcLock,
    fdinfo_locks,
    file_key,
    library_says_held,
    locks_on,
    parse_proc_locks,
    running,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="kernel locks are read from /proc/locks"
)

RELEASABLE = [kind for kind in HOLDER_KINDS if KINDS[kind].releasable]
KEEPS_OPEN = [kind for kind in HOLDER_KINDS if KINDS[kind].keeps_open]


def lock_file(tmp_path: Path, kind: str) -> Path:
    """Where a kind's lock goes: `<kind>.lock`, a pid file for PidFileLock."""
    name = "service.pid" if kind == "portalocker_pidfile" else f"{kind}.lock"
    return tmp_path / "locks" / name


def held_lines(holder: Holder) -> list[ProcLock]:
    return [lock for lock in locks_on(holder.lock_path) if not lock.waiting]


def open_by(pid: int, path: Path) -> bool:
    target = os.path.realpath(path)
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
        except OSError:
            continue
    return False


def free_it(holder: Holder) -> None:
    """Let go of the lock leaving the file behind: release if it can (and keeps its
    files), else SIGKILL."""
    if holder.kind.releasable and not holder.kind.unlinks:
        holder.release()
    else:
        holder.kill()


# --------------------------------------------------------------------------- pure


def test_struct_flock_layout_is_x86_64_linux() -> None:
    """struct flock is 32 bytes with l_start at 8 (checked against <fcntl.h>)."""
    assert struct.calcsize(FLOCK_STRUCT) == 32
    packed = struct.pack(FLOCK_STRUCT, fcntl.F_WRLCK, os.SEEK_SET, 7, 9, 0)
    assert struct.unpack_from("q", packed, 8) == (7,)
    assert struct.unpack_from("q", packed, 16) == (9,)
    if hasattr(fcntl, "F_OFD_SETLK"):
        assert fcntl.F_OFD_SETLK == 37


def test_parse_proc_locks() -> None:
    text = (
        "1: OFDLCK ADVISORY  WRITE -1 fe:00:2163486 0 EOF\n"
        "1: -> OFDLCK ADVISORY  WRITE -1 fe:00:2163486 0 EOF\n"
        "2: POSIX  ADVISORY  WRITE 9663 fe:01:2163485 100 109\n"
        "3: -> FLOCK  ADVISORY  READ 9661 08:10:12 0 EOF\n"
    )
    locks = parse_proc_locks(text)
    assert [(lock.ordinal, lock.waiting, lock.type, lock.mode, lock.pid) for lock in locks] == [
        (1, False, "OFDLCK", "WRITE", -1),
        (1, True, "OFDLCK", "WRITE", -1),
        (2, False, "POSIX", "WRITE", 9663),
        (3, True, "FLOCK", "READ", 9661),
    ]
    assert (locks[2].device, locks[2].inode, locks[2].start, locks[2].end) == (
        "254:1",
        2163485,
        100,
        109,
    )
    assert (locks[3].device, locks[3].end) == ("8:16", None)


# --------------------------------------------------------------------------- held


@pytest.mark.parametrize("kind", HOLDER_KINDS)
def test_each_kind_really_holds(kind: str, holders: Holders, tmp_path: Path) -> None:
    need(kind)
    holder = holders.start(kind, lock_file(tmp_path, kind))
    spec = holder.kind

    assert library_says_held(kind, holder.path), f"{kind}: its library finds it free"
    lines = held_lines(holder)
    assert len(lines) == 1, f"{kind}: /proc/locks shows {lines}"
    (line,) = locks_on(holder.lock_path)
    assert (line.type, line.mode, line.start, line.end) == (
        spec.type,
        spec.mode,
        spec.start,
        spec.end,
    )
    assert (line.device, line.inode) == file_key(holder.lock_path)
    # Every process named as a holder has the locked file open with the lock.
    for pid in holder.holder_pids:
        assert running(pid)
        assert fdinfo_locks(pid, line.inode), f"{kind}: pid {pid} holds no lock on it"
    if spec.type == "OFDLCK":
        assert line.pid == -1  # procfs names no process for an OFD lock
    elif kind == "flock_fd":
        # The short-lived flock(1) that made the call: gone, the shell holds it.
        assert line.pid not in holder.holder_pids
        assert not running(line.pid)
    else:
        assert line.pid in holder.holder_pids


@pytest.mark.parametrize(
    ("kind", "content"),
    [
        ("flock", b""),
        ("lockf", b""),
        ("ofd", b""),
        ("flock_cmd", b""),
        ("flock_fd", b""),
        ("filelock", b""),
        ("portalocker", b""),
        ("fasteners", b""),
        ("fasteners_read", b""),
        ("zc_lockfile", b" {pid}\n"),
        ("portalocker_pidfile", b"{pid}"),
    ],
)
def test_what_each_kind_writes(kind: str, content: bytes, holders: Holders, tmp_path: Path) -> None:
    need(kind)
    holder = holders.start(kind, lock_file(tmp_path, kind))
    expected = content.replace(b"{pid}", str(holder.pid).encode())
    assert holder.path.read_bytes() == expected
    if kind == "portalocker_pidfile":
        assert holder.lock_path.read_bytes() == b""  # the sidecar carries the flock
        assert sorted(p.name for p in holder.path.parent.iterdir()) == [
            "service.pid",
            "service.pid.lock",
        ]


def test_lockf_range_covers_only_its_range(holders: Holders, tmp_path: Path) -> None:
    path = tmp_path / "locks" / "range.lock"
    holders.start("lockf_range", path)
    assert library_says_held("lockf_range", path)
    assert library_says_held("lockf_range", path, start=RANGE_START + RANGE_LEN - 1, length=1)
    assert not library_says_held("lockf_range", path, start=0, length=RANGE_START)
    assert library_says_held("lockf", path)  # the whole file overlaps the range


def test_flock_and_posix_locks_do_not_conflict_but_ofd_and_posix_do(
    holders: Holders, tmp_path: Path
) -> None:
    flocked = tmp_path / "locks" / "a.lock"
    holders.start("flock", flocked)
    assert not library_says_held("lockf", flocked)
    ofd = tmp_path / "locks" / "b.lock"
    holders.start("ofd", ofd)
    assert library_says_held("lockf", ofd)
    assert not library_says_held("flock", ofd)


# --------------------------------------------------------------------------- release


@pytest.mark.parametrize("kind", RELEASABLE)
def test_release_frees_and_lives_on(kind: str, holders: Holders, tmp_path: Path) -> None:
    need(kind)
    holder = holders.start(kind, lock_file(tmp_path, kind))
    holder.release()

    assert holder.alive
    assert not library_says_held(kind, holder.path)
    assert not open_by(holder.pid, holder.lock_path)
    if holder.kind.unlinks:
        assert not holder.path.exists() and not holder.lock_path.exists()
        assert list(holder.path.parent.iterdir()) == []
    else:
        assert held_lines(holder) == []
    if kind == "zc_lockfile":  # the pid stays behind, and the process lives on
        assert holder.path.read_bytes() == f" {holder.pid}\n".encode()


@pytest.mark.parametrize("kind", KEEPS_OPEN)
def test_unlock_keeps_the_file_open(kind: str, holders: Holders, tmp_path: Path) -> None:
    need(kind)
    holder = holders.start(kind, lock_file(tmp_path, kind))
    holder.release(keep_open=True)
    assert not library_says_held(kind, holder.path)
    assert held_lines(holder) == []
    assert open_by(holder.pid, holder.path)


def test_library_kinds_cannot_keep_open(holders: Holders, tmp_path: Path) -> None:
    holder = holders.start("filelock", lock_file(tmp_path, "filelock"))
    with pytest.raises(HarnessError):
        holder.release(keep_open=True)
    flock_cmd = holders.start("flock_cmd", lock_file(tmp_path, "flock_cmd"))
    with pytest.raises(HarnessError):
        flock_cmd.release()


# --------------------------------------------------------------------------- kill / exit


@pytest.mark.parametrize("kind", HOLDER_KINDS)
def test_sigkill_frees_and_leaves_the_files(kind: str, holders: Holders, tmp_path: Path) -> None:
    need(kind)
    holder = holders.start(kind, lock_file(tmp_path, kind))
    pids = holder.holder_pids
    holder.kill()

    assert not any(running(pid) for pid in pids)
    assert holder.path.exists() and holder.lock_path.exists()  # nothing cleans up
    assert not library_says_held(kind, holder.path)
    assert held_lines(holder) == []
    if kind == "zc_lockfile":
        assert holder.path.read_bytes() == f" {holder.pid}\n".encode()
    if kind == "portalocker_pidfile":
        assert holder.path.read_bytes() == str(holder.pid).encode()


@pytest.mark.parametrize("kind", HOLDER_KINDS)
def test_exit_frees(kind: str, holders: Holders, tmp_path: Path) -> None:
    need(kind)
    holder = holders.start(kind, lock_file(tmp_path, kind))
    holder.exit()
    assert not holder.alive
    assert not library_says_held(kind, holder.path)
    if holder.lock_path.exists():
        assert held_lines(holder) == []


def test_flock_cmd_lock_outlives_a_killed_flock(holders: Holders, tmp_path: Path) -> None:
    """SIGKILL flock(1) alone: the command it ran keeps the locked descriptor, and
    /proc/locks still names the dead flock(1)."""
    need("flock_cmd")
    holder = holders.start("flock_cmd", lock_file(tmp_path, "flock_cmd"))
    flock_pid = holder.pid
    (command,) = holder.holder_pids - {flock_pid}
    holder.kill_leader()

    assert not running(flock_pid)
    assert holder.holder_pids == {command} and running(command)
    assert library_says_held("flock_cmd", holder.path)
    (line,) = held_lines(holder)
    assert line.pid == flock_pid
    assert fdinfo_locks(command, line.inode)

    holder.kill()
    assert not running(command)
    assert not library_says_held("flock_cmd", holder.path)


def test_close_reaps_every_helper(tmp_path: Path) -> None:
    factory = Holders()
    started = [
        factory.start(kind, lock_file(tmp_path, kind))
        for kind in ("flock", "flock_cmd", "fasteners")
    ]
    pids = {pid for holder in started for pid in holder.holder_pids}
    factory.close()
    assert all(holder.proc.returncode is not None for holder in started)
    assert not any(running(pid) for pid in pids)
    assert factory.started == []


def test_a_second_holder_fails_fast_instead_of_hanging(holders: Holders, tmp_path: Path) -> None:
    path = lock_file(tmp_path, "filelock")
    holders.start("filelock", path)
    with pytest.raises(HarnessError, match="did not take the lock"):
        holders.start("filelock", path)


# --------------------------------------------------------------------------- waiters


@pytest.mark.parametrize("kind", HOLDER_KINDS)
def test_waiter_waits_then_gets_the_lock(kind: str, holders: Holders, tmp_path: Path) -> None:
    need(kind)
    holder = holders.start(kind, lock_file(tmp_path, kind))
    waiter = holders.start(holder.kind.waiter, holder.lock_path)

    assert len(held_lines(holder)) == 1
    (waiting,) = [lock for lock in locks_on(holder.lock_path) if lock.waiting]
    assert waiting.pid == waiter.pid
    assert waiting.type == KINDS[waiter.kind.name].type
    assert library_says_held(kind, holder.path)

    free_it(holder)
    waiter.wait_acquired()
    assert library_says_held(waiter.kind.name, holder.lock_path)
    (now,) = locks_on(holder.lock_path)
    assert (now.waiting, now.pid) == (False, waiter.pid)
    waiter.release()
    assert not library_says_held(waiter.kind.name, holder.lock_path)


def test_waiter_on_a_free_file_is_a_harness_error(holders: Holders, tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="at once"):
        holders.start("waiter", tmp_path / "free.lock")


def test_probes_change_nothing(holders: Holders, tmp_path: Path) -> None:
    """A probe that wins the lock undoes it: zc.lockfile's pid stays the holder's,
    PidFileLock's files stay, nothing is created."""
    zc = holders.start("zc_lockfile", lock_file(tmp_path, "zc_lockfile"))
    zc.kill()
    before = zc.path.read_bytes()
    assert not library_says_held("zc_lockfile", zc.path)
    assert zc.path.read_bytes() == before

    missing = tmp_path / "nothing" / "here.lock"
    for kind in HOLDER_KINDS:
        assert not library_says_held(kind, missing)
    assert not missing.parent.exists()

    need("portalocker_pidfile")
    pidfile = holders.start("portalocker_pidfile", lock_file(tmp_path, "portalocker_pidfile"))
    pidfile.kill()
    assert not library_says_held("portalocker_pidfile", pidfile.path)
    assert pidfile.path.read_bytes() == str(pidfile.pid).encode()
    assert pidfile.lock_path.exists()
