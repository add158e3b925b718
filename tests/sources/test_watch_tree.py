"""The inotify watcher's own bookkeeping of the directories it watches: what a
large tree costs it, and that directories gone leave nothing behind."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockwatch.sources.files.inotify import Watcher


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Watcher, str]]:
    root = tmp_path / "root"
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "x").mkdir()
    (root / "y").mkdir()
    armed = threading.Event()
    watcher = Watcher(
        [str(root)],
        armed.set,
        step_seconds=0.01,
        debounce_seconds=0.01,
        hold_seconds=0.01,
        root_check_seconds=60.0,
    )
    watcher.start()
    try:
        assert armed.wait(10.0) and watcher.armed
        yield watcher, str(root)
    finally:
        watcher.close()


def settled(watcher: Watcher) -> None:
    """Every event the kernel queued till now was read (the watcher answers a
    rescan's question only then)."""
    assert watcher.busy_since(watcher.mark(), timeout=10.0) is not None


def test_a_directory_with_one_watched_subdirectory_keeps_it_without_a_set(
    watched: tuple[Watcher, str],
) -> None:
    watcher, r = watched
    assert watcher.watches == 6
    children = watcher._children
    assert children[r] == {f"{r}/a", f"{r}/x", f"{r}/y"}
    assert children[f"{r}/a"] == f"{r}/a/b"  # the one child itself: a set each would
    assert children[f"{r}/a/b"] == f"{r}/a/b/c"  # cost a large tree more than its paths
    assert f"{r}/a/b/c" not in children and f"{r}/x" not in children
    # The key is the directory's own string, not a copy per child.
    (a_key,) = (key for key in children if key == f"{r}/a")
    assert any(path is a_key for path in watcher._paths.values())


def test_directories_removed_or_moved_away_leave_nothing_behind(
    watched: tuple[Watcher, str], tmp_path: Path
) -> None:
    watcher, r = watched
    shutil.rmtree(f"{r}/a")
    Path(f"{r}/y").rename(tmp_path / "y-moved-away")
    settled(watcher)
    assert watcher._children == {r: f"{r}/x"}  # back to one: no set
    assert watcher.watches == 2
    Path(f"{r}/new/deeper").mkdir(parents=True)
    settled(watcher)
    assert watcher._children == {r: {f"{r}/x", f"{r}/new"}, f"{r}/new": f"{r}/new/deeper"}
    assert watcher.watches == 4
