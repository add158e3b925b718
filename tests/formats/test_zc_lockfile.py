"""zc.lockfile with content templates, held by the real library in
subprocesses; lockwatch runs as a real `ls --json` process. zc.lockfile only
ever asks its flock (the content is never read back), so lockwatch follows
the kernel; its own probe (a fresh `LockFile(path)`) is compared with it."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.formats.common import (
    Holder,
    codes,
    hold_in,
    holder_script,
    killed_at_teardown,
    locks_dir,
    python_says,
    records,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="kernel locks are read from /proc/locks"
)

TEMPLATES = ["{pid}", "{pid};{hostname}", "{hostname}:{pid}", "  {pid}", "{hostname}"]

HOLD = holder_script(
    take="""import zc.lockfile
lock = zc.lockfile.LockFile(sys.argv[1], content_template=sys.argv[2])""",
    release="lock.close()",
)

# zc.lockfile's own answer; on success it rewrites the file with its own pid,
# so it is asked last.
PROBE = """
import sys
import zc.lockfile
try:
    zc.lockfile.LockFile(sys.argv[1]).close()
except zc.lockfile.LockError:
    print("held")
else:
    print("free")
"""


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    yield from killed_at_teardown()


def hold(holders: list[Holder], path: Path, template: str) -> Holder:
    return hold_in(holders, [sys.executable, "-c", HOLD, str(path), template])


def zc_says(path: Path) -> str:
    return python_says(PROBE, str(path))


@pytest.fixture
def locks(tmp_path: Path) -> Path:
    return locks_dir(tmp_path)


def expected_bytes(template: str, pid: int) -> bytes:
    return (" " + template.format(pid=pid, hostname=socket.gethostname()) + "\n").encode()


@pytest.mark.parametrize("template", TEMPLATES)
def test_held_is_active_on_the_kernels_word(
    locks: Path, holders: list[Holder], template: str
) -> None:
    path = locks / "z.lock"
    holder = hold(holders, path, template)
    assert path.read_bytes() == expected_bytes(template, holder.proc.pid)
    record = records(locks)["z.lock"]
    assert record["format"] == "zc.lockfile", record
    assert record["state"] == "active", record
    assert codes(record)[0] == "kernel_lock"
    assert record["holder"]["pid"] == holder.proc.pid
    assert zc_says(path) == "held"


@pytest.mark.parametrize("template", TEMPLATES)
def test_released_is_free(locks: Path, holders: list[Holder], template: str) -> None:
    path = locks / "z.lock"
    holder = hold(holders, path, template)
    holder.release()  # the file and the live holder's pid stay
    assert path.read_bytes() == expected_bytes(template, holder.proc.pid)
    record = records(locks)["z.lock"]
    assert record["format"] == "zc.lockfile", record
    assert record["state"] == "free", record
    assert codes(record) == ["not_held"]
    assert zc_says(path) == "free"


@pytest.mark.parametrize("template", ["{pid};{hostname}", "  {pid}"])
def test_killed_holder_is_free(locks: Path, holders: list[Holder], template: str) -> None:
    path = locks / "z.lock"
    hold(holders, path, template).kill()
    record = records(locks)["z.lock"]
    assert record["format"] == "zc.lockfile", record
    assert record["state"] == "free", record
    assert codes(record) == ["not_held"]
    assert zc_says(path) == "free"


def test_foreign_host_follows_the_kernel(locks: Path) -> None:
    path = locks / "z.lock"
    # A byte-for-byte imitation of `{pid};{hostname}` written on host far-away
    # (no second machine here): zc.lockfile never reads it, and no kernel lock
    # is held on this local file, so it is free.
    path.write_bytes(b" 4242;far-away\n")
    record = records(locks)["z.lock"]
    assert record["format"] == "zc.lockfile", record
    assert record["holder"]["host"] == "far-away"
    assert record["state"] == "free", record
    assert zc_says(path) == "free"


@pytest.mark.parametrize(
    "content", [b" 1 2 3\n", b" 12;a;b;c;d\n", b" \x01\x02\n", b" 12\n34\n", b" \xff\n"]
)
def test_other_content_is_not_claimed(locks: Path, content: bytes) -> None:
    (locks / "z.lock").write_bytes(content)
    record = records(locks)["z.lock"]
    assert record["format"] != "zc.lockfile", record
