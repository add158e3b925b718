"""liblockfile's and procmail's lock files, made by the real tools and judged
against the tools' own answers (issue 33, item 3).

`dotlockfile` (liblockfile-bin) and `lockfile-create` (lockfile-progs) write
`0\\n` when they record no pid: valid for 5 minutes after the last touch, then
stale, as `lockfile-check` says (exit 0: a valid lock). With `--use-pid` they
write the holder's pid, and `lockfile-check --use-pid` asks whether it runs.
procmail's `lockfile` writes `0` and never expires it: only a caller's `-l N`
forces it. Ages are set with os.utime (the mtime the tools read; the atime left
at now, which liblockfile takes as the file system's clock), never slept for.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.formats.common import (
    WAIT_S,
    codes,
    kill_and_reap,
    locks_dir,
    need_tools,
    records,
    start_ready,
)

# Far enough either side of liblockfile's 300 s that a slow listing cannot cross it.
FRESH_S, OLD_S = 150.0, 450.0


def aged(path: Path, seconds: float) -> None:
    now = time.time()
    os.utime(path, (now, now - seconds))


def says(*argv: str, cwd: Path) -> int:
    """A tool's exit status."""
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, timeout=WAIT_S, check=False
    ).returncode


def test_liblockfile_zero_is_valid_then_stale_as_lockfile_check_says(tmp_path: Path) -> None:
    need_tools("dotlockfile", "lockfile-create", "lockfile-check")
    directory = locks_dir(tmp_path)
    made = {
        "dot-fresh.lock": ["dotlockfile", "-l", "-r", "0", "dot-fresh.lock"],
        "dot-old.lock": ["dotlockfile", "-l", "-r", "0", "dot-old.lock"],
        "progs-fresh.lock": ["lockfile-create", "--retry", "0", "progs-fresh"],
        "progs-old.lock": ["lockfile-create", "--retry", "0", "progs-old"],
    }
    for name, argv in made.items():
        assert says(*argv, cwd=directory) == 0, argv
        assert (directory / name).read_bytes() == b"0\n"  # no pid: what lockwatch reads
        aged(directory / name, OLD_S if "old" in name else FRESH_S)

    found = records(directory)
    for name in made:
        record = found[name]
        valid = says("lockfile-check", "--lock-name", name, cwd=directory) == 0
        assert record["format"] == "liblockfile", record
        assert record["state"] == ("active" if valid else "stale"), (name, valid, record)
        assert valid is ("fresh" in name)
        assert "no_pid" in codes(record)
        if not valid:
            assert codes(record)[0] == "too_old", record


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            kill_and_reap(proc)


def test_lockfile_create_use_pid_follows_its_holder(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    need_tools("lockfile-create", "lockfile-check")
    directory = locks_dir(tmp_path)
    lock = directory / "job.lock"
    # --use-pid records the parent: the shell, which then becomes `sleep`.
    script = f"lockfile-create --use-pid --lock-name {lock} && echo held && exec sleep 600"
    holder = start_ready(["sh", "-c", script], started)
    assert lock.read_text().strip() == str(holder.pid)

    record = records(directory)["job.lock"]
    assert says("lockfile-check", "--use-pid", "--lock-name", str(lock), cwd=directory) == 0
    assert (record["state"], record["holder"]["pid"]) == ("active", holder.pid), record

    kill_and_reap(holder)
    record = records(directory)["job.lock"]
    assert says("lockfile-check", "--use-pid", "--lock-name", str(lock), cwd=directory) != 0
    assert (record["state"], codes(record)) == ("stale", ["holder_dead"]), record


def test_procmail_lockfile_is_held_with_no_bound(tmp_path: Path) -> None:
    need_tools("lockfile")
    directory = locks_dir(tmp_path)
    lock = directory / "mailbox.lock"
    assert says("lockfile", "-r0", str(lock), cwd=directory) == 0
    assert lock.read_bytes() == b"0"
    aged(lock, 30 * 86400)

    record = records(directory)["mailbox.lock"]
    assert (record["format"], record["state"]) == ("procmail", "active"), record
    assert codes(record) == ["no_expiry"]
    # procmail's own answer: still held a month on (another lockfile cannot take it) ...
    assert says("lockfile", "-r0", str(lock), cwd=directory) != 0
    # ... unless its caller gives a timeout, which the file does not record.
    assert says("lockfile", "-r0", "-s0", "-l", "60", str(lock), cwd=directory) == 0
