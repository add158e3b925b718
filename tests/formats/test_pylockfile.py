"""The `lockfile` package's three lock classes, held by the real package.

Each helper process takes the lock with lockfile 0.12 (LinkLockFile,
SymlinkLockFile, MkdirLockFile) and writes `held` once it holds it; lockwatch
then runs as a real `python -m lockwatch ls --json` process, and its verdict is
checked against the contract and against the package's own `is_locked()` in a
fresh process. The package never calls a lock stale: after SIGKILL it still says
locked, and lockwatch says `stale` / `holder_dead` because only the dead pid could
ever `release()` it (NotMyLock for anyone else): a leftover only a break clears.

Python's hash(path) is part of Link/Symlink names, straight after the pid, so the
tests pick PYTHONHASHSEED: a negative hash's `-` separates it from the pid; a
positive one makes the pid ambiguous, and lockwatch must then say `no_pid`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.formats.common import (
    WAIT_S,
    codes,
    file_records,
    kill_and_reap,
    python_says,
    reap,
    record,
    run_ls,
    say,
    start_ready,
)

CLASSES = {
    "link": "lockfile.linklockfile.LinkLockFile",
    "symlink": "lockfile.symlinklockfile.SymlinkLockFile",
    "mkdir": "lockfile.mkdirlockfile.MkdirLockFile",
}
HOST = socket.gethostname()

# The lock is taken in a thread whose ident's low 32 bits have six hex digits or
# more, as all but 1 in 4096 do: a shorter tname is read as part of a foreign
# host name (pylockfile.py: the safe misreading), which is not what these tests
# are about. Threads are kept alive while looking, so each has its own stack.
HOLDER = r"""
import importlib, sys, threading
module, _, name = sys.argv[1].rpartition(".")
cls = getattr(importlib.import_module(module), name)
threaded = sys.argv[3] == "1"
taken = []
def long_ident():
    return not threaded or threading.get_ident() & 0xFFFFFFFF >= 0x100000
def take():
    lock = cls(sys.argv[2], threaded=threaded)
    lock.acquire(timeout=10)
    taken.append(lock)
def attempt(done):
    if long_ident():
        take()
        done.set()
    else:
        done.set()
        threading.Event().wait()  # parked: the next thread gets another stack
if long_ident():
    take()
for _ in range(64):
    if taken:
        break
    done = threading.Event()
    threading.Thread(target=attempt, args=(done,), daemon=True).start()
    done.wait()
(lock,) = taken
sys.stdout.write("held\n"); sys.stdout.flush()
if sys.stdin.readline().strip() == "release":
    lock.release()
    sys.stdout.write("released\n"); sys.stdout.flush()
sys.stdin.readline()
"""

PROBE = r"""
import importlib, sys
module, _, name = sys.argv[1].rpartition(".")
cls = getattr(importlib.import_module(module), name)
print("locked" if cls(sys.argv[2]).is_locked() else "unlocked")
"""


def hash_seed(path: str, negative: bool) -> str:
    """A PYTHONHASHSEED under which hash(path) has the wanted sign."""
    for seed in range(64):
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        out = subprocess.run(
            [sys.executable, "-c", "import sys; print(hash(sys.argv[1]))", path],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=WAIT_S,
        ).stdout
        value = int(out)
        if (value < 0) == negative and len(str(abs(value))) == 19:
            return str(seed)
    raise AssertionError("no seed gives that hash")


class Held:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    def say(self, line: str) -> str:
        return say(self.proc, line).strip()

    def kill(self) -> None:
        kill_and_reap(self.proc)


@pytest.fixture
def hold() -> Iterator[Any]:
    started: list[subprocess.Popen[str]] = []

    def start(kind: str, path: Path, *, threaded: bool = True, negative: bool = True) -> Held:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed(str(path), negative)}
        argv = [sys.executable, "-c", HOLDER, CLASSES[kind], str(path), "1" if threaded else "0"]
        return Held(start_ready(argv, started, env=env))  # blocks until it holds the lock

    try:
        yield start
    finally:
        reap(started)


def package_says(kind: str, path: Path) -> str:
    """lockfile's own answer, from a fresh process: `locked` or `unlocked`."""
    return python_says(PROBE, CLASSES[kind], str(path), timeout=WAIT_S)


