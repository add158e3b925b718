"""Lock files moved aside, handed over and refreshed: compare-and-swap, tombstones
kept, put-back without overwriting, symlinks refused, a directory descriptor that
a swapped path cannot redirect."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lockwatch.sources.files import cas as files
from lockwatch.sources.files.cas import (
    ActionFailed,
    ActionRefused,
    check,
    inside,
    move_aside,
    replace,
    rewrite,
    sha256_hex,
)
from lockwatch.sources.files.tombstones import TOMBSTONE_DIR

OLD = b'{"pid": 4242, "host": "tower-01"}\n'
NEW = b'{"pid": 777, "host": "tower-02"}\n'
THEIRS = b'{"pid": 31337, "host": "tower-03"}\n'
STAMP = "20261121T120000.000000Z-deadbeef"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    path = tmp_path / "locks" / "app.lock"
    path.parent.mkdir()
    path.write_bytes(OLD)
    return path


def tombstones(directory: Path) -> list[Path]:
    return sorted(directory.iterdir()) if directory.exists() else []


def forbid_unlink(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"unlink{args}: a lock must never be deleted")

    monkeypatch.setattr(os, "unlink", refuse)
    monkeypatch.setattr(os, "remove", refuse)


# ----------------------------------------------------------------------------- move_aside


def test_move_aside_keeps_the_bytes_in_a_timestamped_tombstone(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inode = lock.stat().st_ino
    forbid_unlink(monkeypatch)
    moved = move_aside(str(lock), sha(OLD), stamp=STAMP)
    tomb_dir = lock.parent / TOMBSTONE_DIR
    tomb = tomb_dir / f"app.lock@{STAMP}"
    assert moved.tombstone == str(tomb)
    assert moved.content == OLD
    assert not lock.exists()
    assert tombstones(tomb_dir) == [tomb]
    assert tomb.read_bytes() == OLD
    assert tomb.stat().st_ino == inode  # renamed, not copied
    assert stat.S_IMODE(tomb_dir.stat().st_mode) == 0o700


def test_move_aside_without_an_expected_hash(lock: Path) -> None:
    moved = move_aside(str(lock), None, stamp=STAMP)
    assert Path(moved.tombstone).read_bytes() == OLD


def test_expected_hash_is_case_insensitive(lock: Path) -> None:
    move_aside(str(lock), sha(OLD).upper(), stamp=STAMP)
    assert not lock.exists()


def test_second_break_keeps_both_tombstones(lock: Path) -> None:
    move_aside(str(lock), sha(OLD), stamp=STAMP)
    lock.write_bytes(NEW)
    move_aside(str(lock), sha(NEW), stamp=STAMP.replace("deadbeef", "cafebabe"))
    contents = sorted(p.read_bytes() for p in tombstones(lock.parent / TOMBSTONE_DIR))
    assert contents == sorted([OLD, NEW])


def test_an_existing_tombstone_is_never_overwritten(lock: Path) -> None:
    tomb_dir = lock.parent / TOMBSTONE_DIR
    tomb_dir.mkdir()
    (tomb_dir / f"app.lock@{STAMP}").write_bytes(b"earlier")
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP)
    assert refused.value.code == "tombstone_exists"
    assert lock.read_bytes() == OLD
    assert (tomb_dir / f"app.lock@{STAMP}").read_bytes() == b"earlier"


def test_cas_refuses_when_the_bytes_changed_and_touches_nothing(lock: Path) -> None:
    seen = sha(OLD)
    lock.write_bytes(NEW)  # re-acquired, or a heartbeat, after the operator looked
    mtime = lock.stat().st_mtime_ns
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), seen, stamp=STAMP)
    assert refused.value.code == "changed"
    assert "changed since you saw it" in refused.value.message
    assert seen[:12] in refused.value.message and sha(NEW)[:12] in refused.value.message
    assert lock.read_bytes() == NEW
    assert lock.stat().st_mtime_ns == mtime
    assert not (lock.parent / TOMBSTONE_DIR).exists()


def test_a_lock_that_is_gone_is_refused(lock: Path) -> None:
    lock.unlink()
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP)
    assert refused.value.code == "gone"


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(tmp_path / "nowhere" / "app.lock"), None, stamp=STAMP)
    assert refused.value.code == "not_found"


def test_a_path_naming_no_file_is_refused() -> None:
    with pytest.raises(ActionRefused) as refused:
        move_aside("/", None, stamp=STAMP)
    assert refused.value.code == "not_a_lock"


def test_a_directory_is_not_a_lock(lock: Path) -> None:
    (lock.parent / "dir.lock").mkdir()
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock.parent / "dir.lock"), None, stamp=STAMP)
    assert refused.value.code == "not_regular_file"
    assert (lock.parent / "dir.lock").is_dir()


def test_a_fifo_is_not_a_lock_and_never_blocks(lock: Path) -> None:
    fifo = lock.parent / "pipe.lock"
    os.mkfifo(fifo)
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(fifo), None, stamp=STAMP)
    assert refused.value.code == "not_regular_file"
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


# ----------------------------------------------------------------------------- put back


def rename_after(
    monkeypatch: pytest.MonkeyPatch, before: Callable[[], None], after: Callable[[], None]
) -> list[tuple[Any, ...]]:
    """os.rename, with `before` run just before the real rename and `after` just after:
    the lock rewritten between lockwatch's check and its rename."""
    real = os.rename
    calls: list[tuple[Any, ...]] = []

    def racing(*args: Any, **kwargs: Any) -> None:
        calls.append(args)
        before()
        real(*args, **kwargs)
        after()

    monkeypatch.setattr(os, "rename", racing)
    return calls


