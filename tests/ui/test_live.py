"""The dashboard on a real directory: a real FileFeed inside the app, lock files created,
changed, replaced atomically and deleted while it runs, and the table following.

The feed rescans once an hour here, so whatever shows up came through the watcher.
Before a test touches anything, `watcher_ready` writes a probe lock until the app shows
it: that proves the watch is up (a file written before it is would wait for the
rescan). Every wait is a bounded poll (`until`); no test asserts how long anything took.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from lockwatch.clock import SystemClock
from lockwatch.model.events import EventKind
from lockwatch.model.verdict import State
from lockwatch.sources.files.facts import facts_of
from lockwatch.sources.files.watch import FileFeed
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.panels import EmptyState
from lockwatch.ui.table import LockTable
from tests.conftest import LOCAL_HOST
from tests.ui.fakes import make_app, row_text
from tests.ui.fakes import until as until_within

SIZE = (120, 36)
# A bound on each wait, only so that a broken run fails rather than hangs: generous,
# since two cores shared with other test runs deliver inotify events late (5 s was
# missed under load, with the dashboard right).
WAIT_S = 30.0
STEP_S = 0.05
HOUR = 3600.0
PROBE = "zz-probe.lock"
ME = os.getpid()
PARENT = os.getppid()


async def until(pilot: Pilot[Any], condition: Callable[[], bool], what: str) -> None:
    await until_within(pilot, condition, what, WAIT_S)


def content(owner: str, pid: int = ME) -> str:
    """A generic JSON lock held by a running process (this test, or its parent)."""
    return json.dumps({"pid": pid, "host": LOCAL_HOST, "owner": owner, "operation": "backup"})


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def lock_id(path: Path) -> str:
    return f"file:{os.path.abspath(path)}"


def holder(owner: str, pid: int = ME) -> str:
    return f"{pid}@{LOCAL_HOST} {owner}"


def write_atomically(path: Path, text: str) -> None:
    """As careful writers do: a temp file beside it, then rename over it."""
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text)
    os.replace(temp, path)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    directory = tmp_path / "locks"
    directory.mkdir()
    return directory


def live_app(root: Path) -> LockwatchApp:
    feed = FileFeed([str(root)], host=LOCAL_HOST, rescan_seconds=HOUR)
    # The real clock on both sides: the feed judges the files it reads with it.
    return make_app(feeds=[feed], clock=SystemClock())


def entry_sha(app: LockwatchApp, lock: str) -> str | None:
    entry = app.board.entries.get(lock)
    return None if entry is None else entry.lock.sha256


async def watcher_ready(pilot: Pilot[Any], root: Path) -> None:
    """The initial scan is on the board and the watcher reports changes."""
    app = pilot.app
    assert isinstance(app, LockwatchApp)
    await until(pilot, lambda: bool(app.board.statuses.get("files")), "the initial scan")
    probe = root / PROBE
    probe_id = lock_id(probe)
    for attempt in range(int(WAIT_S / 0.2)):
        probe.write_text(str(attempt))  # a new write each time: one of them is seen
        for _ in range(4):
            await pilot.pause(STEP_S)
            if probe_id in app.board:
                break
        if probe_id in app.board:
            break
    assert probe_id in app.board, "the watcher never reported the probe lock"
    probe.unlink()
    await until(pilot, lambda: probe_id not in app.board, "the probe lock to go")


def kinds_of(app: LockwatchApp, lock: str) -> list[str]:
    return [event.kind for event in app.board.events if event.lock_id == lock]


async def test_a_lock_file_created_changed_and_deleted_is_followed(root: Path) -> None:
    app = live_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await watcher_ready(pilot, root)
        status = app.board.statuses["files"][0]
        assert (status.name, status.state) == (str(root), "watching")
        assert app.query_one("#empty", EmptyState).display

        path = root / "backup.lock"
        first = content("alice")
        path.write_text(first)
        lock = lock_id(path)
        # Written in place: the watcher may read it between the create and the write
        # (an empty, invalid lock for a moment), so wait for the content, not the row.
        await until(pilot, lambda: entry_sha(app, lock) == sha(first), "the new lock's content")
        assert lock in app.rows.ids
        assert app.board.verdict(lock).state is State.ACTIVE
        assert not app.query_one("#empty", EmptyState).display
        assert app.query_one("#table", LockTable).display
        # The table was hidden behind the empty state until now: laid out on a later refresh.
        table = app.query_one("#table", LockTable)
        await until(pilot, lambda: table.size.height > 0, "the table to be laid out")
        row = row_text(app, lock)
        assert row.startswith("  active")  # after the (empty) mark column
        assert "backup" in row
        assert holder("alice") in row
        assert EventKind.APPEARED in kinds_of(app, lock)

        second = content("bob", pid=PARENT)
        # Replaced whole (rename over it): one change, from alice to bob, with nothing
        # half-written in between for the watcher to see.
        write_atomically(path, second)
        await until(pilot, lambda: entry_sha(app, lock) == sha(second), "the new content")
        assert app.rows.ids == [lock]
        await pilot.pause()
        row = row_text(app, lock)
        assert holder("bob", PARENT) in row
        assert "alice" not in row
        assert EventKind.HOLDER_CHANGED in kinds_of(app, lock)

        path.unlink()
        await until(pilot, lambda: lock not in app.board, "the lock to go")
        assert lock not in app.rows.ids
        assert kinds_of(app, lock)[-1] is EventKind.RELEASED
        released = [e for e in app.board.events if e.kind is EventKind.RELEASED]
        assert released[-1].lock_id == lock
        assert "bob" in released[-1].detail  # who held it last
        await pilot.pause()
        assert app.query_one("#empty", EmptyState).display


async def test_a_lock_present_at_start_is_shown_by_the_first_scan(root: Path) -> None:
    path = root / "early.lock"
    text = content("carol")
    path.write_text(text)
    app = live_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: lock_id(path) in app.rows.ids, "the early lock")
        assert entry_sha(app, lock_id(path)) == sha(text)
        await pilot.pause()
        assert holder("carol") in row_text(app, lock_id(path))


async def test_a_lock_in_a_new_subdirectory(root: Path) -> None:
    app = live_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await watcher_ready(pilot, root)
        # Made and written at once: the file may come before the watch on its directory.
        deep = root / "team" / "nightly"
        deep.mkdir(parents=True)
        path = deep / "job.lock"
        text = content("dave")
        path.write_text(text)
        lock = lock_id(path)
        await until(pilot, lambda: lock in app.rows.ids, "the lock in the new directory")
        assert entry_sha(app, lock) == sha(text)
        await pilot.pause()
        assert holder("dave") in row_text(app, lock)

        # A change inside it is watched too.
        changed = content("erin")
        path.write_text(changed)
        await until(pilot, lambda: entry_sha(app, lock) == sha(changed), "the changed lock")

        # The directory goes: so does every lock under it.
        shutil.rmtree(root / "team")
        await until(pilot, lambda: lock not in app.board, "the lock under the removed directory")
        assert lock not in app.rows.ids
        assert kinds_of(app, lock)[-1] is EventKind.RELEASED


async def test_a_lock_written_atomically(root: Path) -> None:
    app = live_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await watcher_ready(pilot, root)
        path = root / "deploy.lock"
        lock = lock_id(path)
        first = content("frank")
        write_atomically(path, first)
        await until(pilot, lambda: lock in app.rows.ids, "the atomically written lock")
        assert entry_sha(app, lock) == sha(first)

        second = content("grace", pid=PARENT)
        write_atomically(path, second)
        await until(pilot, lambda: entry_sha(app, lock) == sha(second), "the replaced content")
        await pilot.pause()
        row = row_text(app, lock)
        assert holder("grace", PARENT) in row
        assert "frank" not in row
        # Replaced, never released in between; the temp file was never a lock.
        assert EventKind.RELEASED not in kinds_of(app, lock)
        assert kinds_of(app, lock).count(EventKind.APPEARED) == 1
        assert not any(i.endswith(".tmp") for i in app.board.entries)
        assert not any(e.lock_id and e.lock_id.endswith(".tmp") for e in app.board.events)
        assert app.rows.ids == [lock]


async def test_a_lock_directory_and_what_is_put_inside_it(root: Path) -> None:
    """The mkdir idiom, live: `x.lock/` appears as one lock, a file written
    inside it (MkdirLockFile's holder file) changes that lock, rmdir releases it."""
    app = live_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await watcher_ready(pilot, root)
        path = root / "deploy.lock"
        lock = lock_id(path)
        path.mkdir()
        await until(pilot, lambda: lock in app.rows.ids, "the lock directory's row")
        entry = app.board.entries[lock]
        assert entry.lock.format == "mkdir" and facts_of(entry.lock).entry == "dir"
        assert entry.lock.content == {"entries": []}

        # What lockfile's MkdirLockFile writes inside: `<host>.<pid>`.
        (path / "tower-02.4242").write_text("")
        await until(
            pilot,
            lambda: app.board.entries[lock].lock.format == "lockfile",
            "the file inside the lock directory",
        )
        held = app.board.entries[lock].lock
        assert (held.holder.pid, held.holder.host) == (4242, "tower-02")
        assert not any(i.endswith("tower-02.4242") for i in app.board.entries)  # not a lock

        (path / "tower-02.4242").unlink()
        await until(
            pilot,
            lambda: app.board.entries[lock].lock.format == "mkdir",
            "the lock directory emptied",
        )

        path.rmdir()
        await until(pilot, lambda: lock not in app.board, "the lock directory to go")
        assert kinds_of(app, lock)[-1] is EventKind.RELEASED
