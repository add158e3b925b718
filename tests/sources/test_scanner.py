"""The scanner against a real filesystem: what counts as a lock, and bad places."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

import pytest

from lockwatch.sources.files import scanner
from lockwatch.sources.files.facts import facts_of
from lockwatch.sources.files.scanner import MAX_LOCK_BYTES, is_lock_name, scan


def write(path: Path, content: str | bytes | dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, dict):
        content = json.dumps(content)
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return path


def by_name(result: scanner.ScanResult) -> dict[str, object]:
    return {Path(lock.path or "").name: lock for lock in result.locks}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("app.lock", True),
        ("daemon.pid", True),
        (".lock", True),
        ("app.lock.tmp", False),
        (".lock.tmp", False),
        ("app-prod.lock.req_abc123.tmp", False),
        ("app-prod.lock.heartbeat.tmp", False),
        ("notes.txt", False),
        ("app.locked", False),
        ("poetry.lock", False),
        ("Cargo.lock", False),
        ("yarn.lock", False),
    ],
)
def test_which_names_are_locks(name: str, expected: bool) -> None:
    assert is_lock_name(name) is expected


def test_scans_recursively_and_ids_are_absolute_paths(tmp_path: Path) -> None:
    a = write(tmp_path / "a.lock", "")
    b = write(tmp_path / "deep" / "er" / "b.pid", "123\n")
    write(tmp_path / "deep" / "readme.md", "not a lock")
    result = scan([str(tmp_path)])
    assert [lock.id for lock in result.locks] == [f"file:{a}", f"file:{b}"]
    assert result.errors == []


def test_temp_files_of_atomic_writes_are_not_locks(tmp_path: Path) -> None:
    write(tmp_path / "app.lock", "")
    write(tmp_path / "app.lock.req_1.tmp", "{}")
    write(tmp_path / "memory" / ".lock.tmp", "{}")
    assert list(by_name(scan([str(tmp_path)]))) == ["app.lock"]


def test_tombstone_directory_is_not_scanned(tmp_path: Path) -> None:
    write(tmp_path / ".lockwatch-broken" / "app.lock", "")
    write(tmp_path / "live.lock", "")
    assert list(by_name(scan([str(tmp_path)]))) == ["live.lock"]


def test_symlink_lock_is_invalid_and_never_followed(tmp_path: Path) -> None:
    target = write(tmp_path / "elsewhere" / "secret.txt", json.dumps({"pid": 1}))
    (tmp_path / "link.lock").symlink_to(target)
    (tmp_path / "dangling.lock").symlink_to(tmp_path / "missing")
    locks = by_name(scan([str(tmp_path / "link.lock"), str(tmp_path / "dangling.lock")]))
    for name in ("link.lock", "dangling.lock"):
        lock = locks[name]
        assert [d.code for d in lock.defects] == ["symlink"]  # type: ignore[attr-defined]
        # Its digest is of the link's own text (what a break compares), never the target's.
        link_text = os.readlink(tmp_path / name).encode()
        assert lock.sha256 == hashlib.sha256(link_text).hexdigest()  # type: ignore[attr-defined]
        assert lock.content == {"symlink_target": os.readlink(tmp_path / name)}  # type: ignore[attr-defined]


def test_a_lock_directory_is_listed_with_what_is_inside_not_walked(tmp_path: Path) -> None:
    """The mkdir idiom: `x.lock/` is a lock (format mkdir, no holder), and the
    files inside it are its content, not locks of their own."""
    held = tmp_path / "deploy.lock"
    held.mkdir()
    write(held / "inner.lock", "")
    (tmp_path / "plain").mkdir()
    write(tmp_path / "plain" / "x.lock", "")
    locks = by_name(scan([str(tmp_path)]))
    assert sorted(locks) == ["deploy.lock", "x.lock"]
    lock = locks["deploy.lock"]
    assert lock.format == "mkdir" and lock.content == {"entries": ["inner.lock"]}  # type: ignore[attr-defined]
    assert lock.holder.pid is None  # type: ignore[attr-defined]
    # Named directly, a lock directory is read the same way.
    assert by_name(scan([str(held)]))["deploy.lock"].format == "mkdir"  # type: ignore[attr-defined]


def test_symlinked_directory_inside_a_tree_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside / "x.lock", "")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "sub").symlink_to(outside, target_is_directory=True)
    assert scan([str(tree)]).locks == []


def test_named_symlinked_root_directory_is_followed(tmp_path: Path) -> None:
    write(tmp_path / "real" / "x.lock", "")
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    assert list(by_name(scan([str(tmp_path / "alias")]))) == ["x.lock"]


def test_too_large_is_invalid_without_reading_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "big.lock", b"{" + b" " * MAX_LOCK_BYTES + b"}")
    write(tmp_path / "edge.lock", b"1" + b" " * (MAX_LOCK_BYTES - 1))
    reads: list[int] = []
    real_read = os.read

    def counting_read(fd: int, n: int) -> bytes:
        data = real_read(fd, n)
        reads.append(len(data))
        return data

    monkeypatch.setattr("lockwatch.sources.files.scanner.os.read", counting_read)
    locks = by_name(scan([str(tmp_path)]))
    assert [d.code for d in locks["big.lock"].defects] == ["too_large"]  # type: ignore[attr-defined]
    assert locks["edge.lock"].defects == ()  # type: ignore[attr-defined]
    assert locks["edge.lock"].holder.pid == 1  # type: ignore[attr-defined]
    # The file at the limit was read whole; of the one past it only its head
    # (a tool's own format may claim it by its place, as git's index.lock), never more.
    assert sum(reads) == 2 * MAX_LOCK_BYTES


def test_fifo_named_like_a_lock_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.lock")
    locks = by_name(scan([str(tmp_path)]))
    assert [d.code for d in locks["pipe.lock"].defects] == ["not_regular_file"]  # type: ignore[attr-defined]


def test_missing_root_is_an_error_not_a_crash(tmp_path: Path) -> None:
    result = scan([str(tmp_path / "nope")])
    assert result.locks == []
    assert [(e.path, e.code) for e in result.errors] == [(str(tmp_path / "nope"), "not_found")]


def test_an_unreadable_file_is_a_row_and_an_unreadable_directory_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock file lockwatch's user may not open is listed, unread, never dropped
    (issue 42; tests/producers/test_dpkg.py runs it for real, as nobody)."""
    write(tmp_path / "ok.lock", "")
    secret = write(tmp_path / "secret.lock", "")
    closed = tmp_path / "closed"
    write(closed / "inner.lock", "")
    real_open, real_scandir = os.open, os.scandir

    # Tests run as root in CI, where chmod cannot deny reads: fake the kernel's answer.
    def denying_open(path: str, flags: int, *args: int) -> int:
        if path == str(secret):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *args)

    def denying_scandir(path: str) -> object:
        if path == str(closed):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr("lockwatch.sources.files.scanner.os.open", denying_open)
    monkeypatch.setattr("lockwatch.sources.files.scanner.os.scandir", denying_scandir)
    result = scan([str(tmp_path)])
    assert list(by_name(result)) == ["ok.lock", "secret.lock"]
    [unread] = [facts_of(lock).unread for lock in result.locks if lock.path == str(secret)]
    assert unread is not None and unread.code == "permission_denied", unread
    assert "Permission denied" in unread.message and result.unread == 1
    assert [(e.path, e.code) for e in result.errors] == [(str(closed), "permission_denied")]


