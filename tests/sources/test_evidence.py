"""The kernel's word on lock files (sources/files/evidence.py): what it remembers of
locks it saw held belongs to those locks, not to their inodes."""

from __future__ import annotations

import os
from pathlib import Path

from lockwatch.model.lock import Lock
from lockwatch.sources.filelocks import KernelLock
from lockwatch.sources.files.evidence import Evidence
from lockwatch.sources.files.facts import facts_of
from lockwatch.sources.files.scanner import load
from lockwatch.sources.procfs import KernelTable


def pid_lock(path: Path) -> Lock:
    path.write_text("1\n")
    lock = load(str(path))
    assert isinstance(lock, Lock) and facts_of(lock).file_key is not None
    return lock


def test_a_held_lock_is_remembered_with_its_path(tmp_path: Path) -> None:
    lock = pid_lock(tmp_path / "worker.pid")
    key = facts_of(lock).file_key
    assert key is not None
    pid = os.getpid()
    held = KernelTable((KernelLock(1, "FLOCK", "WRITE", key, 0, None, pid),))
    evidence = Evidence(held, remote=frozenset())
    (attached,) = evidence.attach([lock])
    said = facts_of(attached).evidence
    assert said is not None and said.holds
    assert evidence.held_seen == {key: lock.path}
    # Nothing held, nothing remembered.
    quiet = Evidence(KernelTable(()), remote=frozenset())
    quiet.attach([lock])
    assert quiet.held_seen == {}


def test_was_held_only_for_the_lock_that_was_seen_held(tmp_path: Path) -> None:
    lock = pid_lock(tmp_path / "worker.pid")
    key = facts_of(lock).file_key
    assert key is not None and lock.path is not None
    released = KernelTable(())

    def was_held(remembered_path: str) -> bool:
        evidence = Evidence(released, remote=frozenset(), was_held={key: remembered_path})
        (attached,) = evidence.attach([lock])
        said = facts_of(attached).evidence
        assert said is not None
        return said.was_held

    assert was_held(lock.path)
    # Another lock was held on this inode before (the file removed, the inode given
    # to this one): its past is not this pid file's, which is judged by its pid.
    assert not was_held(str(tmp_path / "cache.lock"))
