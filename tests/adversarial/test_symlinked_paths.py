"""Hostile paths around a break: a tombstone directory of two parts with a
planted symlink, and the lock's directory swapped (for a symlink, or for another
directory) between the listing and the action. Nothing may be moved outside the
lock's own directory, and nothing may be done anywhere but where it was listed.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from lockwatch.sources.filelocks import FileKey
from lockwatch.sources.files.cas import ActionRefused, check, move_aside, replace
from lockwatch.sources.files.facts import facts_of

OLD = b'{"pid": 4242, "host": "tower-01", "acquired_at": "2020-01-01T00:00:00Z"}\n'
NEW = b'{"pid": 777, "host": "tower-02"}\n'
STAMP = "20261121T120000.000000Z-deadbeef"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def key_of(path: Path) -> FileKey:
    st = os.lstat(path)
    return FileKey.of(st.st_dev, st.st_ino)


def everything_under(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    path = tmp_path / "locks" / "app.lock"
    path.parent.mkdir()
    path.write_bytes(OLD)
    return path


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    directory = tmp_path / "elsewhere"
    directory.mkdir()
    return directory


# ----------------------------------------------------------------- a tombstone dir of two parts


def test_a_two_part_tombstone_dir_is_made_beside_the_lock(lock: Path) -> None:
    moved = move_aside(str(lock), sha(OLD), stamp=STAMP, tombstone_dir="trash/lw")
    tomb = lock.parent / "trash" / "lw" / f"app.lock@{STAMP}"
    assert moved.tombstone == str(tomb) and tomb.read_bytes() == OLD
    for made in (lock.parent / "trash", lock.parent / "trash" / "lw"):
        assert stat.S_IMODE(made.stat().st_mode) == 0o700


def test_a_planted_symlink_as_the_first_part_is_refused(lock: Path, elsewhere: Path) -> None:
    """`trash -> elsewhere`: the lock must not leave its directory through it."""
    (lock.parent / "trash").symlink_to(elsewhere)
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP, tombstone_dir="trash/lw")
    assert refused.value.code == "tombstone_unsafe"
    assert "symlink" in refused.value.message and "trash" in refused.value.message
    assert lock.read_bytes() == OLD
    assert everything_under(elsewhere) == []


def test_a_planted_symlink_as_the_last_part_is_refused(lock: Path, elsewhere: Path) -> None:
    (lock.parent / "trash").mkdir()
    (lock.parent / "trash" / "lw").symlink_to(elsewhere)
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP, tombstone_dir="trash/lw")
    assert refused.value.code == "tombstone_unsafe"
    assert lock.read_bytes() == OLD and everything_under(elsewhere) == []


def test_a_symlink_inside_an_absolute_tombstone_dir_is_refused(
    tmp_path: Path, lock: Path, elsewhere: Path
) -> None:
    (tmp_path / "graves").symlink_to(elsewhere)
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP, tombstone_dir=str(tmp_path / "graves" / "x"))
    assert refused.value.code == "tombstone_unsafe"
    assert lock.read_bytes() == OLD and everything_under(elsewhere) == []


def test_a_relative_tombstone_dir_may_not_go_up(tmp_path: Path, lock: Path) -> None:
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP, tombstone_dir="../outside")
    assert refused.value.code == "tombstone_unsafe"
    assert lock.read_bytes() == OLD and not (tmp_path / "outside").exists()


def test_a_steal_with_a_planted_tombstone_symlink_touches_nothing(
    lock: Path, elsewhere: Path
) -> None:
    (lock.parent / "trash").symlink_to(elsewhere)
    with pytest.raises(ActionRefused):
        replace(str(lock), sha(OLD), NEW, stamp=STAMP, token="t" * 16, tombstone_dir="trash/lw")
    assert lock.read_bytes() == OLD and everything_under(elsewhere) == []
    assert sorted(p.name for p in lock.parent.iterdir()) == ["app.lock", "trash"]


# ------------------------------------------------ the lock's directory swapped after listing


def _swap_for_symlink(lock: Path, decoy_dir: Path) -> Path:
    """The attacker's move: the listed directory aside, a symlink to a directory
    holding a lock with the very same bytes in its place."""
    decoy = decoy_dir / lock.name
    decoy.write_bytes(lock.read_bytes())
    lock.parent.rename(lock.parent.with_name("locks-real"))
    lock.parent.symlink_to(decoy_dir)
    return decoy


def test_a_directory_swapped_for_a_symlink_is_refused(lock: Path, elsewhere: Path) -> None:
    listed = key_of(lock)
    decoy = _swap_for_symlink(lock, elsewhere)
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP, listed=listed)
    assert refused.value.code == "symlink"
    assert str(lock.parent) in refused.value.message
    assert decoy.read_bytes() == OLD and everything_under(elsewhere) == ["app.lock"]
    assert (lock.parent.with_name("locks-real") / "app.lock").read_bytes() == OLD


def test_without_the_listed_identity_a_symlinked_directory_is_still_refused(
    lock: Path, elsewhere: Path
) -> None:
    """`lockwatch break PATH --expect-sha256` in a new process knows only the path
    and the bytes: the symlink on the way is enough to refuse."""
    decoy = _swap_for_symlink(lock, elsewhere)
    for act in (
        lambda: move_aside(str(lock), sha(OLD), stamp=STAMP),
        lambda: check(str(lock), sha(OLD)),
        lambda: replace(str(lock), sha(OLD), NEW, stamp=STAMP, token="t" * 16),
    ):
        with pytest.raises(ActionRefused) as refused:
            act()
        assert refused.value.code == "symlink"
    assert decoy.read_bytes() == OLD and everything_under(elsewhere) == ["app.lock"]


def test_a_symlink_higher_up_the_path_is_refused(tmp_path: Path, lock: Path) -> None:
    (tmp_path / "alias").symlink_to(tmp_path)
    via_alias = tmp_path / "alias" / "locks" / "app.lock"
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(via_alias), sha(OLD), stamp=STAMP)
    assert refused.value.code == "symlink" and str(tmp_path / "alias") in refused.value.message
    assert lock.read_bytes() == OLD


def test_a_directory_replaced_by_another_directory_is_refused(tmp_path: Path, lock: Path) -> None:
    """No symlink at all: the listed directory renamed away and a real directory
    with the same bytes put in its place. The file is not the one listed."""
    listed = key_of(lock)
    lock.parent.rename(tmp_path / "locks-real")
    lock.parent.mkdir()
    lock.write_bytes(OLD)
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP, listed=listed)
    assert refused.value.code == "replaced"
    assert lock.read_bytes() == OLD and (tmp_path / "locks-real" / "app.lock").read_bytes() == OLD
    assert sorted(p.name for p in lock.parent.iterdir()) == ["app.lock"]


def test_the_listed_identity_lets_the_listed_file_go(lock: Path) -> None:
    moved = move_aside(str(lock), sha(OLD), stamp=STAMP, listed=key_of(lock))
    assert Path(moved.tombstone).read_bytes() == OLD and not lock.exists()


# ----------------------------------------------------------------------- the same, from the CLI


def _lockwatch(args: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PG", "LOCKWATCH_", "SUDO_"))
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".state"),
    )
    return subprocess.run(
        [sys.executable, "-m", "lockwatch", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_break_with_expect_sha256_after_a_swap_acts_nowhere(
    tmp_path: Path, lock: Path, elsewhere: Path
) -> None:
    """ls --json, then the directory swapped for a symlink to a look-alike, then
    `break --expect-sha256` with the listed hash: refused (exit 1), both locks
    stay, and the audit log says refused, not broken."""
    home = tmp_path / "home"
    home.mkdir()
    audit_log = tmp_path / "audit.jsonl"
    listing = _lockwatch(["ls", "--json", str(lock.parent)], tmp_path, home)
    (listed,) = json.loads(listing.stdout)["locks"]
    decoy = _swap_for_symlink(lock, elsewhere)
    done = _lockwatch(
        [
            "break",
            listed["path"],
            "--expect-sha256",
            listed["sha256"],
            "--reason",
            "swap test",
            "--force",
            "--yes",
            "--audit-log",
            str(audit_log),
        ],
        tmp_path,
        home,
    )
    assert done.returncode == 1, done
    assert "symlink" in done.stderr
    assert decoy.read_bytes() == OLD and everything_under(elsewhere) == ["app.lock"]
    assert (tmp_path / "locks-real" / "app.lock").read_bytes() == OLD
    events = [json.loads(line)["event"] for line in audit_log.read_text().splitlines()]
    assert "lock_broken" not in events


# ------------------------------------------------------------------ through the executor


def test_the_executor_acts_only_on_the_file_that_was_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard lists a stale lock; before `b`, its directory is replaced by a
    look-alike (no symlink anywhere). The break is refused and audited as such."""
    from lockwatch.actions.audit import AuditLog, read_records
    from lockwatch.actions.plan import Kind
    from lockwatch.actions.run import Executor
    from lockwatch.clock import FrozenClock
    from tests.actions.test_executor import OPERATOR, STALE_PID, on_disk, planned
    from tests.conftest import LOCAL_HOST, NOW

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    listed = on_disk(tmp_path / "locks" / "worker.pid", STALE_PID)
    assert facts_of(listed).file_key is not None
    (tmp_path / "locks").rename(tmp_path / "locks-real")
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "worker.pid").write_bytes(STALE_PID)
    log = tmp_path / "audit.jsonl"
    executor = Executor(AuditLog(log, clock=FrozenClock(NOW), host=LOCAL_HOST, operator=OPERATOR))
    outcome = executor.run(planned(Kind.BREAK, listed), "holder died")
    assert not outcome.ok and outcome.code == "replaced", outcome
    assert (tmp_path / "locks" / "worker.pid").read_bytes() == STALE_PID
    assert (tmp_path / "locks-real" / "worker.pid").read_bytes() == STALE_PID
    events = [r["event"] for _, r, _ in read_records(log) if r]
    assert events == ["action_intent", "action_refused"]


def test_the_dashboard_watches_a_symlinked_root_by_its_real_path(tmp_path: Path) -> None:
    # /var/lock -> /run/lock: listed where the locks really are, so acting on one
    # goes through no symlink (and is not refused for it).
    from lockwatch.clock import FrozenClock
    from lockwatch.sources.files.plugin import SelectedFiles
    from lockwatch.sources.files.watch import FileFeed
    from tests.conftest import LOCAL_HOST, NOW

    real = tmp_path / "run" / "lock"
    real.mkdir(parents=True)
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "lock").symlink_to(real)
    (feed,) = SelectedFiles((str(tmp_path / "var" / "lock"),)).feeds(FrozenClock(NOW), LOCAL_HOST)
    assert isinstance(feed, FileFeed)
    assert feed.roots == [str(real)]
