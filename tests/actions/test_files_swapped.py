"""A break racing its lock's directory swapped for a symlink and back, the swap
landed at the instants tests/soak/test_races.py reaches only now and then: the
break is refused, with its reason, and nothing moves, never a failure.

The instant that once made it a failure: the directory found a symlink, then
named in the refusal through realpath, whose readlink of the swapped path met
the directory back in place (EINVAL) or nothing there (ENOENT); the OSError
escaped the refusal as `action_failed (os_error)`."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from lockwatch.actions.audit import AuditLog, Operator
from lockwatch.actions.plan import Kind
from lockwatch.actions.run import Executor, os_error_text
from lockwatch.clock import FrozenClock
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State
from lockwatch.sources.files import cas as files
from lockwatch.sources.files.tombstones import TOMBSTONE_DIR
from tests.actions.test_executor import STALE_PID, judge, on_disk, planned
from tests.conftest import LOCAL_HOST, NOW

OPERATOR = Operator(name="erin", os_user="root", sudo_user="erin")


class Swap:
    """`locks` swapped for a symlink to `elsewhere` (its directory set aside), and
    put back (`back`) or left missing (`away`) when the test says."""

    def __init__(self, tmp_path: Path) -> None:
        self.locks = tmp_path / "locks"
        self.aside = tmp_path / "locks.real"
        self.elsewhere = tmp_path / "elsewhere"
        self.elsewhere.mkdir()
        # The same bytes: only where it is tells it from the lock.
        (self.elsewhere / "worker.pid").write_bytes(STALE_PID)

    def swap(self) -> None:
        self.locks.rename(self.aside)
        self.locks.symlink_to(self.elsewhere)

    def undo(self, then: str) -> None:
        self.locks.unlink()
        if then == "back":
            self.aside.rename(self.locks)

    def untouched(self) -> None:
        """Nothing moved: the lock where it was, no tombstone, the decoy as it was."""
        real = self.locks if self.locks.is_dir() else self.aside
        assert (real / "worker.pid").read_bytes() == STALE_PID
        assert not (real / TOMBSTONE_DIR).exists()
        assert sorted(os.listdir(self.elsewhere)) == ["worker.pid"]
        assert (self.elsewhere / "worker.pid").read_bytes() == STALE_PID


def executor(tmp_path: Path) -> Executor:
    log = AuditLog(
        tmp_path / "state" / "audit.jsonl",
        clock=FrozenClock(NOW),
        host=LOCAL_HOST,
        operator=OPERATOR,
    )
    # Judged again as it was planned (pid 999999 dead): no process table in the way.
    return Executor(log, rejudge=judge)


def listed(swap: Swap) -> Lock:
    lock = on_disk(swap.locks / "worker.pid", STALE_PID)
    assert judge(lock).state is State.STALE
    return lock


@pytest.mark.parametrize("then", ["back", "away"])
def test_a_symlink_swapped_again_while_the_refusal_names_it_is_still_a_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    swap = Swap(tmp_path)
    lock = listed(swap)
    swap.swap()
    real_readlink = os.readlink
    undone: list[str] = []

    def swapped_again_first(path: Any, *args: Any, **kwargs: Any) -> Any:
        # Between realpath's lstat (a symlink) and its readlink: the swapper moves on.
        if os.fspath(path) == str(swap.locks) and not undone:
            undone.append(then)
            swap.undo(then)
        return real_readlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "readlink", swapped_again_first)
    outcome = executor(tmp_path).run(planned(Kind.BREAK, lock), "holder died")
    assert undone == [then]
    assert outcome.event == "action_refused" and outcome.code == "symlink", outcome
    assert f"{swap.locks} was a symlink as lockwatch reached it" in outcome.message
    assert "nothing done" in outcome.message
    swap.untouched()


def test_a_symlink_gone_before_it_is_looked_at_is_a_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The open met the symlink (ENOTDIR under O_NOFOLLOW); by the look that tells a
    link from a file, the directory is back: refused, saying it was being swapped."""
    swap = Swap(tmp_path)
    lock = listed(swap)
    swap.swap()
    real_is_link = files._is_link

    def swapped_back_first(dir_fd: int, name: str) -> bool:
        if name == swap.locks.name and swap.locks.is_symlink():
            swap.undo("back")
        return real_is_link(dir_fd, name)

    monkeypatch.setattr(files, "_is_link", swapped_back_first)
    outcome = executor(tmp_path).run(planned(Kind.BREAK, lock), "holder died")
    assert outcome.event == "action_refused" and outcome.code == "not_found", outcome
    assert "was being swapped" in outcome.message and "nothing done" in outcome.message
    swap.untouched()


def test_a_symlink_still_there_is_named_with_its_target(tmp_path: Path) -> None:
    swap = Swap(tmp_path)
    lock = listed(swap)
    swap.swap()
    outcome = executor(tmp_path).run(planned(Kind.BREAK, lock), "holder died")
    assert outcome.event == "action_refused" and outcome.code == "symlink", outcome
    assert f"{swap.locks} is a symlink (to {swap.elsewhere})" in outcome.message
    swap.untouched()


def test_an_os_error_is_told_with_the_path_it_names() -> None:
    eio = os.strerror(errno.EIO)
    assert os_error_text(OSError(errno.EIO, eio)) == eio
    assert os_error_text(OSError(errno.EIO, eio, "/run/x.lock")) == f"{eio}: /run/x.lock"
    moved = OSError(errno.EXDEV, "Invalid cross-device link", b"/a\xff", None, "/b")
    assert os_error_text(moved) == "Invalid cross-device link: /a\udcff -> /b"
