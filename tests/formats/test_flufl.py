"""flufl.lock, held by the real library in subprocesses; lockwatch runs as a
real `ls --json` process and is compared with flufl's own `Lock(path).state`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from lockwatch.sources.files.decoders.flufl import CLOCK_SLOP_SECONDS
from tests.formats.common import (
    Holder,
    age,
    by_name,
    codes,
    hold_in,
    holder_script,
    killed_at_teardown,
    locks_dir,
    ls,
    python_says,
    records,
    set_mtime,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX separator and hard links")

HOLD = holder_script(
    take="""from datetime import timedelta
from flufl.lock import Lock
lock = Lock(sys.argv[1], lifetime=timedelta(seconds=float(sys.argv[2])))
lock.lock()""",
    release="lock.unlock()",
)

STATE = """
import sys
from flufl.lock import Lock
print(Lock(sys.argv[1]).state.name)
"""


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    yield from killed_at_teardown()


def hold(holders: list[Holder], path: Path, lifetime: float = 60.0) -> Holder:
    return hold_in(holders, [sys.executable, "-c", HOLD, str(path), str(lifetime)])


def flufl_state(path: Path) -> str:
    return python_says(STATE, str(path))


@pytest.fixture
def locks(tmp_path: Path) -> Path:
    return locks_dir(tmp_path)


def test_held_is_active_and_the_claim_file_is_not_listed(
    locks: Path, holders: list[Holder]
) -> None:
    path = locks / "my.lock"
    holder = hold(holders, path)
    assert len(os.listdir(locks)) == 2  # the lock and its claim file, one inode
    found = records(locks)
    assert list(found) == ["my.lock"]  # the claim (`my.lock|host|pid|n`) is no lock name
    record = found["my.lock"]
    assert record["format"] == "flufl.lock"
    assert record["state"] == "active", record
    assert record["holder"]["pid"] == holder.proc.pid
    assert record["holder"]["host"] == socket.getfqdn()
    assert "clock_skew" not in codes(record)  # the mtime is the expiry, in the future
    assert "expiry" in codes(record)
    # flufl's own word from another process: held by a live process, not expired.
    assert flufl_state(path) == "unknown"


def test_released_leaves_nothing(locks: Path, holders: list[Holder]) -> None:
    path = locks / "my.lock"
    hold(holders, path).release()
    assert os.listdir(locks) == []
    assert ls(locks)["locks"] == []
    assert flufl_state(path) == "unlocked"


def test_killed_holder_is_stale_at_once(locks: Path, holders: list[Holder]) -> None:
    path = locks / "my.lock"
    holder = hold(holders, path)
    holder.kill()
    assert os.stat(path).st_nlink == 2  # both names stay behind
    record = records(locks)["my.lock"]
    assert record["state"] == "stale", record
    assert codes(record)[0] == "holder_dead"
    assert "heartbeat_expired" not in codes(record)  # its expiry is a minute away
    assert flufl_state(path) == "stale"


def test_expired_while_the_holder_lives_is_stale_once_flufl_would_break_it(
    locks: Path, holders: list[Holder]
) -> None:
    path = locks / "my.lock"
    hold(holders, path, lifetime=1.0)
    expiry = os.stat(path).st_mtime
    # Past its expiry but within CLOCK_SLOP: flufl says theirs_expired, and its
    # lock() still waits, so it is held.
    while time.time() <= expiry + 0.2:
        time.sleep(0.05)
    assert flufl_state(path) == "theirs_expired"
    record = records(locks)["my.lock"]
    assert record["state"] == "active", record
    # Backdate the expiry instead of waiting 10 s: once now > mtime + 10 a
    # contender's lock() breaks it, live holder or not.
    set_mtime(path, expiry - 11)
    record = records(locks)["my.lock"]
    assert record["state"] == "stale", record
    assert codes(record)[0] == "heartbeat_expired"
    assert record["holder"]["alive"] is True
    breaker = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from flufl.lock import Lock; l = Lock(sys.argv[1]);"
            " l.lock(timeout=5); l.unlock()",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert breaker.returncode == 0, breaker.stderr  # flufl broke it, as lockwatch said


def test_before_the_break_it_is_still_held(locks: Path, holders: list[Holder]) -> None:
    path = locks / "my.lock"
    hold(holders, path, lifetime=60.0)
    age(path, CLOCK_SLOP_SECONDS - 3)  # breakable 3 s from now
    document = ls(locks)
    record = by_name(document["locks"])["my.lock"]
    # Judged at the listing's own instant (a loaded machine may take seconds to
    # start `ls`): held until flufl's grace past the expiry, and it says when.
    at = datetime.fromisoformat(document["generated_at"])
    breaks_at = datetime.fromisoformat(record["expires_at"]) + timedelta(seconds=CLOCK_SLOP_SECONDS)
    if at < breaks_at:
        assert record["state"] == "active", record
        assert datetime.fromisoformat(record["next_change_at"]) == breaks_at
    else:
        assert record["state"] == "stale", record


def foreign_claim(locks: Path, mtime: float) -> Path:
    """A byte-for-byte imitation of a lock flufl.lock took on host `far-away`
    (this test cannot run flufl on a second machine): `<path>|<host>|<pid>|<n>`
    as the content of a claim file hard-linked to the lock, mtime = expiry."""
    path = locks / "my.lock"
    claim = f"{path}|far-away.example.org|4242|8067576344541669575"
    Path(claim).write_text(claim)
    os.link(claim, path)
    set_mtime(Path(claim), mtime)
    return path


def test_foreign_host_is_active_until_flufl_would_break_it(locks: Path) -> None:
    now = time.time()
    path = foreign_claim(locks, float(int(now + 15)))
    record = records(locks)["my.lock"]
    assert record["state"] == "active", record
    assert "foreign_host" in codes(record)
    assert "holder_dead" not in codes(record)  # pid 4242 is never checked here
    assert flufl_state(path) == "unknown"
    set_mtime(path, now - 20)
    record = records(locks)["my.lock"]
    assert record["state"] == "stale", record
    assert codes(record)[0] == "heartbeat_expired"
    assert flufl_state(path) == "unknown"  # state never judges another host; lock() does


def test_waiting_contenders_claim_is_not_the_lock(locks: Path, holders: list[Holder]) -> None:
    hold(holders, locks / "my.lock")
    # A waiter SIGKILLed mid-wait leaves its nlink-1 claim behind: no lock name.
    claim = f"{locks / 'my.lock'}|{socket.getfqdn()}|4242|1"
    Path(claim).write_text(claim)
    found = records(locks)
    assert list(found) == ["my.lock"]
    assert found["my.lock"]["state"] == "active"


@pytest.mark.parametrize(
    "content",
    [b"/x/my.lock|host|12", b"/x/my.lock|host|pid|1", b"\xff\xfe", b"{not json"],
)
def test_bad_content_never_crashes(locks: Path, content: bytes) -> None:
    # Not four `|` fields with a decimal pid: flufl's own state says unknown
    # and it never breaks such a file; lockwatch lists it as unreadable.
    path = locks / "my.lock"
    path.write_bytes(content)
    record = records(locks)["my.lock"]
    assert record["format"] != "flufl.lock"
    assert record["state"] == "invalid", record
    assert codes(record) == ["unparseable"]
    if content.isascii():  # flufl's own text-mode read raises on other bytes
        assert flufl_state(path) == "unknown"
