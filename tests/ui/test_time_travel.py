"""Time travel in the dashboard (issue 44, item 4): `[` and `]` step through the
changes the real recorder wrote into a real SQLite history, `@` seeks to a typed
time, `L` comes back live; the past is marked in the header, its Events list the
recorded episodes, and the action keys say why they do nothing there.

The history is filled through the recorder's API (`Recorder.observe`, as the
dashboard calls it) with the boards of the test's scenario at chosen instants:
the frozen clock of tests/ui/fakes.py is the dashboard's now."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lockwatch.actions.session import ActionSession
from lockwatch.clock import FrozenClock
from lockwatch.history.api import HistoryStore, open_history
from lockwatch.history.recorder import Recorder
from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.keys import View
from lockwatch.ui.past import SeekScreen
from tests.ui.fakes import (
    FILES_FEED,
    LOCAL_HOST,
    NOW,
    make_app,
    mixed_scenario,
    settle,
    until,
    view_of,
)
from tests.ui.test_action_snapshots import actions, app_with
from tests.ui.test_pilot import header_text

__all__ = ["actions"]  # the fixture, used by name

# Two recorded instants before the dashboard's now: the whole scenario, then one
# lock gone.
FIRST = NOW - timedelta(minutes=10)
SECOND = NOW - timedelta(minutes=5)


@pytest.fixture(autouse=True)
def utc_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The banner says local time: UTC here, whatever the runner's zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def record_history(path: Path) -> str:
    """Record the scenario at FIRST and the loss of one file lock at SECOND,
    through the real recorder into the SQLite store at `path`; returns the id of
    the lock that went."""

    def opener() -> HistoryStore:
        return open_history(str(path), host=LOCAL_HOST, write=True)

    # The recorder's clock stands at NOW: it ends its session there, as it would
    # have had it watched this scenario live.
    recorder = Recorder(opener, poll_seconds=1.0, clock=FrozenClock(NOW))
    board = Board(LOCAL_HOST)
    for change in mixed_scenario():
        recorder.observe(board, board.apply(change), FIRST)
    gone = sorted(lock_id for lock_id in board.entries if lock_id.startswith("file:"))[0]
    recorder.observe(board, board.apply(ChangeSet(FILES_FEED, SECOND, removed=(gone,))), SECOND)
    # A poll at now that changes nothing: the recorder's last word (its
    # heartbeat), up to which its open spans last.
    recorder.observe(board, None, NOW)
    recorder.close()
    assert recorder.failed is None, recorder.failed
    return gone


def travelling_app(path: Path, **kwargs: Any) -> LockwatchApp:
    return make_app(mixed_scenario(), history_reader=lambda: open_history(str(path)), **kwargs)


async def test_step_back_and_forth_through_recorded_changes(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite3"
    gone = record_history(history)
    app = travelling_app(history)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        assert gone in app.board.entries and app.past is None
        live_count = len(app.board.entries)

        await pilot.press("left_square_bracket")
        await until(pilot, lambda: app.past == SECOND, "a step back to the second change")
        assert gone not in app.board.entries
        assert "PAST 2026-11-21 11:55:00" in header_text(app)

        await pilot.press("left_square_bracket")
        await until(pilot, lambda: app.past == FIRST, "a step back to the first change")
        assert gone in app.board.entries
        assert len(app.board.entries) == live_count

        await pilot.press("left_square_bracket")  # nothing before the first
        await pilot.pause()
        assert app.past == FIRST
        assert any("no recorded change before" in n.message for n in app._notifications)

        await pilot.press("right_square_bracket")
        await until(pilot, lambda: app.past == SECOND, "a step forward")
        await pilot.press("right_square_bracket")  # past the last change: live
        await until(pilot, lambda: app.past is None, "live again after the last change")
        assert gone in app.board.entries
        assert "PAST" not in header_text(app)


async def test_seek_to_a_typed_time_then_back_live(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite3"
    gone = record_history(history)
    app = travelling_app(history)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("at")
        await until(pilot, lambda: isinstance(app.screen, SeekScreen), "the seek dialog")
        await pilot.press("x", "enter")  # no time: said, the dialog stays
        await pilot.pause()
        assert isinstance(app.screen, SeekScreen)
        await pilot.press("backspace", *"-7m", "enter")
        await until(pilot, lambda: app.past == NOW - timedelta(minutes=7), "the sought time")
        assert gone in app.board.entries  # it went at -5m
        await pilot.press("s")  # a sort set in the past stays when back live
        await pilot.pause()
        assert app.rows.sort == "age"
        await pilot.press("L")
        await until(pilot, lambda: app.past is None, "live again")
        assert "PAST" not in header_text(app)
        assert app.rows.sort == "age" and gone in app.rows.ids


async def test_actions_are_refused_in_the_past_and_say_why(
    tmp_path: Path, actions: ActionSession
) -> None:
    history = tmp_path / "history.sqlite3"
    record_history(history)
    app = app_with(actions, history_reader=lambda: open_history(str(history)))
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        assert app.flow is not None
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: app.past is not None, "the past")
        await pilot.press("b")
        await pilot.pause()
        assert any(n.title == "in the past" for n in app._notifications)
        assert view_of(app) is View.LOCKS and app.screen is app.locks


async def test_events_list_recorded_episodes_in_the_past(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite3"
    record_history(history)
    app = travelling_app(history)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: app.past is not None, "the past")
        store = open_history(str(history))
        assert app.past is not None
        recorded = store.episodes(app.past - timedelta(days=1), app.past)
        assert recorded, "the scenario's blocking chain and stale locks leave episodes"
        listed = [event for event in app.board.events if event.kind == "episode"]
        assert {event.detail.split(":")[0] for event in listed} == {
            f"episode {episode.id}" for episode in recorded
        }


async def test_without_a_history_the_keys_say_so() -> None:
    app = make_app(mixed_scenario())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert app.past is None
        assert any("no lock history" in n.message for n in app._notifications)


def _opened_at(at: datetime, path: Path) -> LockwatchApp:
    return travelling_app(path, at=at)


async def test_the_dashboard_opens_in_the_past_with_at(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite3"
    gone = record_history(history)
    app = _opened_at(SECOND + timedelta(seconds=30), history)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await until(pilot, lambda: app.past is not None, "the past")
        assert gone not in app.board.entries
        assert "PAST" in header_text(app)


async def test_replay_of_a_history_store_opens_on_its_last_change(tmp_path: Path) -> None:
    from lockwatch.cli.travel import history_replay, is_history_file
    from tests.ui.fakes import builtin_themes

    history = tmp_path / "history.sqlite3"
    gone = record_history(history)
    assert is_history_file(history)
    app = history_replay(history, None, themes=builtin_themes())
    app.animation_level = "none"
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.past is not None, "the past")
        assert app.flow is None and not app.feeds
        assert gone not in app.board.entries and app.board.entries
        await pilot.press("L")  # no live board in a replay: said, stays
        await pilot.pause()
        assert app.past is not None
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: gone in app.board.entries, "a step back to the first change")


def test_the_time_options_fail_in_one_line(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    history = tmp_path / "history.sqlite3"
    record_history(history)
    code, _, err = run_cli("watch", "--at", "tomorrowish", "--history", str(history))
    assert code == 2 and "--at" in err and "Traceback" not in err
    code, _, err = run_cli("watch", "--at", "-1h", "--no-history")
    assert code == 2 and "--no-history" in err
    code, _, err = run_cli("watch", "--at", "-1h", "--history", str(tmp_path / "none.sqlite3"))
    assert code == 2 and "--at" in err
    recording = tmp_path / "r.jsonl"
    recording.write_text("")
    code, _, err = run_cli("replay", "--at", "-1h", str(recording))
    assert code == 2 and "history store" in err