@pytest.mark.parametrize("kind", list(CLASSES))
def test_held_then_released(hold: Any, tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data.txt"
    holder = hold(kind, data)
    rec = record(tmp_path, "data.txt.lock")
    assert rec is not None
    assert (rec["format"], rec["state"], codes(rec)) == ("lockfile", "active", [])
    assert (rec["holder"]["pid"], rec["holder"]["host"]) == (holder.pid, HOST)
    assert rec["holder"]["alive"] is True
    assert rec["name"] == "data.txt"
    assert package_says(kind, data) == "locked"

    assert holder.say("release") == "released"
    assert record(tmp_path, "data.txt.lock") is None
    assert package_says(kind, data) == "unlocked"


@pytest.mark.parametrize("kind", list(CLASSES))
def test_holder_killed_is_stale_though_the_package_waits_forever(
    hold: Any, tmp_path: Path, kind: str
) -> None:
    data = tmp_path / "data.txt"
    holder = hold(kind, data)
    holder.kill()
    rec = record(tmp_path, "data.txt.lock")
    assert rec is not None
    assert (rec["state"], codes(rec)) == ("stale", ["holder_dead"])
    assert rec["holder"]["pid"] == holder.pid
    assert package_says(kind, data) == "locked"  # its own answer: locked until broken


def _readings_now(lock_path: Path) -> tuple[list[int], list[int]]:
    """The pids a lock's unique name can be read as, and which of them are, now, a
    process that runs a program and was there when the lock was taken (what a
    holder can be): computed here from psutil, independently of lockwatch's verdict."""
    import psutil

    from lockwatch.sources.files.decoders.pylockfile import parse_unique

    if lock_path.is_symlink():
        name = os.readlink(lock_path)
    else:
        inode = lock_path.stat().st_ino
        (name,) = [
            p.name
            for p in lock_path.parent.iterdir()
            if p != lock_path and p.stat().st_ino == inode
        ]
    parsed = parse_unique(name)
    assert parsed is not None and parsed.pid is None, name
    taken = lock_path.lstat().st_mtime
    plausible = []
    for pid in parsed.candidates:
        if pid == 1:
            continue
        try:
            proc = psutil.Process(pid)
            if proc.cmdline() and proc.create_time() <= taken + 1.0:
                plausible.append(pid)
        except psutil.Error:
            continue
    return list(parsed.candidates), plausible


@pytest.mark.parametrize("kind", ["link", "symlink"])
def test_positive_hash_every_reading_of_the_pid_is_checked(
    hold: Any, tmp_path: Path, kind: str
) -> None:
    """pid and hash run together: every split is a reading, and lockwatch checks
    each. Held: its holder is the one reading that runs (named, active). Killed:
    no reading runs, so the holder is provably gone (stale), though the package
    itself still says locked."""
    data = tmp_path / "data.txt"
    holder = hold(kind, data, negative=False)
    if holder.pid >= 10**6:
        pytest.skip("a 7-digit pid before a 19-digit hash has one reading only")
    lock_path = tmp_path / "data.txt.lock"
    readings, plausible = _readings_now(lock_path)
    assert holder.pid in readings and len(readings) > 1
    rec = record(tmp_path, "data.txt.lock")
    assert rec is not None and rec["holder"]["pid"] is None
    if plausible == [holder.pid]:
        assert (rec["state"], codes(rec)) == ("active", ["pid_reading", "no_pid"]), rec
        assert f"only pid {holder.pid} " in rec["reasons"][0]["message"]
    else:  # another reading is some other program running here since before
        assert (rec["state"], codes(rec)[0]) == ("unknown", "ambiguous_pid"), rec

    holder.kill()
    _, plausible = _readings_now(lock_path)
    rec = record(tmp_path, "data.txt.lock")
    assert rec is not None
    if not plausible:
        assert (rec["state"], codes(rec)) == ("stale", ["holder_dead", "no_pid"]), rec
        assert str(holder.pid) in rec["reasons"][0]["message"]
    elif len(plausible) == 1:
        assert (rec["state"], codes(rec)[0]) == ("active", "pid_reading"), rec
    else:
        assert (rec["state"], codes(rec)[0]) == ("unknown", "ambiguous_pid"), rec
    assert rec["state"] != "active" or plausible, "a killed holder never reads as active"
    assert package_says(kind, data) == "locked"


@pytest.mark.parametrize("kind", ["link", "symlink", "mkdir"])
def test_unthreaded_names(hold: Any, tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data.txt"
    holder = hold(kind, data, threaded=False)
    rec = record(tmp_path, "data.txt.lock")
    assert rec is not None
    assert (rec["state"], rec["holder"]["pid"], rec["holder"]["host"]) == (
        "active",
        holder.pid,
        HOST,
    )


def test_a_waiting_contender_is_not_a_second_lock(hold: Any, tmp_path: Path) -> None:
    data = tmp_path / "data.txt"
    holder = hold("link", data)
    waiter = subprocess.Popen(
        [sys.executable, "-c", HOLDER, CLASSES["link"], str(data), "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # Its unique file (nlink 1) appears as soon as it starts to wait.
        deadline = time.monotonic() + WAIT_S
        while len(list(tmp_path.iterdir())) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(list(tmp_path.iterdir())) == 3
        locks = file_records(run_ls(tmp_path).locks)
        assert [(r["name"], r["state"], r["holder"]["pid"]) for r in locks] == [
            ("data.txt", "active", holder.pid)
        ]
    finally:
        waiter.kill()
        waiter.wait(timeout=WAIT_S)


# Byte-for-byte imitations of another host's locks: lockfile cannot be told to
# use another host name, so the entries are made as its acquire() makes them.
@pytest.mark.parametrize("kind", list(CLASSES))
def test_foreign_host(tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data.txt"
    lock = tmp_path / "data.txt.lock"
    if kind == "link":
        unique = tmp_path / "build-7.example.com-c280db80.14906-1845648673546318050"
        unique.write_bytes(b"")
        os.link(unique, lock)
    elif kind == "symlink":
        lock.symlink_to("build-7.example.com-db884b80.14961-5719198247697970351")
    else:
        lock.mkdir()
        (lock / "build-7.example.com.-811e7b8015022").write_bytes(b"")
    rec = record(tmp_path, "data.txt.lock")
    assert rec is not None
    assert (rec["format"], rec["state"], codes(rec)) == ("lockfile", "active", ["foreign_host"])
    assert rec["holder"]["host"] == "build-7.example.com"
    assert rec["holder"]["pid"] in (14906, 14961, 15022)
    assert package_says(kind, data) == "locked"


def test_bad_entries_are_never_read_as_lockfile(tmp_path: Path) -> None:
    (tmp_path / "odd.lock").symlink_to("not a lockfile name")
    other = tmp_path / "plain"
    other.write_bytes(b"")
    os.link(other, tmp_path / "linked.lock")
    (tmp_path / "two.lock").mkdir()
    (tmp_path / "two.lock" / "vm.123").write_bytes(b"")
    (tmp_path / "two.lock" / "vm.456").write_bytes(b"")
    (tmp_path / "zero.lock").mkdir()
    (tmp_path / "zero.lock" / "vm.0123").write_bytes(b"")
    by_name = {Path(r["path"]).name: r for r in run_ls(tmp_path).locks}
    assert (by_name["odd.lock"]["state"], codes(by_name["odd.lock"])) == ("invalid", ["symlink"])
    assert by_name["linked.lock"]["format"] != "lockfile"
    assert by_name["two.lock"]["format"] == by_name["zero.lock"]["format"] == "mkdir"