def test_rewritten_between_check_and_rename_is_put_back(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reacquire() -> None:
        lock.write_bytes(THEIRS)

    calls = rename_after(monkeypatch, reacquire, lambda: None)
    inode = lock.stat().st_ino
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP)
    assert len(calls) == 1
    assert refused.value.code == "changed"
    assert "put back untouched" in refused.value.message
    assert lock.read_bytes() == THEIRS
    assert lock.stat().st_ino == inode  # the very file, linked back
    assert lock.stat().st_nlink == 1
    assert tombstones(lock.parent / TOMBSTONE_DIR) == []


def test_replaced_by_a_new_file_between_check_and_rename_is_put_back(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder released and someone re-acquired (a new inode) in the gap."""

    def new_holder() -> None:
        lock.unlink()
        lock.write_bytes(THEIRS)

    rename_after(monkeypatch, new_holder, lambda: None)
    with pytest.raises(ActionRefused):
        move_aside(str(lock), sha(OLD), stamp=STAMP)
    assert lock.read_bytes() == THEIRS
    assert tombstones(lock.parent / TOMBSTONE_DIR) == []


def test_put_back_never_overwrites_a_lock_taken_meanwhile(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def rewrite_it() -> None:
        lock.write_bytes(THEIRS)

    def someone_takes_the_name() -> None:
        lock.write_bytes(NEW)

    rename_after(monkeypatch, rewrite_it, someone_takes_the_name)
    with pytest.raises(ActionFailed) as failed:
        move_aside(str(lock), sha(OLD), stamp=STAMP)
    assert failed.value.code == "raced"
    tomb = lock.parent / TOMBSTONE_DIR / f"app.lock@{STAMP}"
    assert failed.value.tombstone == str(tomb)
    assert str(tomb) in failed.value.message
    assert lock.read_bytes() == NEW  # the newest lock, untouched
    assert tomb.read_bytes() == THEIRS  # the rewritten one, kept


# ----------------------------------------------------------------------------- symlinks


def test_a_symlinked_lock_is_refused_and_its_target_untouched(lock: Path) -> None:
    target = lock.parent / "real.lock"
    target.write_bytes(OLD)
    link = lock.parent / "link.lock"
    link.symlink_to(target)
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(link), sha(OLD), stamp=STAMP)
    assert refused.value.code == "symlink"
    assert link.is_symlink() and target.read_bytes() == OLD
    assert not (lock.parent / TOMBSTONE_DIR).exists()
    with pytest.raises(ActionRefused):
        check(str(link), sha(OLD))
    with pytest.raises(ActionRefused):
        replace(str(link), sha(OLD), NEW, stamp=STAMP, token="t" * 16)
    with pytest.raises(ActionRefused):
        rewrite(str(link), sha(OLD), NEW, token="t" * 16)
    assert link.is_symlink() and target.read_bytes() == OLD


def test_a_symlink_to_a_directory_is_refused(lock: Path) -> None:
    link = lock.parent / "dir.lock"
    link.symlink_to(lock.parent)
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(link), None, stamp=STAMP)
    assert refused.value.code == "symlink"


def test_a_lock_becoming_a_symlink_after_the_stat_is_refused(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap lands between lstat and open: O_NOFOLLOW still refuses."""
    target = lock.parent / "real.lock"
    target.write_bytes(OLD)
    real_open = os.open

    def swap_then_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if path == "app.lock":
            os.unlink(lock)
            os.symlink(target, lock)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swap_then_open)
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP)
    assert refused.value.code == "symlink"
    assert lock.is_symlink() and target.read_bytes() == OLD


