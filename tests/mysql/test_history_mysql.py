"""A MySQL/MariaDB metadata-lock queue recorded into the history (issue 44):
a transaction reads a table and stays open, an ALTER TABLE queues behind it for
the metadata lock, a SELECT queues behind the ALTER; the reader commits. The
history has one episode: the reader's thread the root, the ALTER and the SELECT
its waiters (the SELECT through the queue), both acquired, released."""

from __future__ import annotations

from pathlib import Path

from tests.history.harness import reader, recording, wait_until
from tests.mysql.conftest import MyHarness, tid


def test_a_metadata_lock_queue_becomes_one_episode(
    my: MyHarness, metadata_lock_info: None, tmp_path: Path
) -> None:
    table = my.table("hist", "(id INT) ENGINE=InnoDB")
    holder, ddl, queued = my.session(), my.session(), my.session()
    history = tmp_path / "history.sqlite3"
    nodes = {f"thread {tid(ddl)}", f"thread {tid(queued)}"}  # as its graph names them
    with recording(["--mysql", my.dsn], history, 0.2) as watcher:
        wait_until(lambda: watcher.health()[0], "the MySQL feed's first poll")
        my.run(holder, "BEGIN")
        my.run(holder, f"SELECT * FROM {table}")
        alter = my.background(ddl, f"ALTER TABLE {table} ADD COLUMN c2 INT")
        my.waiting(ddl, "Waiting for table metadata lock")
        behind = my.background(queued, f"SELECT * FROM {table}")
        my.waiting(queued, "Waiting for table metadata lock")

        def waiting_nodes() -> set[str]:
            found = set()
            for entry in list(watcher.board.entries.values()):
                facts = entry.lock.facts
                waits = None if facts is None else facts.waits()
                if waits is not None:
                    found.add(str(waits[0]))
            return found

        wait_until(lambda: nodes <= waiting_nodes(), "both waits on the board")
        my.run(holder, "COMMIT")
        alter.wait()
        behind.wait()
        wait_until(lambda: not nodes & waiting_nodes(), "the waits over on the board")
    episodes = [e for e in reader(history).episodes() if {w.node for w in e.waiters} & nodes]
    assert len(episodes) == 1, episodes
    episode = episodes[0]
    assert episode.source == "mysql"
    assert episode.blocker.node == f"thread {tid(holder)}"
    assert {w.node for w in episode.waiters} == nodes
    assert {w.outcome for w in episode.waiters} == {"acquired"}
    assert episode.ended_by == "released"
    assert episode.peak_waiters == 2
