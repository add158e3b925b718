"""A real flock wait (util-linux `flock` processes holding and waiting on a
file) recorded by the kernel source's feed into the history, then asked back:
the episode's blocker, waiter, outcome and times, and `ls --at` inside it."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

from lockwatch.history.api import HistoryStore
from lockwatch.model.history import Episode
from tests.history.harness import reader, recording, wait_until

POLL = 0.2


def _waiting(store_path: Path, watcher: object) -> bool:
    board = watcher.board  # type: ignore[attr-defined]
    return any(entry.verdict.state.value == "waiting" for entry in list(board.entries.values()))


def test_a_flock_wait_becomes_an_episode(tmp_path: Path) -> None:
    lock = tmp_path / "deploy.lock"
    lock.touch()
    history = tmp_path / "history.sqlite3"
    holder = subprocess.Popen(["flock", str(lock), "cat"], stdin=subprocess.PIPE)
    waiter = None
    try:
        with recording(["--kernel", str(tmp_path)], history, POLL) as watcher:
            wait_until(
                lambda: any(
                    e.verdict.state.value == "active" and e.lock.path == str(lock)
                    for e in list(watcher.board.entries.values())
                ),
                "the holder's flock seen",
            )
            waiter = subprocess.Popen(["flock", "-w", "60", str(lock), "true"])
            wait_until(lambda: _waiting(history, watcher), "the waiter seen waiting")
            assert holder.stdin is not None
            holder.stdin.close()
            assert waiter.wait(60) == 0
            wait_until(
                lambda: not _waiting(history, watcher), "the waiter seen gone from the board"
            )
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()
        if waiter is not None and waiter.poll() is None:
            waiter.kill()
    store: HistoryStore = reader(history)
    found = [e for e in store.episodes() if e.waiters]
    assert len(found) == 1, found
    episode: Episode = found[0]
    assert episode.source == "kernel"
    assert episode.blocker.pid == holder.pid
    assert [w.pid for w in episode.waiters] == [waiter.pid]
    assert episode.waiters[0].outcome == "acquired"
    assert episode.ended_by == "released"
    assert episode.end is not None
    lasted = (episode.end - episode.start).total_seconds()
    assert episode.waiter_seconds > 0 and episode.longest_wait_seconds <= lasted + 2 * POLL
    middle = episode.start + (episode.end - episode.start) / 2
    assert any(seen.path == str(lock) for seen in store.locks_at(middle))
    assert store.episode(episode.id) == episode
    assert any(
        t >= episode.start - timedelta(seconds=1)
        for t in store.change_times(
            episode.start - timedelta(seconds=5), episode.end + timedelta(seconds=5)
        )
    )
