"""The Events view: keyboard scrolling, following the newest until the operator
scrolls, hiding heartbeats, and the operator's own actions as events."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from textual.widgets import Static

from lockwatch.model.events import Event, EventKind
from lockwatch.ui.keys import View
from lockwatch.ui.panels import EventLog
from tests.conftest import NOW
from tests.ui.fakes import events_view, make_app, mixed_scenario, settle, until
from tests.ui.test_actions_ui import (
    REASON,
    SIZE,
    Scene,
    acted,
    open_action,
    press_confirm,
    tower,
    type_into,
)


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    return Scene(tmp_path)


def many(count: int, kind: EventKind = EventKind.APPEARED, start: int = 0) -> list[Event]:
    return [
        Event(NOW + timedelta(seconds=i), kind, f"file:/x/{i}", f"lock-{i}", "file", "detail")
        for i in range(start, start + count)
    ]


def log_text(log: EventLog) -> str:
    return "\n".join(line.text for line in log.lines)


async def test_the_log_follows_the_newest_until_scrolled_up() -> None:
    app = make_app(mixed_scenario())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "tab")
        await pilot.pause()
        log = app.screen.query_one("#events", EventLog)
        assert app.focused is log  # the keys below scroll it
        events_view(app).activity.add_events(many(40))
        await until(pilot, lambda: log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y, "end")
        await pilot.press("k", "k", "pageup")
        await pilot.pause()
        assert not log.following
        held_at = log.scroll_y
        events_view(app).activity.add_events(many(5, start=40))
        await pilot.pause()
        assert log.scroll_y == held_at  # reading older events: the view stays put
        await pilot.press("g")
        await pilot.pause()
        assert log.scroll_y == 0
        await pilot.press("G")
        await until(pilot, lambda: log.following, "following again at the end")
        events_view(app).activity.add_events(many(5, start=45))
        await until(pilot, lambda: log.scroll_y == log.max_scroll_y, "the newest in view")


def top_line(log: EventLog) -> str:
    return log.lines[round(log.scroll_y)].text


async def test_a_full_log_stays_put_while_scrolled_up() -> None:
    """Issue 46, item 6: once the log holds its most lines, each new event drops
    the oldest, which moved what a reader scrolled up was reading; and `h`
    (the log written again) made it follow the newest. Neither moves it now."""
    app = make_app(mixed_scenario())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "tab")
        await pilot.pause()
        log = app.screen.query_one("#events", EventLog)
        log.max_lines = 60  # its 2000 reached sooner: the same trimming
        activity = events_view(app).activity
        activity.add_events(many(60))
        await until(pilot, lambda: log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y, "end")
        await pilot.press("pageup", "pageup")
        await pilot.pause()
        assert not log.following
        reading = top_line(log)
        for start in (60, 70):
            activity.add_events(many(10, start=start))
            await pilot.pause()
            assert top_line(log) == reading
        await pilot.press("h")
        await pilot.pause()
        assert not log.following and log.scroll_y < log.max_scroll_y


async def test_h_hides_and_shows_heartbeats() -> None:
    app = make_app(mixed_scenario())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("tab", "tab")
        await pilot.pause()
        log = app.screen.query_one("#events", EventLog)
        beats = many(3, EventKind.HEARTBEAT, start=100)
        for event in beats:
            app.board.note(event)
        events_view(app).activity.add_events(beats)
        await pilot.pause()
        assert "heartbeat" in log_text(log)
        await pilot.press("h")
        await pilot.pause()
        assert "heartbeat" not in log_text(log)
        assert "appeared" in log_text(log)  # the rest stays
        assert app.screen.query_one("#events-filter", Static).display
        events_view(app).activity.add_events(many(1, EventKind.HEARTBEAT, start=200))
        await pilot.pause()
        assert "heartbeat" not in log_text(log)
        await pilot.press("h")
        await pilot.pause()
        assert log_text(log).count("heartbeat") == 3


async def test_h_does_nothing_outside_the_events_view() -> None:
    app = make_app(mixed_scenario())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("h")
        await pilot.pause()
        await pilot.press("tab", "tab")
        await pilot.pause()
        assert app.current is View.EVENTS
        assert not events_view(app).activity.hide_heartbeats


async def test_the_operators_actions_are_events(scene: Scene) -> None:
    scene.write("deploy.lock", tower("deploy", heartbeat=600))
    scene.write("live.lock", tower("live", heartbeat=5))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        await type_into(pilot, "#reason", REASON)
        await press_confirm(pilot)
        # A release of a lock lockwatch does not hold is refused before any
        # dialog; a break whose compare-and-swap fails is a failed action.
        await open_action(pilot, scene.id("live.lock"))
        await type_into(pilot, "#reason", REASON)
        await type_into(pilot, "#must-type", "live")
        scene.paths["live.lock"].write_text(tower("live", heartbeat=1))  # rewritten meanwhile
        await press_confirm(pilot)
        await acted(pilot)
        kinds = [event.kind for event in app.board.events]
        assert EventKind.BROKEN in kinds
        assert EventKind.ACTION_FAILED in kinds
        failed = next(e for e in app.board.events if e.kind is EventKind.ACTION_FAILED)
        assert failed.name == "live" and failed.detail.startswith("break: ")
        await pilot.press("tab", "tab")
        await pilot.pause()
        text = log_text(app.screen.query_one("#events", EventLog))
        assert "broken" in text and "action_failed" in text
