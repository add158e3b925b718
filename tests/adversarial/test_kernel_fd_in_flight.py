"""Issue 47 item 15: a flock whose open file was passed over a unix socket
(SCM_RIGHTS) and is still in flight: no process has it open, and /proc/locks
names only the process that took it, whose pid may be reused (a postgres backend
was named as the holder). Who holds it cannot be known: no process is named, the
holder is marked uncertain in the JSON and in words.

Real kernel, real files: a child process takes the flock, sends its fd into a
socket pair whose other end the test never reads, closes it and exits; the test
then closes its end, which frees the lock. The child's pid is not really reused
here (a test cannot make the kernel hand it out again): what matters is that it
is not taken for the holder either way."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockwatch.sources.filelocks import FileKey
from lockwatch.sources.procfs import read_table
from tests.conftest import run_cli

_SENDER = """
import fcntl, os, socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
fd = os.open(sys.argv[2], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
socket.send_fds(sock, [b"x"], [fd])
os.close(fd)
print(os.getpid(), flush=True)
"""


@pytest.fixture
def in_flight(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A file flocked by an open file that only a socket's queue holds, and the
    pid of the process that took it (exited)."""
    path = tmp_path / "job.lock"
    path.write_bytes(b"")
    keep, give = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _SENDER, str(give.fileno()), str(path)],
            pass_fds=(give.fileno(),),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        give.close()
        yield path, int(done.stdout)
    finally:
        give.close()
        keep.close()  # the fd in flight is dropped: the lock goes with it


def test_the_holder_of_an_open_file_in_flight_is_uncertain(in_flight: tuple[Path, int]) -> None:
    path, taker = in_flight
    stat = path.stat()
    key = FileKey.of(stat.st_dev, stat.st_ino)
    (kernel,) = [lock for lock in read_table(only={key}).locks if lock.file == key]
    assert kernel.pid == taker and not kernel.waiting  # the kernel still holds it
    assert kernel.owner_unseen and kernel.owners == () and kernel.holder_pid is None

    code, out, err = run_cli("ls", str(path.parent), "--kernel", "--json")
    assert code in (0, 1), err
    (record,) = json.loads(out)["locks"]  # the file's row is its kernel lock's
    assert record["holder_uncertain"] is True and record["taken_by_pid"] == taker
    assert record["holder"]["pid"] is None
    assert "holder_uncertain" in [reason["code"] for reason in record["reasons"]]

    code, out, _ = run_cli("ls", str(path.parent), "--kernel", "-l")
    assert f"holder_uncertain: who holds it cannot be known: /proc/locks names pid {taker}" in out


def test_a_holder_with_the_file_open_is_certain(tmp_path: Path) -> None:
    path = tmp_path / "own.lock"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        stat = path.stat()
        key = FileKey.of(stat.st_dev, stat.st_ino)
        (kernel,) = [lock for lock in read_table(only={key}).locks if lock.file == key]
        assert not kernel.owner_unseen and kernel.holder_pid == os.getpid()
    finally:
        os.close(fd)