def test_file_vanishing_mid_scan_is_skipped_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "stays.lock", "")
    gone = write(tmp_path / "gone.lock", "")
    real_open = os.open

    def vanishing_open(path: str, flags: int, *args: int) -> int:
        if path == str(gone):
            gone.unlink()
        return real_open(path, flags, *args)

    monkeypatch.setattr("lockwatch.sources.files.scanner.os.open", vanishing_open)
    result = scan([str(tmp_path)])
    assert list(by_name(result)) == ["stays.lock"]
    assert result.errors == []


def test_lock_swapped_for_a_symlink_after_listing_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    swapped = write(tmp_path / "swapped.lock", "")
    target = write(tmp_path / "target.txt", "1")
    real_open = os.open

    def swapping_open(path: str, flags: int, *args: int) -> int:
        if path == str(swapped) and not swapped.is_symlink():
            swapped.unlink()
            swapped.symlink_to(target)
        return real_open(path, flags, *args)

    monkeypatch.setattr("lockwatch.sources.files.scanner.os.open", swapping_open)
    locks = by_name(scan([str(tmp_path)]))
    assert [d.code for d in locks["swapped.lock"].defects] == ["symlink"]  # type: ignore[attr-defined]


def test_nested_roots_list_each_lock_once(tmp_path: Path) -> None:
    write(tmp_path / "a" / "b" / "x.lock", "")
    result = scan([str(tmp_path), str(tmp_path / "a"), str(tmp_path / "a" / "b" / "x.lock")])
    assert len(result.locks) == 1


def test_sha256_is_of_the_raw_bytes(tmp_path: Path) -> None:
    import hashlib

    body = b'{"pid": 42}\n'
    write(tmp_path / "x.lock", body)
    (lock,) = scan([str(tmp_path)]).locks
    assert lock.sha256 == hashlib.sha256(body).hexdigest()
    assert lock.content == {"pid": 42}


def test_mtime_stands_in_for_acquired_at_of_a_bare_lock(tmp_path: Path) -> None:
    path = write(tmp_path / "bare.lock", "")
    os.utime(path, (1_700_000_000, 1_700_000_000))
    (lock,) = scan([str(tmp_path)]).locks
    assert lock.acquired_at is not None
    assert lock.acquired_at.timestamp() == 1_700_000_000
