"""Emacs `.#<file>` locks, as lockwatch reads them and breaks them.

Emacs is not installed here, so every lock is a byte-for-byte imitation of what
src/filelock.c's lock_file_1 makes: a dangling symlink `.#<file>` whose target
is `USER@HOST.PID:BOOT` (boot time in epoch seconds, no newline). The holder is
a real process the test starts (live) or has reaped (dead). Emacs's own rule:
on its host, a dead pid (or another boot) means it deletes the lock and takes
it; a lock from another host is always live.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.formats.common import WAIT_S, codes, dead_pid, record, run_break

HOST = socket.gethostname()
USER = getpass.getuser()


def boot_time() -> int:
    with open("/proc/stat") as stat:
        return next(int(line.split()[1]) for line in stat if line.startswith("btime "))


@pytest.fixture
def live_pid() -> Iterator[int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(timeout=WAIT_S)


def emacs_lock(directory: Path, name: str, target: str) -> Path:
    (directory / name).write_text("edited\n")
    lock = directory / f".#{name}"
    lock.symlink_to(target)  # what Emacs makes: never a file it points to
    return lock


def test_live_holder_on_this_host(tmp_path: Path, live_pid: int) -> None:
    emacs_lock(tmp_path, "notes.org", f"{USER}@{HOST}.{live_pid}:{boot_time()}")
    rec = record(tmp_path, ".#notes.org")
    assert rec is not None
    assert (rec["format"], rec["name"], rec["state"], codes(rec)) == (
        "emacs",
        "notes.org",
        "active",
        [],
    )
    assert (rec["holder"]["pid"], rec["holder"]["host"], rec["holder"]["actor"]) == (
        live_pid,
        HOST,
        USER,
    )
    assert rec["holder"]["alive"] is True


def test_dead_holder_is_stale(tmp_path: Path) -> None:
    pid = dead_pid()
    emacs_lock(tmp_path, "notes.org", f"{USER}@{HOST}.{pid}:{boot_time()}")
    rec = record(tmp_path, ".#notes.org")
    assert rec is not None
    assert (rec["state"], codes(rec)) == ("stale", ["holder_dead"])
    assert rec["holder"]["pid"] == pid


def test_a_lock_from_an_earlier_boot_is_stale(tmp_path: Path, live_pid: int) -> None:
    # The pid runs, and started before the symlink was made: only the boot time
    # tells that the lock is from another boot (Emacs: "boot time differs").
    emacs_lock(tmp_path, "notes.org", f"{USER}@{HOST}.{live_pid}:{boot_time() - 86_400}")
    rec = record(tmp_path, ".#notes.org")
    assert rec is not None
    assert (rec["state"], codes(rec)) == ("stale", ["pid_reused"])
    assert "earlier boot" in rec["reasons"][0]["message"]


@pytest.mark.parametrize(
    "target",
    [
        "{user}@{host}.{pid}",  # no boot time known
        "{user}@{host}.{pid}\uf022{boot}",  # CIFS's mangled colon, accepted by Emacs
        "j.r.doe@{user}@{host}.{pid}:{boot}",  # USER runs to the last `@`
    ],
)
def test_variants_emacs_accepts(tmp_path: Path, live_pid: int, target: str) -> None:
    text = target.format(user=USER, host=HOST, pid=live_pid, boot=boot_time())
    emacs_lock(tmp_path, "notes.org", text)
    rec = record(tmp_path, ".#notes.org")
    assert rec is not None
    assert (rec["state"], rec["holder"]["pid"], rec["holder"]["host"]) == (
        "active",
        live_pid,
        HOST,
    )


def test_other_host_is_always_live(tmp_path: Path) -> None:
    # Emacs never judges another host's lock (ret = -1: "assumed live").
    emacs_lock(tmp_path, "notes.org", f"alice@laptop.example.org.{dead_pid()}:1700000000")
    rec = record(tmp_path, ".#notes.org")
    assert rec is not None
    assert (rec["state"], codes(rec)) == ("active", ["foreign_host"])
    assert (rec["holder"]["host"], rec["holder"]["actor"]) == ("laptop.example.org", "alice")


@pytest.mark.parametrize(
    "target",
    ["garbage", "u@host", "u@host.12x:1", "u@host.1:", "u@host.0:1", "", "u@host." + "9" * 4000],
)
def test_unparseable_targets_are_invalid(tmp_path: Path, target: str) -> None:
    emacs_lock(tmp_path, "notes.org", target or ".")
    rec = record(tmp_path, ".#notes.org")
    assert rec is not None
    assert (rec["format"], rec["state"], codes(rec)) == ("emacs", "invalid", ["unparseable"])


def test_break_a_leftover_lock(tmp_path: Path) -> None:
    lock = emacs_lock(tmp_path, "notes.org", f"{USER}@{HOST}.{dead_pid()}:{boot_time()}")
    target = os.readlink(lock)
    rec = record(tmp_path, ".#notes.org")
    assert rec is not None and rec["state"] == "stale"
    home = tmp_path.parent / "lockwatch-home"
    audit = home / "audit.jsonl"
    done = run_break(rec["id"], home, audit)
    assert done.returncode == 0, done.stderr
    assert not os.path.lexists(lock)
    (kept,) = (tmp_path / ".lockwatch-broken").iterdir()
    assert kept.is_symlink() and os.readlink(kept) == target  # the link itself, not followed
    assert (tmp_path / "notes.org").read_text() == "edited\n"
    events = [json.loads(line)["event"] for line in audit.read_text().splitlines()]
    assert events[-1] == "lock_broken", events
