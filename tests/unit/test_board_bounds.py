"""What the board keeps stays bounded, and merged change sets do what the
change sets they merge do.

Memory: a dashboard left open through an hour of churn, or started on a huge
tree, must hold a fixed amount of history whatever happened. Merging: the file
feed coalesces bursts of change sets into one (sources/feed.py Coalescer); the
board must end up exactly as if it had applied each of them in turn.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockwatch.model import board as board_module
from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet, Entry, judge, merge
from lockwatch.model.events import Event, EventKind
from lockwatch.model.process import StaticProcesses
from lockwatch.model.status import ScanError, SourceStatus
from tests.conftest import LOCAL_HOST, NOW, alive
from tests.unit.test_incident import LIVE, generic

FEED = "files"
OTHER = LIVE + 1  # also alive: a lock handed to it has changed holder


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def entry(n: int, version: int = 0) -> Entry:
    """Lock n at its `version`th writing: each one a change, and every other one
    handed from one live holder to the other (an event)."""
    pid = LIVE if version % 2 == 0 else OTHER
    lock = generic(f"/srv/run/{n}.lock", {"pid": pid, "operation": f"v{version}"})
    (judged,) = judge([lock], StaticProcesses(alive(LIVE), alive(OTHER)), NOW, LOCAL_HOST)
    return judged


def lock_id(n: int) -> str:
    return f"file:/srv/run/{n}.lock"


def error(n: int) -> ScanError:
    return ScanError(path=f"/srv/run/{n}.lock", code="permission_denied", message="denied")


def held_in_histories(board: Board) -> int:
    return sum(len(events) for events in board.history.values())


# -- history -----------------------------------------------------------------------------


def test_histories_hold_at_most_the_budget_in_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(board_module, "HISTORY_EVENTS_KEPT", 50)
    board = Board(LOCAL_HOST)
    board.apply(ChangeSet(FEED, NOW, full=True, upserts=tuple(entry(n) for n in range(40))))
    assert held_in_histories(board) == 40  # one "appeared" each
    for step in range(1, 30):  # each change rewrites ten locks
        board.apply(ChangeSet(FEED, at(step), upserts=tuple(entry(n, step) for n in range(10))))
        assert held_in_histories(board) <= 50
    assert held_in_histories(board) == 50
    # The oldest went first: the first locks' "appeared" are gone, the newest kept.
    newest = board.history[lock_id(0)][-1]
    assert newest.at == at(29) and newest.kind is EventKind.HOLDER_CHANGED
    assert lock_id(39) not in board.history


def test_a_huge_first_scan_keeps_only_the_budget_of_appearances(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(board_module, "HISTORY_EVENTS_KEPT", 100)
    board = Board(LOCAL_HOST)
    board.apply(ChangeSet(FEED, NOW, full=True, upserts=tuple(entry(n) for n in range(1000))))
    assert len(board) == 1000
    assert held_in_histories(board) == 100
    assert len(board.history) == 100  # the others' only event went: no empty histories


def test_a_lock_that_churns_keeps_at_most_its_own_cap_within_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(board_module, "HISTORY_KEPT", 5)
    monkeypatch.setattr(board_module, "HISTORY_EVENTS_KEPT", 40)
    board = Board(LOCAL_HOST)
    for step in range(500):  # taken and released again and again
        board.apply(ChangeSet(FEED, at(step), upserts=(entry(1, step),)))
        board.apply(ChangeSet(FEED, at(step + 0.5), removed=(lock_id(1),)))
        assert len(board.history.get(lock_id(1), ())) <= 5
        assert held_in_histories(board) <= 40
    assert [e.kind for e in board.history[lock_id(1)]][-2:] == [
        EventKind.APPEARED,
        EventKind.RELEASED,
    ]


def test_what_the_board_keeps_stays_within_bounds_under_churn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every container the board keeps for history, events and samples is within
    its bound, however long the churn goes on."""
    monkeypatch.setattr(board_module, "HISTORY_EVENTS_KEPT", 300)
    monkeypatch.setattr(board_module, "EVENTS_KEPT", 200)
    monkeypatch.setattr(board_module, "RELEASED_HISTORIES_KEPT", 30)
    monkeypatch.setattr(board_module, "SAMPLES_KEPT", 60)
    rng = random.Random(7)
    board = Board(LOCAL_HOST)
    present: set[int] = set()

    def churn(rounds: int, offset: int) -> None:
        for step in range(offset, offset + rounds):
            n = rng.randrange(200)
            if n in present and rng.random() < 0.4:
                board.apply(ChangeSet(FEED, at(step), removed=(lock_id(n),)))
                present.discard(n)
            else:
                board.apply(ChangeSet(FEED, at(step), upserts=(entry(n, step),)))
                present.add(n)
            board.sample(at(step))

    for rounds in range(4):
        churn(1000, rounds * 1000)
        assert len(board.events) == 200
        assert held_in_histories(board) <= 300
        assert len(board.history) <= 300
        assert len(board._recorded) == 300
        assert len(board._released) <= 30
        assert len(board.samples) == 60
        assert len(board._deadlines) <= 2 * len(board) + 1024


