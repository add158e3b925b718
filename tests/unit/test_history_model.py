"""The pure parts of the lock history: episodes folded from wait spans (a queue
counts behind its root, a gap shorter than two polls does not split one, a
cycle is a deadlock, an action ends it as broken) and times as operators type
them."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone

import pytest

from lockwatch.model.episodes import fold, worst_first
from lockwatch.model.history import ActionMark, LockSpan, WaitSpan, Who
from lockwatch.model.when import BadTime, found_in, parse_when

T0 = datetime(2026, 12, 7, 3, 11, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def wait(waiter: str, blocker: str, start: float, end: float | None, **kw: object) -> WaitSpan:
    return WaitSpan(
        "h",
        "postgres",
        "db1",
        "public.jobs",
        "AccessExclusiveLock",
        Who(waiter, pid=int(waiter)),
        Who(blocker, pid=int(blocker), lock_id=f"lock-{blocker}"),
        at(start),
        None if end is None else at(end),
        **kw,  # type: ignore[arg-type]
    )


def test_a_queue_counts_behind_its_root() -> None:
    spans = [
        wait("2", "1", 0, 60, outcome="acquired"),  # the ALTER behind the idle transaction
        wait("3", "2", 5, 61, outcome="acquired"),  # a reader behind the ALTER
        wait("4", "2", 6, 61, outcome="acquired"),
    ]
    [episode] = fold(spans, [], [], {"h": 2.0})
    assert episode.blocker.node == "1"
    assert [w.node for w in episode.waiters] == ["2", "3", "4"]
    assert episode.peak_waiters == 3
    assert episode.start == at(0) and episode.end == at(61)
    assert episode.waiter_seconds == pytest.approx(60 + 56 + 55)
    assert episode.longest_wait_seconds == pytest.approx(60)
    assert episode.ended_by == "released"


def test_a_gap_shorter_than_two_polls_does_not_split() -> None:
    spans = [wait("2", "1", 0, 10, outcome=None), wait("2", "1", 13, 20, outcome="acquired")]
    assert len(fold(spans, [], [], {"h": 2.0})) == 1
    assert len(fold(spans, [], [], {"h": 1.0})) == 2


def test_a_cycle_is_a_deadlock_and_gave_up_waiters() -> None:
    spans = [
        wait("1", "2", 0, 9, cycle=True, outcome="deadlock"),
        wait("2", "1", 1, 9, cycle=True, outcome="deadlock"),
    ]
    [episode] = fold(spans, [], [], {"h": 2.0})
    assert episode.ended_by == "deadlock"
    timeout = fold([wait("5", "4", 0, 5, outcome="timeout")], [], [], {"h": 2.0})[0]
    assert timeout.ended_by == "waiters_gave_up"
    going = fold([wait("5", "4", 0, None)], [], [], {"h": 2.0}, now=at(30))[0]
    assert going.end is None and going.ended_by is None and going.waiter_seconds == 30


def test_an_action_on_the_root_ends_it_as_broken() -> None:
    mark = ActionMark("h", at(61), "lock-1", "backend_terminated", "ops", 12, node="1")
    [episode] = fold([wait("2", "1", 0, 60, outcome="acquired")], [], [mark], {"h": 2.0})
    assert (episode.ended_by, episode.audit_id, episode.operator) == ("broken", 12, "ops")


def test_a_stale_lock_leaves_a_trail() -> None:
    span = LockSpan(
        "h",
        "file:/srv/deploy.lock",
        "file",
        "deploy",
        "/srv/deploy.lock",
        "stale",
        ("holder_dead",),
        "4242",
        at(0),
        at(2700),
    )
    mark = ActionMark("h", at(2701), "file:/srv/deploy.lock", "lock_broken", "ops", 41)
    [trail] = fold([], [span], [mark], {"h": 2.0})
    assert trail.state == "stale" and trail.waiters == ()
    assert (trail.ended_by, trail.audit_id) == ("broken", 41)
    assert fold([], [span], [], {"h": 2.0})[0].ended_by == "holder_died"


def test_a_blocker_whose_source_says_its_holder_is_gone_died() -> None:
    """The codes that say a holder is gone are each source's (`holder_gone`):
    a blocker's lock stale for one of them as its episode ended: holder_died."""
    span = LockSpan(
        "h", "lock-1", "zookeeper", "/jobs", "zk", "stale", ("session_gone",), "0x1", at(3), at(9)
    )
    spans = [wait("2", "1", 0, 9, outcome="acquired")]
    assert fold(spans, [span], [], {"h": 2.0})[0].ended_by == "released"
    died = fold(spans, [span], [], {"h": 2.0}, holder_gone={"session_gone"})
    # Its stale time ended with the episode: told there, not as a trail too.
    assert [e.ended_by for e in died] == ["holder_died"]
    # Stale on past the episode's end: a trail of its own.
    longer = dataclasses.replace(span, end=at(60))
    assert len(fold(spans, [longer], [], {"h": 2.0})) == 2


def test_worst_first() -> None:
    small = wait("2", "1", 0, 5, outcome="acquired")
    big = WaitSpan("h", "postgres", "db2", "t", "m", Who("9"), Who("8"), at(0), at(50), "acquired")
    assert [e.server for e in worst_first(fold([small, big], [], [], {}))] == ["db2", "db1"]


NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-07T03:12:07Z", datetime(2026, 12, 7, 3, 12, 7, tzinfo=UTC)),
        ("2026-12-07 03:12:07+01:00", datetime(2026, 12, 7, 2, 12, 7, tzinfo=UTC)),
        ("03:12", datetime(2026, 12, 7, 3, 12, tzinfo=UTC)),
        ("03:12:07", datetime(2026, 12, 7, 3, 12, 7, tzinfo=UTC)),
        ("-15m", NOW - timedelta(minutes=15)),
        ("-2h", NOW - timedelta(hours=2)),
        ("-1d", NOW - timedelta(days=1)),
    ],
)
def test_times_as_typed(text: str, expected: datetime) -> None:
    assert parse_when(text, NOW) == expected


def test_clock_times_are_local() -> None:
    paris = timezone(timedelta(hours=1))
    assert parse_when("03:12", NOW, paris) == datetime(2026, 12, 7, 2, 12, tzinfo=UTC)


@pytest.mark.parametrize("text", ["", "yesterday", "25:00", "-5y", "x" * 100])
def test_bad_times_say_the_forms(text: str) -> None:
    with pytest.raises(BadTime, match="RFC 3339"):
        parse_when(text, NOW)


def test_a_logged_timestamp_is_found() -> None:
    line = "2026-12-07 03:12:07.123 UTC [4242] ERROR:  canceling statement due to lock timeout"
    assert found_in(line, NOW) == datetime(2026, 12, 7, 3, 12, 7, 123000, tzinfo=UTC)
    assert found_in("no time here", NOW) is None
