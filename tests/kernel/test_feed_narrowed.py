"""The dashboard's file feed reads the kernel's word on its own lock files only, as
a one-shot `ls` does (tests/kernel/test_narrowed_evidence.py): the host's other
kernel locks are left out before any process's fds are looked at, in the
liveness recheck and each change's look (`FileFeed._evidence`) and in each
scan's chunks (`pieces.read_pieces`), and the verdicts are what the whole
table gives.

The locks are real flocks this process takes (fcntl.flock), 20 of them on files
outside the watched tree.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockwatch.model.verdict import State
from lockwatch.sources.filelocks import FileKey, KernelEvidence
from lockwatch.sources.files import evidence as evidence_module
from lockwatch.sources.files.evidence import Evidence
from lockwatch.sources.files.facts import facts_of
from lockwatch.sources.files.scanner import partition, scan
from lockwatch.sources.files.watch import FileFeed
from lockwatch.sources.procfs import KernelTable, read_table
from tests.conftest import LOCAL_HOST

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="kernel locks are read from /proc/locks"
)


@pytest.fixture
def held_elsewhere(tmp_path: Path) -> Iterator[set[FileKey]]:
    """20 flocks held by this process on files outside the watched tree."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    handles = [open(elsewhere / f"other-{n}.lock", "wb") for n in range(20)]  # noqa: SIM115
    try:
        for handle in handles:
            fcntl.flock(handle, fcntl.LOCK_EX)
        stats = [os.fstat(handle.fileno()) for handle in handles]
        yield {FileKey.of(st.st_dev, st.st_ino) for st in stats}
    finally:
        for handle in handles:
            handle.close()


def tree_with_a_held_lock(tmp_path: Path) -> tuple[Path, Path]:
    tree = tmp_path / "tree"
    tree.mkdir()
    held = tree / "held.lock"
    held.write_text("")
    (tree / "daemon.pid").write_text(f"{os.getpid()}\n")
    (tree / "idle.lock").write_text("")
    return tree, held


def _said(evidence: KernelEvidence | None) -> object:
    if evidence is None:
        return None
    holds = [(h.file, h.type, h.mode, h.pid, h.owners, h.path) for h in evidence.holds]
    return holds, evidence.waiters, evidence.open_by, evidence.was_held


def test_the_feeds_look_resolves_its_own_files_only(
    held_elsewhere: set[FileKey], tmp_path: Path
) -> None:
    tree, held = tree_with_a_held_lock(tmp_path)
    with open(held, "rb") as mine:
        fcntl.flock(mine, fcntl.LOCK_EX)
        feed = FileFeed([str(tree)], host=LOCAL_HOST)
        locks = scan([str(tree)]).locks
        evidence = feed._evidence(locks)
        assert evidence.table is not None
        files = {lock.file for lock in evidence.table.locks}
        held_key = next(facts_of(lock).file_key for lock in locks if lock.path == str(held))
        assert files == {held_key}  # the 20 others were never resolved
        assert not files & held_elsewhere
        # The same word on each lock as the whole table gives (but for the lines'
        # numbers in /proc/locks, which other locks coming and going shift).
        narrow = evidence.attach(locks)
        whole = Evidence(read_table()).attach(locks)
        assert [_said(facts_of(lock).evidence) for lock in narrow] == [
            _said(facts_of(lock).evidence) for lock in whole
        ]
        (judged,) = [entry for entry in feed._judge_now(narrow) if entry.lock.path == str(held)]
        assert judged.verdict.state is State.ACTIVE and "kernel_lock" in judged.verdict.codes


def test_a_scans_chunks_resolve_their_own_files_only(
    held_elsewhere: set[FileKey], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree, held = tree_with_a_held_lock(tmp_path)
    resolved: list[KernelTable] = []

    def watched(*args: object, **kwargs: object) -> KernelTable:
        table = read_table(*args, **kwargs)  # type: ignore[arg-type]
        resolved.append(table)
        return table

    monkeypatch.setattr(evidence_module, "read_table", watched)
    with open(held, "rb") as mine:
        fcntl.flock(mine, fcntl.LOCK_EX)
        feed = FileFeed([str(tree)], host=LOCAL_HOST)
        (areas,), errors = partition(feed.pinned.usable()[0], 1)
        assert errors == []
        entries = [entry for piece in feed._pieces()(areas) for entry in piece.entries]
    by_path = {entry.lock.path: entry.verdict for entry in entries}
    verdict = by_path[str(held)]
    assert verdict.state is State.ACTIVE and "kernel_lock" in verdict.codes, verdict
    assert by_path[str(tree / "daemon.pid")].state is State.ACTIVE
    assert resolved, "the held file's holders were never looked up"
    files = {lock.file for table in resolved for lock in table.locks}
    assert files and not files & held_elsewhere
