"""Issue 45 meets issue 44: a ZooKeeper lock's queue recorded into the history
as `serve` records it (the real feed, the recorder, a history file), then asked
back as one episode: the throwaway server of this package's conftest
(Debian's, real), kazoo's real `Lock` recipe (a holder and two waiters in
order; a holder in a process of its own to kill)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lockwatch.model.changes import Entry
from lockwatch.model.history import Episode
from lockwatch.serve.watcher import Watcher
from tests.history.harness import reader, recording, wait_until
from tests.zookeeper.conftest import Area

POLL = 0.2


def _entries(watcher: Watcher, source: str) -> list[Entry]:
    return [e for e in list(watcher.board.entries.values()) if e.lock.source == source]


def _seen(watcher: Watcher, source: str, test: Callable[[Entry], bool]) -> Callable[[], bool]:
    return lambda: any(test(entry) for entry in _entries(watcher, source))


def _zk(identifier: str, state: str) -> Callable[[Entry], bool]:
    def test(entry: Entry) -> bool:
        facts: Any = entry.lock.facts
        return bool(facts.identifier == identifier and entry.verdict.state.value == state)

    return test


def _hex(client: Any) -> str:
    return f"0x{client.client_id[0]:x}"


def _acquire(lock: Any) -> None:
    from kazoo.exceptions import KazooException

    with contextlib.suppress(KazooException):  # its session closed under it: it is gone
        lock.acquire()


def _queue(zk: Area, watcher: Watcher, path: str, *names: str) -> list[Any]:
    """A kazoo client per name, each queued for `path` in turn (seen waiting by
    the feed before the next comes, so the queue's order is theirs)."""
    clients = []
    for name in names:
        client = zk.zk.client(timeout=2.0)
        threading.Thread(target=_acquire, args=(client.Lock(path, name),), daemon=True).start()
        wait_until(_seen(watcher, "zookeeper", _zk(name, "waiting")), f"{name} queued")
        clients.append(client)
    return clients


def _one_episode(history: Path, source: str) -> Episode:
    found = [e for e in reader(history).episodes(source=source) if e.waiters]
    assert len(found) == 1, found
    return found[0]


def test_a_zookeeper_queue_is_one_episode_released_by_its_holder(zk: Area, tmp_path: Path) -> None:
    """A holder and two waiters: the second's session closes (`gone`), the
    holder releases and the first takes the lock (`acquired`): `released`."""
    history, path = tmp_path / "history.sqlite3", zk.path("jobs")
    args = ["--zk", zk.zk.connect, "--zk-path", zk.root]
    holder = zk.zk.client()
    lock = holder.Lock(path, "holder-a")
    assert lock.acquire(timeout=30)
    with recording(args, history, POLL) as watcher:
        wait_until(_seen(watcher, "zookeeper", _zk("holder-a", "active")), "the holder seen")
        first, second = _queue(zk, watcher, path, "waiter-b", "waiter-c")
        queued = [_hex(first), _hex(second)]
        second.stop()  # its session closes: ZooKeeper deletes its node
        second.close()
        wait_until(
            lambda: not _seen(watcher, "zookeeper", _zk("waiter-c", "waiting"))(),
            "the closed session's node gone",
        )
        lock.release()
        wait_until(_seen(watcher, "zookeeper", _zk("waiter-b", "active")), "the hand-over")
    episode = _one_episode(history, "zookeeper")
    assert episode.blocker.node == _hex(holder)
    assert episode.blocker.application is not None
    # Who it was: the contender's identifier, and its session's client (cons).
    assert episode.blocker.application.startswith("holder-a from ")
    assert "127.0.0.1" in episode.blocker.application
    assert [w.node for w in episode.waiters] == queued
    assert [w.outcome for w in episode.waiters] == ["acquired", "gone"]
    assert episode.ended_by == "released"
    assert episode.server == f"zookeeper:{zk.zk.connect}"
    assert episode.resource == path


def test_a_zookeeper_holder_whose_session_expires_ends_its_episode_holder_died(
    zk: Area, tmp_path: Path
) -> None:
    """The holder's process is killed: its session has no client (stale), then
    expires, ZooKeeper deletes its node and the first waiter takes the lock."""
    history, path = tmp_path / "history.sqlite3", zk.path("jobs")
    args = ["--zk", zk.zk.connect, "--zk-path", zk.root]
    doomed = zk.zk.holder("lock", path, "doomed", "4")  # a 4 s session
    with recording(args, history, POLL) as watcher:
        wait_until(_seen(watcher, "zookeeper", _zk("doomed", "active")), "the holder seen")
        first, second = _queue(zk, watcher, path, "waiter-b", "waiter-c")
        queued = [_hex(first), _hex(second)]
        second.stop()
        second.close()
        wait_until(
            lambda: not _seen(watcher, "zookeeper", _zk("waiter-c", "waiting"))(),
            "the closed session's node gone",
        )
        doomed.kill()  # its connection closes; its session lives 4 s more
        wait_until(_seen(watcher, "zookeeper", _zk("doomed", "stale")), "the holder stale")
        wait_until(_seen(watcher, "zookeeper", _zk("waiter-b", "active")), "the hand-over")
    episode = _one_episode(history, "zookeeper")
    assert episode.blocker.application is not None
    assert episode.blocker.application.startswith("doomed")
    assert [w.node for w in episode.waiters] == queued
    assert [w.outcome for w in episode.waiters] == ["acquired", "gone"]
    assert episode.ended_by == "holder_died"
