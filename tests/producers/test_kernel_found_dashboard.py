"""The dashboard's file feed finds a file of any name that a kernel lock is on
(at its rescans at the latest), one row with the kernel's facts, and drops
it once released: the real feed, a real lockf holder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockwatch.clock import SystemClock
from lockwatch.model.verdict import State
from lockwatch.sources.files.watch import FileFeed
from lockwatch.ui.app import LockwatchApp
from tests.conftest import LOCAL_HOST
from tests.kernel.conftest import need
from tests.kernel.holders import Holders
from tests.ui.fakes import make_app
from tests.ui.fakes import until as until_within

SIZE = (120, 36)
WAIT_S = 30.0
FAST = 0.3


@pytest.fixture
def holders() -> Iterator[Holders]:
    factory = Holders()
    try:
        yield factory
    finally:
        factory.close()


def _app(root: Path) -> LockwatchApp:
    feeds: list[Any] = [
        FileFeed([str(root)], host=LOCAL_HOST, rescan_seconds=FAST, liveness_seconds=FAST)
    ]
    return make_app(feeds=feeds, clock=SystemClock())


async def test_the_file_feed_finds_a_locked_file_of_any_name(
    holders: Holders, tmp_path: Path
) -> None:
    need("lockf")
    root = tmp_path / "srv"
    root.mkdir()
    path = root / "journal.dat"
    path.write_bytes(b"\x00payload")
    lock_id = f"file:{os.path.abspath(path)}"
    app = _app(root)
    async with app.run_test(size=SIZE) as pilot:
        holder = holders.start("lockf", path)
        await until_within(pilot, lambda: lock_id in app.board, "the locked file's row", WAIT_S)
        entry = app.board.entries[lock_id]
        assert entry.lock.format == "kernel-file", entry.lock
        assert entry.verdict.state is State.ACTIVE, entry.verdict
        assert entry.lock.holder.pid in holder.holder_pids
        assert len(app.board.entries) == 1, list(app.board.entries)
        holder.close()
        await until_within(
            pilot,
            lambda: lock_id not in app.board or app.board.verdict(lock_id).state is State.FREE,
            "the released file to go (or show free until the next rescan)",
            WAIT_S,
        )
