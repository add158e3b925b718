"""/metrics from a Board: the issue's names and labels, values checked against the
locks themselves, cardinality bounded, label text sanitised, other hosts' locks
left to their hosts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from lockwatch.model import blocking
from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.status import SourceStatus
from lockwatch.model.verdict import State, Verdict
from lockwatch.serve.metrics import Figures, families, figures
from lockwatch.sources.files.facts import FileFacts
from lockwatch.sources.files.policy import StalenessPolicy
from lockwatch.sources.remote.facts import RemoteOrigin
from tests.conftest import LOCAL_HOST, NOW
from tests.facts_of import PgLock, pg_of
from tests.ui.fakes import PG_SERVER, mixed_scenario

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def exposition(found: Figures) -> Samples:
    """The text Prometheus would read, parsed back: (name, labels) -> value."""

    class One:
        def collect(self) -> Iterator[Metric]:
            return families(found)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(One())
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def mixed_board() -> Board:
    board = Board(LOCAL_HOST)
    for change in mixed_scenario():
        board.apply(change)
    return board


def dead_pid_lock(name: str, age: float, directory: str = "/srv/locks") -> Lock:
    return Lock(
        id=f"file:{directory}/{name}.pid",
        source="file",
        format="generic",
        name=name,
        path=f"{directory}/{name}.pid",
        holder=Holder(pid=70000),
        acquired_at=NOW - timedelta(seconds=age),
        facts=FileFacts(StalenessPolicy(pid_liveness=True)),
    )


def board_of(locks: list[Lock], statuses: tuple[SourceStatus, ...] = ()) -> Board:
    board = Board(LOCAL_HOST)
    entries = judge(locks, StaticProcesses(), NOW, LOCAL_HOST)
    board.apply(ChangeSet("files", NOW, statuses, full=True, upserts=tuple(entries)))
    return board


def test_counts_and_oldest_ages_match_the_locks() -> None:
    board = mixed_board()
    found = figures(board, NOW, sources=("file", "postgres", "kernel"))
    by_key: dict[tuple[str, str], int] = {}
    for lock_id, entry in board.entries.items():
        key = (entry.lock.source, board.verdict(lock_id).state.value)
        by_key[key] = by_key.get(key, 0) + 1
    for (source, state), count in found.locks.items():
        assert count == by_key.get((source, state), 0), (source, state)
    # Every source running has every state, at zero too: alerts need no absent().
    assert found.locks[("kernel", "stale")] == 0
    assert len(found.locks) == 3 * len(State)
    stale_files = [
        e.lock
        for e in board.entries.values()
        if e.lock.source == "file" and e.verdict.state is State.STALE
    ]
    oldest = min(lock.acquired_at for lock in stale_files if lock.acquired_at is not None)
    assert found.oldest[("file", "stale")] == pytest.approx((NOW - oldest).total_seconds())


def test_stale_series_name_each_stale_lock_with_its_age() -> None:
    board = mixed_board()
    found = figures(board, NOW, sources=("file", "postgres"))
    samples = exposition(found)
    stale = [
        entry.lock
        for lock_id, entry in board.entries.items()
        if board.verdict(lock_id).state is State.STALE
    ]
    names = {dict(labels)["name"] for (name, labels) in samples if name == "lockwatch_lock_stale"}
    assert names == {lock.name for lock in stale}
    for lock in stale:
        if lock.acquired_at is None or isinstance(lock.facts, PgLock):
            continue
        labels = (("format", lock.format), ("name", lock.name), ("source", lock.source))
        assert samples[("lockwatch_lock_stale", labels)] == 1
        assert samples[("lockwatch_lock_age_seconds", labels)] == pytest.approx(
            (NOW - lock.acquired_at).total_seconds()
        )
    assert samples[("lockwatch_lock_series_dropped", ())] == 0


def test_stale_series_are_capped_oldest_first_and_the_rest_counted() -> None:
    locks = [dead_pid_lock(f"job-{n:02d}", age=100 + n) for n in range(12)]
    board = board_of(locks)
    found = figures(board, NOW, sources=("file",), max_series=5)
    samples = exposition(found)
    kept = sorted(
        dict(labels)["name"] for name, labels in samples if name == "lockwatch_lock_stale"
    )
    assert kept == ["job-07", "job-08", "job-09", "job-10", "job-11"]  # the oldest five
    assert samples[("lockwatch_lock_series_dropped", ())] == 7
    assert figures(board, NOW, sources=("file",), max_series=0).dropped == 12
    # Counts never depend on the cap.
    assert found.locks[("file", "stale")] == 12


def test_two_locks_alike_share_one_series_with_the_older_age() -> None:
    board = board_of([dead_pid_lock("deploy", 50, "/srv/a"), dead_pid_lock("deploy", 80, "/srv/b")])
    found = figures(board, NOW, sources=("file",))
    assert found.stale == [(("file", "generic", "deploy"), 80.0)]
    assert found.locks[("file", "stale")] == 2


def test_hostile_names_reach_labels_escaped() -> None:
    board = board_of([dead_pid_lock('evil\x1b[31m"\nname\u202e', 10)])
    samples = exposition(figures(board, NOW, sources=("file",)))
    (labels,) = [labels for name, labels in samples if name == "lockwatch_lock_stale"]
    name = dict(labels)["name"]
    assert "\x1b" not in name and "\u202e" not in name and "\n" not in name
    assert name == 'evil\\x1b[31m"\\x0aname\\u202e'


def test_postgres_figures_follow_the_blocking_tree() -> None:
    board = mixed_board()
    found = figures(board, NOW, sources=("file", "postgres"))
    pg_locks = [e.lock for e in board.entries.values() if isinstance(e.lock.facts, PgLock)]
    waiting = [
        lock for lock in pg_locks if isinstance(lock.facts, PgLock) and not lock.facts.granted
    ]
    tree = blocking.from_locks(pg_locks)
    figures_pg = found.servers[("postgres", PG_SERVER)]
    assert len(figures_pg.blocked) == len({pg_of(lock).backend.pid for lock in waiting})
    assert figures_pg.blocked  # the scenario has waiters
    assert figures_pg.roots == len(tree.roots) == 1
    assert figures_pg.most_blocked == tree.roots[0].total == 3
    longest = max(
        (NOW - start).total_seconds()
        for lock in waiting
        if (start := pg_of(lock).wait_start) is not None
    )
    assert figures_pg.longest_wait == pytest.approx(longest)
    samples = exposition(found)
    server = (("server", PG_SERVER),)
    assert samples[("lockwatch_pg_blocked_sessions", server)] == len(figures_pg.blocked)
    assert samples[("lockwatch_pg_root_blockers", server)] == 1
    assert samples[("lockwatch_pg_root_blocker_max_blocked_sessions", server)] == 3
    assert samples[("lockwatch_pg_longest_wait_seconds", server)] == pytest.approx(longest)


def test_a_connected_server_with_no_locks_reports_zeros() -> None:
    status = SourceStatus("postgres", "monitor@db9:5432/app", "connected", updated_at=NOW)
    board = Board(LOCAL_HOST)
    board.apply(ChangeSet("pg:monitor@db9:5432/app", NOW, (status,)))
    samples = exposition(figures(board, NOW, sources=("postgres",)))
    server = (("server", "monitor@db9:5432/app"),)
    assert samples[("lockwatch_pg_blocked_sessions", server)] == 0
    assert samples[("lockwatch_pg_longest_wait_seconds", server)] == 0
    assert samples[("lockwatch_pg_root_blockers", server)] == 0


def test_sources_up_down_last_success_and_durations() -> None:
    good = SourceStatus("file", "/srv/locks", "watching", updated_at=NOW)
    down = SourceStatus("postgres", "monitor@db1:5432/app", "disconnected", reason="refused")
    board = Board(LOCAL_HOST)
    board.apply(ChangeSet("files", NOW, (good,)))
    board.apply(ChangeSet("pg", NOW, (down,)))
    found = figures(
        board,
        NOW,
        sources=("file", "postgres"),
        durations={"file": 0.25},
        last_success={("file", "/srv/locks"): NOW},
    )
    samples = exposition(found)
    assert samples[("lockwatch_source_up", (("name", "/srv/locks"), ("source", "file")))] == 1
    assert (
        samples[("lockwatch_source_up", (("name", "monitor@db1:5432/app"), ("source", "postgres")))]
        == 0
    )
    assert samples[
        (
            "lockwatch_source_last_success_timestamp_seconds",
            (("name", "/srv/locks"), ("source", "file")),
        )
    ] == pytest.approx(NOW.timestamp())
    assert samples[("lockwatch_collect_duration_seconds", (("source", "file"),))] == 0.25


def test_other_hosts_locks_are_theirs_to_export() -> None:
    origin = RemoteOrigin("http://db7:9464", "db7", "file:/srv/x.pid", "stale")
    remote = Lock(
        id="remote:http://db7:9464#file:/srv/x.pid",
        source="file",
        format="generic",
        name="x",
        path="/srv/x.pid",
        acquired_at=NOW - timedelta(seconds=30),
        facts=origin,
    )
    board = Board(LOCAL_HOST)
    entry = Entry(remote, Verdict(State.STALE))
    board.apply(ChangeSet("remote:http://db7:9464", NOW, upserts=(entry,)))
    found = figures(board, NOW, sources=("file", "remote"))
    assert found.stale == []
    assert found.locks[("file", "stale")] == 0
    assert not any(source == "remote" for source, _ in found.locks)


def test_a_scrape_counts_again_only_after_the_board_changed() -> None:
    from lockwatch.serve.metrics import tally

    board = board_of([dead_pid_lock("one", 10)])
    counted = tally(board)
    later = NOW + timedelta(seconds=30)
    again = figures(board, later, sources=("file",), counted=counted)
    assert again.locks[("file", "stale")] == 1
    # Ages move with the time of the scrape, from the kept tally.
    assert again.stale == [(("file", "generic", "one"), 40.0)]
    # A change to the board: the old tally no longer counts.
    extra = judge([dead_pid_lock("two", 5)], StaticProcesses(), NOW, LOCAL_HOST)
    board.apply(ChangeSet("files", NOW, upserts=tuple(extra)))
    fresh = figures(board, later, sources=("file",), counted=counted)
    assert fresh.locks[("file", "stale")] == 2


def test_a_tree_read_by_polling_is_up() -> None:
    polling = SourceStatus("file", "/mnt/nfs/locks", "polling", reason="a network filesystem")
    board = Board(LOCAL_HOST)
    board.apply(ChangeSet("files", NOW, (polling,)))
    found = figures(board, NOW, sources=("file",))
    assert found.up == [("file", "/mnt/nfs/locks", 1)]


def test_a_sources_own_gauge_has_one_sample_per_labels() -> None:
    """Two locks of one name on one server giving the same gauge (a ZooKeeper
    lease's path while a kazoo lock under it is being taken) are one series: a
    duplicate sample is a broken exposition."""
    from lockwatch.model.facts import Series
    from lockwatch.serve.metrics import _own_series

    out = Figures()
    one = Series("lockwatch_zk_queue_length", "q", "zookeeper:zk1:2181", value=1.0)
    two = Series("lockwatch_zk_queue_length", "q", "zookeeper:zk1:2181", value=2.0)
    _own_series(out, [(one, "/a"), (two, "/a"), (two, "/b")], NOW, 10)
    (_, samples) = out.own["lockwatch_zk_queue_length"]
    assert [labels for labels, _ in samples] == [
        ("zookeeper:zk1:2181", "/a"),
        ("zookeeper:zk1:2181", "/b"),
    ]
    assert exposition(out)  # Prometheus's own parser reads it