def test_a_directory_swapped_for_a_symlink_mid_action_cannot_redirect(
    tmp_path: Path, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the lock's directory is open, replacing that directory's path by a
    symlink to another directory (holding a lock with the very same bytes) does
    not move the action there."""
    decoy_dir = tmp_path / "decoy"
    decoy_dir.mkdir()
    decoy = decoy_dir / "app.lock"
    decoy.write_bytes(OLD)
    real_read = files._read
    swapped: list[bool] = []

    def swap_then_read(
        dir_fd: int, name: str, shown: str, entry: str = "file", listed: Any = None
    ) -> bytes:
        if not swapped:
            swapped.append(True)
            os.rename(lock.parent, tmp_path / "locks-moved")
            os.symlink(decoy_dir, lock.parent)
        return real_read(dir_fd, name, shown, entry, listed)

    monkeypatch.setattr(files, "_read", swap_then_read)
    move_aside(str(lock), sha(OLD), stamp=STAMP)
    assert swapped
    assert decoy.read_bytes() == OLD
    assert not (decoy_dir / TOMBSTONE_DIR).exists()
    moved_dir = tmp_path / "locks-moved"
    assert not (moved_dir / "app.lock").exists()
    assert (moved_dir / TOMBSTONE_DIR / f"app.lock@{STAMP}").read_bytes() == OLD


def test_a_symlink_lock_seen_as_one_moves_itself_never_its_target(lock: Path) -> None:
    """Emacs' `.#x` and SymlinkLockFile's locks are symlinks: breaking one moves
    the link (compared by its text), and whatever it names stays untouched."""
    target = lock.parent / "real.lock"
    target.write_bytes(OLD)
    link = lock.parent / ".#notes.txt"
    link.symlink_to(target)
    text = os.readlink(link).encode()
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(link), sha(b"other text"), stamp=STAMP, entry="symlink")
    assert refused.value.code == "changed" and link.is_symlink()
    moved = move_aside(str(link), sha(text), stamp=STAMP, entry="symlink")
    assert moved.content == text
    assert not os.path.lexists(link) and target.read_bytes() == OLD
    assert os.readlink(lock.parent / TOMBSTONE_DIR / f".#notes.txt@{STAMP}") == str(target)


def test_a_lock_directory_seen_as_one_moves_whole_if_its_names_are_unchanged(
    lock: Path,
) -> None:
    held = lock.parent / "deploy.lock"
    held.mkdir()
    (held / "host.123").write_bytes(b"")
    seen = sha(b"host.123")
    (held / "host.456").write_bytes(b"")  # another holder's file since
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(held), seen, stamp=STAMP, entry="dir")
    assert refused.value.code == "changed" and held.is_dir()
    (held / "host.456").unlink()
    move_aside(str(held), seen, stamp=STAMP, entry="dir")
    assert not held.exists()
    assert (lock.parent / TOMBSTONE_DIR / f"deploy.lock@{STAMP}" / "host.123").exists()
    # A file seen as a lock directory (or the reverse) is refused.
    with pytest.raises(ActionRefused):
        move_aside(str(lock), None, stamp=STAMP, entry="dir")


# ----------------------------------------------------------------------------- tombstone dir


def test_a_relative_tombstone_dir_lives_beside_the_lock(lock: Path) -> None:
    moved = move_aside(str(lock), sha(OLD), stamp=STAMP, tombstone_dir="graveyard")
    tomb = lock.parent / "graveyard" / f"app.lock@{STAMP}"
    assert moved.tombstone == str(tomb)
    assert tomb.read_bytes() == OLD


def test_an_absolute_tombstone_dir_on_the_same_filesystem(tmp_path: Path, lock: Path) -> None:
    where = tmp_path / "tombs" / "deep"
    moved = move_aside(str(lock), sha(OLD), stamp=STAMP, tombstone_dir=str(where))
    tomb = where / f"app.lock@{STAMP}"
    assert moved.tombstone == str(tomb)
    assert tomb.read_bytes() == OLD
    assert not (lock.parent / TOMBSTONE_DIR).exists()


@pytest.mark.parametrize("absolute", [False, True])
def test_a_symlinked_tombstone_dir_is_refused(tmp_path: Path, lock: Path, absolute: bool) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "tomb-link" if absolute else lock.parent / TOMBSTONE_DIR
    link.symlink_to(elsewhere)
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP, tombstone_dir=str(link) if absolute else None)
    assert refused.value.code == "tombstone_unsafe"
    assert lock.read_bytes() == OLD
    assert list(elsewhere.iterdir()) == []


def test_a_tombstone_dir_that_is_a_file_is_refused(lock: Path) -> None:
    (lock.parent / TOMBSTONE_DIR).write_text("a file")
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP)
    assert refused.value.code == "tombstone_unsafe"
    assert lock.read_bytes() == OLD


def test_a_tombstone_dir_that_cannot_be_made_is_refused(tmp_path: Path, lock: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP, tombstone_dir=str(tmp_path / "file" / "t"))
    assert refused.value.code in ("tombstone_unsafe", "tombstone_unwritable")
    assert lock.read_bytes() == OLD


def test_a_tombstone_dir_on_another_filesystem_is_refused(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rename across filesystems is not atomic (nor possible): refused, and the
    lock stays. /dev/shm is a tmpfs here; where it is not, EXDEV is simulated."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and shm.stat().st_dev != lock.stat().st_dev:
        where = shm / f"lockwatch-test-{os.getpid()}"
    else:
        where = lock.parent.parent / "tombs"

        def exdev(*args: Any, **kwargs: Any) -> None:
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

        monkeypatch.setattr(os, "rename", exdev)
    try:
        with pytest.raises(ActionRefused) as refused:
            move_aside(str(lock), sha(OLD), stamp=STAMP, tombstone_dir=str(where))
        assert refused.value.code == "tombstone_elsewhere"
        assert lock.read_bytes() == OLD
        assert list(where.iterdir()) == []
    finally:
        if where.is_dir():
            where.rmdir()


# ----------------------------------------------------------------------------- replace (steal)


def test_replace_moves_the_stale_lock_and_links_the_new_one(lock: Path) -> None:
    lock.chmod(0o640)
    moved = replace(str(lock), sha(OLD), NEW, stamp=STAMP, token="0123456789abcdef")
    assert Path(moved.tombstone).read_bytes() == OLD
    assert lock.read_bytes() == NEW
    assert stat.S_IMODE(lock.stat().st_mode) == 0o640
    assert lock.stat().st_nlink == 1  # the temp name is gone
    assert sorted(p.name for p in lock.parent.iterdir()) == [TOMBSTONE_DIR, "app.lock"]


def test_replace_refuses_changed_bytes_and_touches_nothing(lock: Path) -> None:
    lock.write_bytes(THEIRS)
    with pytest.raises(ActionRefused) as refused:
        replace(str(lock), sha(OLD), NEW, stamp=STAMP, token="0123456789abcdef")
    assert refused.value.code == "changed"
    assert lock.read_bytes() == THEIRS
    assert sorted(p.name for p in lock.parent.iterdir()) == ["app.lock"]


def test_replace_of_a_lock_that_is_gone_is_refused(lock: Path) -> None:
    """Two steals at once: the loser finds the name empty. Nothing was touched, so
    that is a refusal (it used to escape as FileNotFoundError: 'failed')."""
    lock.unlink()
    with pytest.raises(ActionRefused) as refused:
        replace(str(lock), sha(OLD), NEW, stamp=STAMP, token="0123456789abcdef")
    assert refused.value.code == "gone"
    assert not lock.exists()


def test_replace_never_overwrites_a_lock_taken_in_the_gap(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_move_aside = files._move_aside

    def someone_takes_it(*args: Any) -> files.Moved:
        moved = real_move_aside(*args)
        lock.write_bytes(THEIRS)  # a legitimate acquire of the now free name
        return moved

    monkeypatch.setattr(files, "_move_aside", someone_takes_it)
    with pytest.raises(ActionFailed) as failed:
        replace(str(lock), sha(OLD), NEW, stamp=STAMP, token="0123456789abcdef")
    assert failed.value.code == "taken"
    assert lock.read_bytes() == THEIRS
    assert failed.value.tombstone is not None
    assert Path(failed.value.tombstone).read_bytes() == OLD
    assert sorted(p.name for p in lock.parent.iterdir()) == [TOMBSTONE_DIR, "app.lock"]


# ----------------------------------------------------------------------------- rewrite, check


def test_rewrite_heartbeats_a_lock_that_is_still_ours(lock: Path) -> None:
    lock.chmod(0o600)
    rewrite(str(lock), sha(OLD), NEW, token="0123456789abcdef")
    assert lock.read_bytes() == NEW
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    assert sorted(p.name for p in lock.parent.iterdir()) == ["app.lock"]


def test_rewrite_refuses_a_lock_that_is_no_longer_ours(lock: Path) -> None:
    lock.write_bytes(THEIRS)
    with pytest.raises(ActionRefused) as refused:
        rewrite(str(lock), sha(OLD), NEW, token="0123456789abcdef")
    assert refused.value.code == "changed"
    assert lock.read_bytes() == THEIRS
    assert sorted(p.name for p in lock.parent.iterdir()) == ["app.lock"]


def test_a_lock_taken_during_a_heartbeat_is_left_to_its_new_holder(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write_temp = files._write_temp

    def broken_and_retaken(dir_fd: int, name: str, token: str, content: bytes, mode: int) -> str:
        temp = real_write_temp(dir_fd, name, token, content, mode)
        # Between lockwatch's check and its swap, someone breaks the lock and takes it.
        move_aside(str(lock), sha(OLD), stamp=STAMP)
        lock.write_bytes(THEIRS)
        return temp

    monkeypatch.setattr(files, "_write_temp", broken_and_retaken)
    with pytest.raises(ActionRefused) as refused:
        rewrite(str(lock), sha(OLD), NEW, token="0123456789abcdef")
    assert refused.value.code == "changed"
    assert lock.read_bytes() == THEIRS
    assert sorted(p.name for p in lock.parent.iterdir()) == [TOMBSTONE_DIR, "app.lock"]


def test_without_an_atomic_exchange_a_heartbeat_still_replaces_the_lock(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "_exchange", lambda dir_fd, first, second: False)
    rewrite(str(lock), sha(OLD), NEW, token="0123456789abcdef")
    assert lock.read_bytes() == NEW
    assert sorted(p.name for p in lock.parent.iterdir()) == ["app.lock"]


def test_a_lock_swapped_for_a_fifo_during_the_move_is_put_back(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_rename = os.rename

    def swapped_then_moved(src: Any, dst: Any, **fds: Any) -> None:
        if src == "app.lock":
            lock.unlink()
            os.mkfifo(lock)
        real_rename(src, dst, **fds)

    monkeypatch.setattr("lockwatch.sources.files.cas.os.rename", swapped_then_moved)
    with pytest.raises(ActionRefused) as refused:
        move_aside(str(lock), sha(OLD), stamp=STAMP)
    assert refused.value.code == "not_regular_file"
    assert "put back" in refused.value.message
    assert stat.S_ISFIFO(lock.lstat().st_mode)  # back at its name, untouched
    assert list((lock.parent / TOMBSTONE_DIR).iterdir()) == []


def test_rewrite_of_a_broken_lock_is_refused(lock: Path) -> None:
    lock.unlink()
    with pytest.raises(ActionRefused) as refused:
        rewrite(str(lock), sha(OLD), NEW, token="0123456789abcdef")
    assert refused.value.code == "gone"
    assert not lock.exists()


def test_check_returns_the_bytes_only_while_unchanged(lock: Path) -> None:
    assert check(str(lock), sha(OLD)) == OLD
    assert check(str(lock), None) == OLD
    lock.write_bytes(NEW)
    with pytest.raises(ActionRefused):
        check(str(lock), sha(OLD))
    assert sha256_hex(NEW) == sha(NEW)


# ----------------------------------------------------------------------------- inside


def test_inside(tmp_path: Path) -> None:
    root = tmp_path / "locks"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "locks2").mkdir()
    (tmp_path / "alias").symlink_to(root)
    single = tmp_path / "one.lock"
    single.write_text("1")
    assert inside(str(root / "a.lock"), [str(root)])
    assert inside(str(root / "sub" / "a.lock"), [str(root)])
    assert inside(str(root / "a.lock"), [str(root) + "/"])
    assert not inside(str(tmp_path / "locks2" / "a.lock"), [str(root)])
    assert not inside(str(tmp_path / "a.lock"), [str(root)])
    assert inside(str(tmp_path / "alias" / "a.lock"), [str(root)])
    assert inside(str(root / "a.lock"), [str(tmp_path / "alias")])
    assert inside(str(single), [str(single)])
    assert not inside(str(tmp_path / "two.lock"), [str(single)])
    assert inside(str(root / "a.lock"), [str(tmp_path / "nowhere"), str(root)])
    assert not inside(str(root / "a.lock"), [])
    assert inside(str(root / "a.lock"), ["/"])
