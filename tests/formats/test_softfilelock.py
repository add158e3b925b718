"""filelock's SoftFileLock, held by the real library in subprocesses; lockwatch
runs as a real `ls --json` process and is compared with filelock's own answer
(a fresh process's `SoftFileLock(path).acquire(blocking=False)`, which takes
over a stale marker: used only where that is what is checked)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.formats.common import (
    LS_TIMEOUT,
    Holder,
    clean_env,
    codes,
    dead_pid,
    hold_in,
    holder_script,
    killed_at_teardown,
    locks_dir,
    python_says,
    records,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="start tokens and pid namespaces are Linux's"
)

HOLD = holder_script(
    take="""from filelock import SoftFileLock
lock = SoftFileLock(sys.argv[1])
lock.acquire()""",
    release="lock.release()",
)

# filelock's verdict from a fresh process: "acquired" (free or taken over as
# stale; released again at once) or "timeout" (held).
TRY = """
import sys
from filelock import SoftFileLock, Timeout
lock = SoftFileLock(sys.argv[1])
try:
    lock.acquire(blocking=False)
except Timeout:
    print("timeout")
else:
    lock.release()
    print("acquired")
"""


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    yield from killed_at_teardown()


def hold(holders: list[Holder], path: Path, *prefix: str) -> Holder:
    return hold_in(holders, [*prefix, sys.executable, "-c", HOLD, str(path)])


def filelock_says(path: Path) -> str:
    return python_says(TRY, str(path))


@pytest.fixture
def locks(tmp_path: Path) -> Path:
    return locks_dir(tmp_path)


def our_marker(pid: int, host: str | None = None, ticks: int | None = None) -> bytes:
    """A marker as filelock 4.2 writes it on this host (its own host_name() and
    boot id), for pid `pid`; a start token with other start ticks if asked."""
    from filelock._identity import host_name, process_start_token

    token = process_start_token(os.getpid())
    assert token is not None
    if ticks is not None:
        token = (token >> 64 << 64) | ticks
    return f"{pid}\n{host or host_name()}\n{token}\n".encode()


def test_held_is_active(locks: Path, holders: list[Holder]) -> None:
    path = locks / "s.lock"
    holder = hold(holders, path)
    lines = path.read_text().splitlines()
    assert len(lines) == 3  # pid, host, start token
    record = records(locks)["s.lock"]
    assert record["format"] == "filelock-soft"
    assert record["state"] == "active", record
    assert record["holder"]["pid"] == holder.proc.pid
    assert record["holder"]["alive"] is True
    assert codes(record) == []
    assert filelock_says(path) == "timeout"


def test_released_leaves_nothing(locks: Path, holders: list[Holder]) -> None:
    path = locks / "s.lock"
    hold(holders, path).release()
    assert os.listdir(locks) == []
    assert records(locks) == {}
    assert filelock_says(path) == "acquired"


def test_killed_holder_is_stale_as_filelock_finds_it(locks: Path, holders: list[Holder]) -> None:
    path = locks / "s.lock"
    holder = hold(holders, path)
    holder.kill()
    record = records(locks)["s.lock"]
    assert record["state"] == "stale", record
    assert codes(record) == ["holder_dead"]
    # filelock agrees: a non-blocking acquire takes the stale marker over.
    assert filelock_says(path) == "acquired"


def test_recycled_pid_is_stale_by_its_start_ticks(locks: Path) -> None:
    path = locks / "s.lock"
    # Byte-for-byte what filelock writes, naming this live test process with
    # another start time: the pid was recycled (no way to make the kernel reuse one).
    path.write_bytes(our_marker(os.getpid(), ticks=1))
    record = records(locks)["s.lock"]
    assert record["state"] == "stale", record
    assert codes(record)[0] == "pid_reused"
    assert filelock_says(path) == "acquired"  # filelock takes it over too


def test_marker_without_token_names_a_live_pid(locks: Path) -> None:
    # filelock 3.22-3.29 on Linux wrote no token (byte-for-byte, by hand).
    path = locks / "s.lock"
    from filelock._identity import host_name

    path.write_bytes(f"{os.getpid()}\n{host_name()}\n".encode())
    record = records(locks)["s.lock"]
    assert record["state"] == "active", record
    assert filelock_says(path) == "timeout"


def test_foreign_host_is_never_stale(locks: Path) -> None:
    path = locks / "s.lock"
    # A byte-for-byte imitation of filelock's marker from host `far-away` (no
    # second machine here): its pid is dead on this one, but filelock never
    # probes another host's pid.
    path.write_bytes(b"999999\nfar-away\n" + str(5 << 64 | 1234).encode() + b"\n")
    record = records(locks)["s.lock"]
    assert record["state"] == "active", record
    assert codes(record) == ["foreign_host"]
    assert record["holder"]["host"] == "far-away"
    assert filelock_says(path) == "timeout"


def test_escaped_host_is_unescaped(locks: Path) -> None:
    path = locks / "s.lock"
    # host_name() escapes `?` and bytes outside printable ASCII as `?xx`.
    path.write_bytes(b"999999\nh?c3?b4te?3f\n")
    record = records(locks)["s.lock"]
    assert record["holder"]["host"] == "hôte?"
    assert codes(record) == ["foreign_host"]


@pytest.fixture
def in_pid_namespace() -> tuple[str, ...]:
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("needs root and unshare(1) for a pid namespace")
    probe = subprocess.run(
        [unshare, "-p", "-f", "--mount-proc", "true"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        pytest.skip(f"unshare failed: {probe.stderr!r}")
    return (unshare, "-p", "-f", "--mount-proc")


def test_holder_in_another_pid_namespace_is_followed_there(
    locks: Path, holders: list[Holder], in_pid_namespace: tuple[str, ...]
) -> None:
    path = locks / "s.lock"
    holder = hold(holders, path, *in_pid_namespace)
    pid, host = path.read_text().splitlines()[:2]
    assert pid == "1" and "?pidns-" in host  # written by the real filelock in there
    # The truth: unshare's only child is the namespace's init, the holder.
    (child,) = psutil.Process(holder.proc.pid).children()
    namespace = os.stat(f"/proc/{child.pid}/ns/pid").st_ino
    assert host.endswith(f"?pidns-{namespace:x}")
    record = records(locks)["s.lock"]
    assert record["state"] == "active", record
    assert codes(record) == ["pid_namespace"]
    assert f"is pid {child.pid} on this host" in record["reasons"][0]["message"]
    assert record["holder"]["alive"] is True
    assert record["holder"]["process"]["cmdline"] == child.cmdline()
    # The holder's pid is the host's (issue 31): the file's 1 is the container's.
    assert record["holder"]["pid"] == child.pid
    table = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", str(locks)],
        capture_output=True, text=True, timeout=LS_TIMEOUT, check=False,
        env={**clean_env(locks.parent / "home"), "COLUMNS": "200"},
    )  # fmt: skip
    (row,) = [line for line in table.stdout.splitlines() if "s.lock" in line]
    assert f" {child.pid}@" in row and " 1@" not in row, row  # pid@host
    assert filelock_says(path) == "timeout"

    # The holder killed and reaped by unshare, which then exits: nothing is left
    # in that namespace, so it is gone and its holder provably dead.
    os.kill(child.pid, signal.SIGKILL)
    assert holder.proc.wait(timeout=10) != 0
    assert not any(p.pid == child.pid for p in psutil.process_iter())
    record = records(locks)["s.lock"]
    assert record["state"] == "stale", record
    assert codes(record) == ["holder_dead"]
    assert "pid namespace is gone" in record["reasons"][0]["message"]
    # filelock never breaks another namespace's marker: lockwatch says more.
    assert filelock_says(path) == "timeout"


def unused_pid_namespace() -> int:
    """An inode no process here has as its pid namespace."""
    used = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                used.add(os.stat(f"/proc/{entry}/ns/pid").st_ino)
    return next(inode for inode in range(0xF0000152, 0xF0010000) if inode not in used)


def test_pidns_marker_for_a_namespace_not_here(locks: Path) -> None:
    path = locks / "s.lock"
    # Byte-for-byte filelock's marker from a container sharing this host name,
    # whose namespace no process here is in.
    from filelock._identity import host_name

    namespace = unused_pid_namespace()
    path.write_bytes(f"999999\n{host_name()}?pidns-{namespace:x}\n".encode())
    record = records(locks)["s.lock"]
    if os.geteuid() == 0:  # every process's namespace can be read: it is gone
        assert record["state"] == "stale", record
        assert codes(record) == ["holder_dead"]
    else:  # other users' processes hide theirs: nobody can tell
        assert record["state"] == "unknown", record
        assert codes(record) == ["other_pid_namespace"]
    assert filelock_says(path) == "timeout"


@pytest.mark.parametrize(
    ("content", "state", "code"),
    [
        (b"{dead}", "stale", "holder_dead"),  # no newline: not filelock's; a bare pid
        (b"{dead}\nvm", "stale", "holder_dead"),
        (b"abc\nvm\n", "invalid", "unparseable"),
        (b"\xff\xfe\n\n", "invalid", "unparseable"),
        (b"1\n2\n3\n4\n", "unknown", "other_pid_namespace"),  # generic: pid 1
    ],
)
def test_bad_content_never_crashes(locks: Path, content: bytes, state: str, code: str) -> None:
    (locks / "s.lock").write_bytes(content.replace(b"{dead}", str(dead_pid()).encode()))
    record = records(locks)["s.lock"]
    assert record["format"] != "filelock-soft"
    assert record["state"] == state, record
    assert code in codes(record)
