"""A one-shot scan reads the kernel's word on its own lock files only (issue 31:
"pay only for evidence a lock needs"): the host's other kernel locks are left out
before any process's fds are looked at, so thousands of them cost a scan of a
small tree nothing, and the verdicts are the same as with the whole table."""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

import pytest

from lockwatch.sources.filelocks import KernelEvidence
from lockwatch.sources.files.evidence import Evidence, kernel_listed, kernel_table_for
from lockwatch.sources.files.facts import facts_of
from lockwatch.sources.files.scanner import scan
from lockwatch.sources.procfs import read_table

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="kernel locks are read from /proc/locks"
)


def test_the_table_holds_the_scanned_files_locks_and_no_others(tmp_path: Path) -> None:
    tree, elsewhere = tmp_path / "tree", tmp_path / "elsewhere"
    tree.mkdir()
    elsewhere.mkdir()
    held = tree / "held.lock"
    held.write_text("")
    (tree / "daemon.pid").write_text(f"{os.getpid()}\n")
    others = [elsewhere / f"other-{n}.lock" for n in range(20)]
    with open(held, "rb") as mine:
        handles = [open(path, "wb") for path in others]  # noqa: SIM115
        try:
            for handle in handles:
                fcntl.flock(handle, fcntl.LOCK_EX)
            fcntl.flock(mine, fcntl.LOCK_EX)

            listed = kernel_listed()
            assert listed is not None
            locks = scan([str(tree)]).locks
            table = kernel_table_for(listed, locks)
            assert table is not None
            files = {lock.file for lock in table.locks}
            held_key = next(facts_of(lock).file_key for lock in locks if lock.path == str(held))
            assert files == {held_key}  # the 20 others were never resolved

            # The verdicts' evidence is what the whole table gives (but for the lines'
            # numbers in /proc/locks, which other locks coming and going shift).
            whole = Evidence(read_table()).attach(locks)
            narrow = Evidence(table).attach(locks)
            assert [_said(facts_of(lock).evidence) for lock in narrow] == [
                _said(facts_of(lock).evidence) for lock in whole
            ]
        finally:
            for handle in handles:
                handle.close()


def _said(evidence: KernelEvidence | None) -> object:
    if evidence is None:
        return None
    holds = [(h.file, h.type, h.mode, h.pid, h.owners, h.path) for h in evidence.holds]
    return holds, evidence.waiters, evidence.open_by, evidence.was_held


def test_nothing_locked_among_the_scanned_files_reads_no_process(tmp_path: Path) -> None:
    (tmp_path / "a.lock").write_text(f"{os.getpid()}\n")
    other = tmp_path.parent / f"{tmp_path.name}-other.lock"
    with open(other, "wb") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        locks = scan([str(tmp_path)]).locks
        table = kernel_table_for(kernel_listed(), locks)
        assert table is not None and table.locks == () and table.readable
    other.unlink()
