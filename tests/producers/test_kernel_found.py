"""Under the PATHs named, every file the kernel holds a lock on is a lock,
whatever its name: flock(1), lockf (POSIX) and OFD locks taken by real
processes on files named nothing like a lock. One row per file (the file's,
with the kernel's facts); `--kernel` with PATHs lists only locks under them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.formats.common import clean_env, ls
from tests.kernel.conftest import need
from tests.kernel.holders import Holders


@pytest.fixture
def holders() -> Iterator[Holders]:
    factory = Holders()
    try:
        yield factory
    finally:
        factory.close()


def _rows(directory: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = ls(directory)["locks"]
    return rows


@pytest.mark.parametrize("kind", ["flock_cmd", "lockf", "ofd"])
def test_a_locked_file_of_any_name_is_found(kind: str, holders: Holders, tmp_path: Path) -> None:
    need(kind)
    directory = tmp_path / "srv"
    directory.mkdir()
    (directory / "unlocked.bin").write_bytes(b"\x00data")
    path = directory / "state.bin"
    path.write_bytes(b"\x00\x01 not a lock record")
    holder = holders.start(kind, path)
    rows = _rows(directory)
    assert [Path(row["path"]).name for row in rows] == ["state.bin"], rows
    (row,) = rows
    assert row["source"] == "file" and row["format"] == "kernel-file", row
    assert row["state"] == "active" and row["name"] == "state.bin", row
    assert row["holder"]["pid"] in holder.holder_pids, row
    assert [r["code"] for r in row["reasons"]][:2] == ["kernel_lock", "kernel_file"], row


def test_released_it_is_no_longer_listed(holders: Holders, tmp_path: Path) -> None:
    need("lockf")
    path = tmp_path / "data"
    path.write_text("payload\n")
    holder = holders.start("lockf", path)
    assert [Path(row["path"]).name for row in _rows(tmp_path)] == ["data"]
    holder.close()
    assert _rows(tmp_path) == []


def test_kernel_with_paths_lists_only_locks_under_them(holders: Holders, tmp_path: Path) -> None:
    need("flock_cmd")
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    for path in (inside / "a.db", outside / "b.db"):
        held = holders.start("flock_cmd", path)
        holders.start(held.kind.waiter, path)
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--json", "--kernel", str(inside)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=home,
        env=clean_env(home),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    locks = json.loads(done.stdout)["locks"]
    # The held lock is the file's row (one row per file); the waiter on it is the
    # kernel's, and none outside the PATHs is listed.
    kernel = {(lock["path"], lock["state"]) for lock in locks if lock["source"] == "kernel"}
    assert kernel == {(str(inside / "a.db"), "waiting")}, kernel
    files = {(lock["path"], lock["state"]) for lock in locks if lock["source"] == "file"}
    assert files == {(str(inside / "a.db"), "active")}, files


def test_a_state_file_whose_lock_info_tells_its_lock_is_one_row(
    holders: Holders, tmp_path: Path
) -> None:
    """Terraform's state file is locked while `.terraform.tfstate.lock.info` beside
    it says who holds it: that file's row tells the lock, the state file gets none.
    (The lockf holder imitates terraform's fcntl lock: tests/formats/test_terraform.py
    runs the real terraform.)"""
    need("lockf")
    state = tmp_path / "terraform.tfstate"
    state.write_text('{"version": 4}\n')
    info = tmp_path / ".terraform.tfstate.lock.info"
    info.write_text(
        '{"ID": "1", "Operation": "OperationTypeApply", "Info": "", "Who": "me@h",'
        ' "Version": "1.5.0", "Created": "2026-01-02T03:04:05Z", "Path": "terraform.tfstate"}'
    )
    holder = holders.start("lockf", state)
    (row,) = _rows(tmp_path)
    assert row["path"] == str(info) and row["state"] == "active", row
    assert row["holder"]["pid"] in holder.holder_pids, row