# -- merge ---------------------------------------------------------------------------------


def test_merge_keeps_the_last_word_on_each_lock() -> None:
    first = ChangeSet(FEED, at(1), upserts=(entry(1), entry(2)), removed=(lock_id(3),))
    then = ChangeSet(FEED, at(2), upserts=(entry(2, 1), entry(3)), removed=(lock_id(1),))
    merged = merge(first, then)
    assert merged.at == at(2)
    assert {e.lock.id: e for e in merged.upserts} == {
        lock_id(2): entry(2, 1),
        lock_id(3): entry(3),
    }
    assert merged.removed == (lock_id(1),)


def test_merge_of_a_full_picture_and_a_delta_is_a_full_picture() -> None:
    first = ChangeSet(FEED, at(1), full=True, upserts=(entry(1), entry(2)))
    then = ChangeSet(FEED, at(2), upserts=(entry(3),), removed=(lock_id(1),))
    merged = merge(first, then)
    assert merged.full and merged.removed == ()
    assert [e.lock.id for e in merged.upserts] == [lock_id(2), lock_id(3)]
    assert merge(then, first) == first  # a later full picture says it all


def test_merge_errors_as_the_board_settles_them() -> None:
    rescan = ChangeSet(FEED, at(1), errors=(error(1), error(2)), all_errors=True)
    fixed = ChangeSet(FEED, at(2), upserts=(entry(1),), errors=(error(5),))
    merged = merge(rescan, fixed)
    assert merged.all_errors
    assert merged.errors == (error(2), error(5))
    assert merge(fixed, rescan).errors == rescan.errors


def test_merge_refuses_two_feeds() -> None:
    with pytest.raises(ValueError, match="two feeds"):
        merge(ChangeSet("a", NOW), ChangeSet("b", NOW))


WATCHING = (SourceStatus("file", "/srv/run", "watching"),)


@st.composite
def change_sets(draw: st.DrawFn) -> list[ChangeSet]:
    """A run of change sets of one feed over six locks and their errors."""
    out = []
    for step in range(draw(st.integers(1, 6))):
        ids = st.integers(0, 5)
        upserts = {n: entry(n, draw(st.integers(0, 2))) for n in draw(st.lists(ids, max_size=4))}
        out.append(
            ChangeSet(
                FEED,
                at(step),
                WATCHING if draw(st.booleans()) else (),
                full=draw(st.integers(0, 5)) == 0,
                upserts=tuple(upserts.values()),
                removed=tuple(lock_id(n) for n in draw(st.lists(ids, max_size=3))),
                errors=tuple(error(n) for n in draw(st.lists(ids, max_size=2, unique=True))),
                all_errors=draw(st.integers(0, 4)) == 0,
            )
        )
    return out


def picture(board: Board) -> tuple[object, ...]:
    return (
        {lock: replace(e, facts=None) for lock, e in board.entries.items()},
        sorted(board.all_errors(), key=lambda e: e.path),
        board.all_statuses(),
        dict(board.counts),
    )


@settings(max_examples=300, deadline=None)
@given(start=change_sets(), run=change_sets())
def test_a_merged_run_leaves_the_board_as_the_run_does(
    start: list[ChangeSet], run: list[ChangeSet]
) -> None:
    one_by_one, merged = Board(LOCAL_HOST), Board(LOCAL_HOST)
    for change in start:  # whatever the board held before
        one_by_one.apply(change)
        merged.apply(change)
    for change in run:
        one_by_one.apply(change)
    together = run[0]
    for change in run[1:]:
        together = merge(together, change)
    merged.apply(together)
    assert picture(merged) == picture(one_by_one)


def test_events_are_recorded_for_notes_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(board_module, "HISTORY_EVENTS_KEPT", 3)
    board = Board(LOCAL_HOST)
    for i in range(5):
        board.note(Event(at(i), EventKind.BROKEN, lock_id(1), "1", "file", str(i)))
    assert [e.detail for e in board.history[lock_id(1)]] == ["2", "3", "4"]
