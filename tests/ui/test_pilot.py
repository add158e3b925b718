"""The dashboard driven by its keys: filter, sort, details, pause, views, themes, help,
export, rows updated in place, the empty state and a source in error.

Every test runs the app headless (`run_test`) with fake feeds (tests/ui/fakes.py): the
clock is frozen at NOW and the app's own tick is an hour away, so time moves only when a
test advances the clock and calls `app.tick()` itself. Most tests use `five_locks()`,
small enough that every expected order can be written out by hand.
"""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text
from textual import events
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Input, Static
from textual.widgets._footer import FooterKey

from lockwatch.clock import FrozenClock
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.events import EventKind
from lockwatch.model.process import StaticProcesses
from lockwatch.model.report import lock_record, ls_json_bytes, records_json_array
from lockwatch.model.status import SourceStatus
from lockwatch.model.verdict import State
from lockwatch.sources.files.decoders import decode_file
from lockwatch.sources.remote.document import read_document
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.confirm import ConfirmScreen
from lockwatch.ui.contention import ContentionTree
from lockwatch.ui.keys import View
from lockwatch.ui.panels import EmptyState, HelpScreen, SourcesBar
from lockwatch.ui.table import Gone, LockTable, TableHeader
from tests.conftest import LOCAL_HOST, NOW, alive, iso, lock_file
from tests.facts_of import pg_of
from tests.ui.fakes import (
    INVOICES_XID,
    PG_FEED,
    PG_ROOT_ID,
    XID_TARGET,
    StaticFeed,
    _backend,
    _pg_lock,
    contention_view,
    empty_scenario,
    make_app,
    mixed_scenario,
    row_text,
    settle,
    until,
    view_of,
)
from tests.ui.test_actions_ui import Scene

SIZE = (120, 36)
FEED = "files"
ROOT = "/srv/locks"

# pid 100 runs (since an hour ago); every other pid is dead.
PROCESSES = StaticProcesses(alive(100))


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def tower(name: str, *, created: float, heartbeat: float, ttl: int = 60, pid: int = 100) -> str:
    """A tower-fleet/v1 lock (see tests/decoders/test_tower_fleet.py)."""
    return json.dumps(
        {
            "lock_version": "v1",
            "lock_name": name,
            "request_id": "req_abc123def456",
            "actor": "claude-code",
            "intent": "deploy-app",
            "intent_version": "1.2.0",
            "host_id": LOCAL_HOST,
            "pid": pid,
            "created_at": iso(ago(created)),
            "last_heartbeat_at": iso(ago(heartbeat)),
            "ttl_seconds": ttl,
            "metadata": {},
        },
        indent=2,
    )


def clawdbot(pid: int, acquired: float) -> str:
    return json.dumps(
        {
            "pid": pid,
            "session_id": "main",
            "acquired_at": iso(ago(acquired)),
            "hostname": LOCAL_HOST,
            "operation": "write:tasks.json",
        }
    )


def entry(path: str, content: str, mtime: datetime = NOW, now: datetime = NOW) -> Entry:
    (judged,) = judge([decode_file(lock_file(path, content, mtime))], PROCESSES, now, LOCAL_HOST)
    return judged


ZETA = f"file:{ROOT}/zeta-expired.lock"  # stale: heartbeat_expired, acquired 2000 s ago
MID = f"file:{ROOT}/mid.pid"  # stale: holder_dead, acquired 500 s ago (mtime)
OTHER = f"file:{ROOT}/broken.lock"  # invalid: lock_name "other" is not the file's name
ALPHA = f"file:{ROOT}/alpha-deploy.lock"  # active (late): heartbeat 50 s ago, ttl 60 s
MEMORY = "file:/srv/ws/memory/.lock"  # active clawdbot lock, acquired 5 s ago


def alpha_entry(heartbeat: float = 50) -> Entry:
    return entry(
        f"{ROOT}/alpha-deploy.lock", tower("alpha-deploy", created=100, heartbeat=heartbeat)
    )


def five_entries() -> list[Entry]:
    return [
        entry(f"{ROOT}/zeta-expired.lock", tower("zeta-expired", created=2000, heartbeat=1000)),
        entry(f"{ROOT}/mid.pid", "4242\n", mtime=ago(500)),
        entry(f"{ROOT}/broken.lock", tower("other", created=10, heartbeat=10)),
        alpha_entry(),
        entry("/srv/ws/memory/.lock", clawdbot(100, acquired=5)),
    ]


def watching(*roots: str) -> tuple[SourceStatus, ...]:
    return tuple(SourceStatus("file", root, "watching", updated_at=NOW) for root in roots)


def five_locks() -> ChangeSet:
    return ChangeSet(FEED, NOW, watching(ROOT), full=True, upserts=tuple(five_entries()))


# By state (worst first, then oldest first), by age (oldest first), by name, by source
# (all files: by format, then name).
BY_STATE = [ZETA, MID, OTHER, ALPHA, MEMORY]
BY_AGE = [ZETA, MID, ALPHA, OTHER, MEMORY]
BY_NAME = [ALPHA, MEMORY, MID, OTHER, ZETA]
BY_SOURCE = [MEMORY, MID, ALPHA, OTHER, ZETA]  # clawdbot, generic, tower-fleet/v1 x 3
SORT_TITLES = {"state": "STATE", "age": "AGE", "name": "NAME", "source": "SRC"}


def app_with(*change_sets: ChangeSet, **kwargs: Any) -> LockwatchApp:
    kwargs.setdefault("clock", FrozenClock(NOW))
    return make_app(list(change_sets) or [five_locks()], **kwargs)


def clock_of(app: LockwatchApp) -> FrozenClock:
    assert isinstance(app.clock, FrozenClock)
    return app.clock


def feed_of(app: LockwatchApp) -> StaticFeed:
    feed = app.feeds[0]
    assert isinstance(feed, StaticFeed)
    return feed


# --- reading the screen --------------------------------------------------------------------


def plain(renderable: Any) -> str:
    """What a Rich renderable (or a Static's content) says, without styles."""
    if isinstance(renderable, str):
        return renderable
    if isinstance(renderable, Text):
        return renderable.plain
    console = Console(file=io.StringIO(), width=200, color_system=None, legacy_windows=False)
    console.print(renderable)
    out = console.file
    assert isinstance(out, io.StringIO)
    return out.getvalue()


def static_text(app: LockwatchApp, selector: str) -> str:
    return plain(app.query_one(selector, Static).content)


def header_text(app: LockwatchApp) -> str:
    return plain(app.query_one("#sources", SourcesBar).content)


def detail_text(app: LockwatchApp) -> str:
    return static_text(app, "#detail Static")


async def exported(app: LockwatchApp) -> None:
    """Wait for the export worker if it is still running. Not `wait_for_complete()`
    alone: it waits for every worker, and the feeds' never complete (nor does an
    empty list help: it means every worker too)."""
    running = [worker for worker in app.workers if worker.group == "export"]
    if running:
        await app.workers.wait_for_complete(running)


def filter_input(app: LockwatchApp) -> Input:
    return app.query_one("#filter", Input)


# --- filter ----------------------------------------------------------------------------------


# Calls, not attributes: each assert looks afresh after the awaited keys (and mypy
# does not narrow a call's result as it would an attribute's).
def shown(widget: Widget) -> bool:
    return bool(widget.display)


def is_paused(app: LockwatchApp) -> bool:
    return app.paused


def showing(app: LockwatchApp, kind: type) -> bool:
    return isinstance(app.screen, kind)


async def test_slash_opens_the_filter_and_typing_filters() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.rows.ids == BY_STATE
        assert not app.query_one("#filter-bar").display
        await pilot.press("slash")
        assert app.query_one("#filter-bar").display
        assert app.focused is filter_input(app)
        await pilot.press(*"state:stale")
        await pilot.pause()
        assert app.rows.query.text == "state:stale"
        assert app.rows.ids == [ZETA, MID]
        assert all(app.board.verdict(i).state is State.STALE for i in app.rows.ids)
        assert "(2 shown)" in header_text(app)
        assert "filter: state:stale" in header_text(app)
        assert app.query_one("#table", LockTable).display


async def test_keys_typed_in_the_filter_box_are_text_not_commands() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"quit?step", "enter")
        await pilot.pause()
        assert app.is_running
        assert app.rows.query.text == "quit?step"
        assert not showing(app, HelpScreen)
        assert app.rows.sort == "state"
        assert not is_paused(app)
        assert app.theme == "lockwatch-dark"


@pytest.mark.parametrize("burst", ["queue", "stale", "?Tex"])
async def test_keys_typed_ahead_after_slash_all_go_to_the_filter(burst: str) -> None:
    # A paste, or typing while the app is busy: every key is queued before the
    # first is handled. Once `/` is in, none of them may reach a shortcut.
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        keys = [("slash", "/"), *((_key_name(ch), ch) for ch in burst)]
        for key, character in keys:  # as the terminal driver delivers them, unawaited
            event = events.Key(key, character)
            event.set_sender(app)
            assert app._driver is not None
            app._driver.send_message(event)
        await pilot.pause()
        await pilot.pause()
        assert app.is_running
        assert filter_input(app).value == burst
        assert not showing(app, HelpScreen)
        assert (app.rows.sort, app.paused, app.theme) == ("state", False, "lockwatch-dark")


def _key_name(character: str) -> str:
    return {"?": "question_mark"}.get(character, character)


def _deliver(app: LockwatchApp, *messages: events.Event) -> None:
    """As the terminal driver delivers input: all queued before any is handled."""
    assert app._driver is not None
    for message in messages:
        message.set_sender(app)
        app._driver.send_message(message)


def _burst(text: str) -> list[events.Event]:
    return [events.Key(_key_name(ch), ch) for ch in text]


async def test_tab_and_other_keys_after_slash_stay_in_the_filter() -> None:
    """Tab used to leave the box (the screen's focus_next), and the letters after
    it ran as commands: `e` exported, `t` changed theme, `q` quit."""
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"sta", "tab", "shift+tab", "f5", *"tesq")
        await pilot.pause()
        assert app.is_running
        assert filter_input(app).has_focus
        assert filter_input(app).value == "statesq"
        assert (app.rows.sort, app.paused, app.theme) == ("state", False, "lockwatch-dark")
        await pilot.press("enter", "s")  # applied: keys are commands again
        await pilot.pause()
        assert app.rows.query.text == "statesq" and app.rows.sort != "state"


async def test_a_key_after_a_burst_adds_to_the_burst() -> None:
    """The burst was in the box when it took the focus, and selected: the next key
    replaced it all."""
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _deliver(app, events.Key("slash", "/"), *_burst("queue"))
        await pilot.pause()
        await pilot.pause()
        await pilot.press("backspace", "x")
        await pilot.pause()
        assert filter_input(app).value == "queux"


async def test_enter_in_the_burst_applies_the_filter() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _deliver(app, events.Key("slash", "/"), *_burst("stale"), events.Key("enter", "\r"))
        await pilot.pause()
        await pilot.pause()
        assert app.rows.query.text == "stale"
        assert not filter_input(app).has_focus
        await pilot.press("s")
        await pilot.pause()
        assert app.rows.sort != "state" and filter_input(app).value == "stale"


async def test_a_paste_right_after_slash_goes_to_the_filter() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _deliver(app, events.Key("slash", "/"), events.Paste("state:stale"))
        await pilot.pause()
        await pilot.pause()
        assert filter_input(app).value == "state:stale"
        assert app.rows.ids == [ZETA, MID]


async def test_a_bad_term_shows_an_error_and_keeps_the_previous_filter() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"state:stale")
        await pilot.pause()
        assert app.rows.ids == [ZETA, MID]
        error = app.query_one("#filter-error", Static)
        assert not shown(error)
        filter_input(app).value = "state:zombie"  # as if pasted over the old filter
        await pilot.pause()
        assert shown(error)
        message = static_text(app, "#filter-error")
        assert "zombie" in message
        assert "unknown state" in message
        assert app.rows.query.text == "state:stale"
        assert app.rows.ids == [ZETA, MID]
        # Fixing it clears the error and applies the new filter.
        filter_input(app).value = "state:invalid"
        await pilot.pause()
        assert not shown(error)
        assert app.rows.ids == [OTHER]


async def test_a_term_typed_key_by_key_shows_the_error_while_it_is_incomplete() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"state:")
        await pilot.pause()
        assert app.query_one("#filter-error", Static).display
        assert "state: needs a value" in static_text(app, "#filter-error")
        await pilot.press(*"zombie")
        await pilot.pause()
        assert app.query_one("#filter-error", Static).display
        assert "zombie" in static_text(app, "#filter-error")
        # The last filter that parsed ("state", free text) is still applied.
        assert app.rows.query.text == "state"


async def test_enter_keeps_the_filter_and_returns_to_the_table() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"state:stale", "enter")
        await pilot.pause()
        table = app.query_one("#table", LockTable)
        assert app.focused is table
        assert app.rows.query.text == "state:stale"
        assert app.rows.ids == [ZETA, MID]
        assert app.query_one("#filter-bar").display  # still shows what is applied
        assert not shown(app.locks.detail)  # enter in the box did not open the details
        # Keys reach the table again.
        await pilot.press("down")
        assert table.selected == MID


async def test_enter_on_a_bad_filter_stays_in_the_box() -> None:
    """The table is filtered by the last filter that parsed ("state"), not by what
    the box says: enter does not leave the box behind that; fixing it does."""
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"state:zombie", "enter")
        await pilot.pause()
        box = filter_input(app)
        assert app.focused is box
        assert "zombie" in static_text(app, "#filter-error")
        await pilot.press(*["backspace"] * 6, *"stale", "enter")
        await pilot.pause()
        assert app.query_one("#table", LockTable).has_focus
        assert app.rows.query.text == "state:stale" and app.rows.ids == [ZETA, MID]


async def test_escape_in_the_box_clears_the_filter() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"state:stale")
        await pilot.pause()
        assert app.rows.ids == [ZETA, MID]
        await pilot.press("escape")
        await pilot.pause()
        assert app.rows.query.text == ""
        assert app.rows.ids == BY_STATE
        assert filter_input(app).value == ""
        assert not app.query_one("#filter-bar").display
        assert app.focused is app.query_one("#table", LockTable)
        assert "filter:" not in header_text(app)


async def test_escape_from_the_table_clears_a_kept_filter() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"state:stale", "enter")
        await pilot.pause()
        assert app.rows.ids == [ZETA, MID]
        await pilot.press("escape")
        await pilot.pause()
        assert app.rows.ids == BY_STATE
        assert filter_input(app).value == ""
        assert not app.query_one("#filter-bar").display


async def test_escape_closes_the_details_before_it_clears_the_filter() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"state:stale", "enter", "enter")
        await pilot.pause()
        assert shown(app.locks.detail)
        await pilot.press("escape")
        assert not shown(app.locks.detail)
        assert app.rows.ids == [ZETA, MID]
        await pilot.press("escape")
        assert app.rows.ids == BY_STATE


async def test_filter_given_at_start_applies() -> None:
    app = app_with(filter_text="state:stale")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.rows.ids == [ZETA, MID]
        assert app.query_one("#filter-bar").display
        assert filter_input(app).value == "state:stale"
        assert "filter: state:stale" in header_text(app)
        assert app.focused is app.query_one("#table", LockTable)


async def test_a_bad_filter_given_at_start_shows_everything() -> None:
    # The CLI refuses a bad --filter before the app starts; the app itself falls back.
    app = app_with(filter_text="state:zombie")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.rows.ids == BY_STATE


async def test_negated_term() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"!state:stale", "enter")
        await pilot.pause()
        assert app.rows.ids == [OTHER, ALPHA, MEMORY]
        assert not any(app.board.verdict(i).state is State.STALE for i in app.rows.ids)
        # Terms combine: not stale, and a tower-fleet lock. The box selects its text when
        # it opens again (typing replaces it): `end` to add to it.
        await pilot.press("slash", "end", *" format:tower", "enter")
        await pilot.pause()
        assert app.rows.query.text == "!state:stale format:tower"
        assert app.rows.ids == [OTHER, ALPHA]


async def test_free_text_and_quoted_terms() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"heartbeat")  # a reason code: heartbeat_expired, _late
        await pilot.pause()
        assert app.rows.ids == [ZETA, ALPHA]
        filter_input(app).value = 'name:"mid"'
        await pilot.pause()
        assert app.rows.ids == [MID]


async def test_filter_follows_new_change_sets() -> None:
    app = app_with(filter_text="state:stale")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.rows.ids == [ZETA, MID]
        # The memory lock's holder dies: it is stale now, so the filter lets it in.
        dead = entry("/srv/ws/memory/.lock", clawdbot(4343, acquired=5))
        feed_of(app).push(ChangeSet(FEED, NOW, upserts=(dead,)))
        await pilot.pause()
        assert app.rows.ids == [ZETA, MID, MEMORY]


# --- sort ------------------------------------------------------------------------------------


async def test_s_cycles_the_sort_and_the_order_follows() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        header = app.query_one("#table-header", TableHeader)
        assert (app.rows.sort, header.sort) == ("state", "state")
        assert app.rows.ids == BY_STATE
        for sort, expected in (
            ("age", BY_AGE),
            ("name", BY_NAME),
            ("source", BY_SOURCE),
            ("state", BY_STATE),
        ):
            await pilot.press("s")
            await pilot.pause()
            assert app.rows.sort == sort
            assert header.sort == sort
            assert f"sort: {sort}" in header_text(app)
            titles = str(header.render())
            assert titles.count("▼") == 1
            assert f"{SORT_TITLES[sort]}▼" in titles
            assert app.rows.ids == expected, sort


async def test_sort_orders_match_their_keys() -> None:
    """The same orders, checked against the locks themselves rather than by hand."""
    app = app_with(*mixed_scenario())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        rank = {State.STALE: 0, State.INVALID: 1, State.WAITING: 2, State.ACTIVE: 3}
        states = [rank[app.board.verdict(i).state] for i in app.rows.ids]
        assert states == sorted(states)
        assert len(app.rows.ids) == len(app.board)
        await pilot.press("s")  # age: oldest first, locks without a time last
        # A Postgres lock keeps no grant time: it sorts by how long it was seen held.
        stamps = [
            lock.acquired_at or (pg_of(lock).known_held_at if pg_of(lock) else None)
            for lock in (app.board.entries[i].lock for i in app.rows.ids)
        ]
        known = [s for s in stamps if s is not None]
        assert known == sorted(known)
        assert stamps[: len(known)] == known
        await pilot.press("s")  # name
        names = [app.board.entries[i].lock.name.lower() for i in app.rows.ids]
        assert names == sorted(names)
        await pilot.press("s")  # source
        sources = [app.board.entries[i].lock.source for i in app.rows.ids]
        assert sources == sorted(sources)


async def test_sort_keeps_the_selected_lock() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        table.select(ALPHA)
        await pilot.pause()
        for _ in range(4):
            await pilot.press("s")
            assert table.selected == ALPHA
            assert table.cursor == app.rows.index_of(ALPHA)


async def test_moving_in_the_table() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        assert (table.cursor, table.selected) == (0, ZETA)
        await pilot.press("up")  # already at the top: stays
        assert table.selected == ZETA
        await pilot.press("j", "j")
        assert table.selected == OTHER
        await pilot.press("k")
        assert table.selected == MID
        await pilot.press("G")
        assert (table.cursor, table.selected) == (4, MEMORY)
        await pilot.press("down")  # already at the bottom: stays
        assert table.selected == MEMORY
        await pilot.press("g")
        assert table.selected == ZETA
        await pilot.press("end")
        assert table.selected == MEMORY
        await pilot.press("home")
        assert table.selected == ZETA
        await pilot.press("pagedown")
        assert table.selected == MEMORY
        await pilot.press("pageup")
        assert table.selected == ZETA


# --- details ---------------------------------------------------------------------------------


async def test_enter_shows_the_highlighted_lock_and_follows_the_cursor() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        assert not shown(app.locks.detail)
        assert table.selected == ZETA
        await pilot.press("enter")
        await pilot.pause()
        assert shown(app.locks.detail)
        assert app.locks.detail.lock_id == ZETA
        text = detail_text(app)
        assert "STALE" in text
        assert "zeta-expired" in text
        assert "heartbeat_expired" in text
        assert f"{ROOT}/zeta-expired.lock" in text
        assert "claude-code" in text  # the holder's actor

        await pilot.press("down")
        await pilot.pause()
        assert table.selected == MID
        assert app.locks.detail.lock_id == MID
        text = detail_text(app)
        assert f"{ROOT}/mid.pid" in text
        assert "holder_dead" in text
        assert "zeta-expired" not in text

        await pilot.press("down", "down")
        await pilot.pause()
        assert app.locks.detail.lock_id == ALPHA
        text = detail_text(app)
        assert "alpha-deploy" in text
        assert "heartbeat_late" in text
        assert "ACTIVE" in text

        await pilot.press("enter")
        await pilot.pause()
        assert not shown(app.locks.detail)
        assert table.selected == ALPHA


async def test_details_are_drawn_on_screen() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await pilot.pause()
        pane = app.locks.detail
        assert pane.region.height > 0 and pane.region.width > 0
        assert app.screen.region.contains_region(pane.region)
        body = pane.query_one(Static)
        lines = [strip.text for strip in body.render_lines(Region(0, 0, *body.size))]
        assert "STALE" in lines[0] and "zeta-expired" in lines[0]
        assert any("heartbeat_expired" in line for line in lines)
        # The same words are in the exported screen.
        assert "zeta-expired" in app.export_screenshot()


async def test_enter_from_the_events_view_returns_to_a_usable_table() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("tab", "tab")
        assert view_of(app) is View.EVENTS
        await pilot.press("enter")
        await pilot.pause()
        assert view_of(app) is View.LOCKS
        assert shown(app.locks.detail)
        table = app.query_one("#table", LockTable)
        await pilot.press("down")
        assert table.selected == MID


async def test_enter_from_another_view_shows_the_details_even_if_they_were_open() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        assert shown(app.locks.detail)
        await pilot.press("tab", "tab")
        assert view_of(app) is View.EVENTS
        await pilot.press("enter")
        await pilot.pause()
        assert view_of(app) is View.LOCKS
        assert shown(app.locks.detail)


# --- pause -----------------------------------------------------------------------------------


def newcomer() -> Entry:
    return entry(f"{ROOT}/newcomer.lock", tower("newcomer", created=1, heartbeat=1))


async def test_p_holds_change_sets_back_and_applies_them_on_resume() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        feed = feed_of(app)
        await pilot.press("p")
        assert is_paused(app)
        assert "PAUSED" in header_text(app)
        assert "0 update(s) held" in header_text(app)

        entries_before = dict(app.board.entries)
        events_before = len(app.board.events)
        new_id = newcomer().lock.id
        feed.push(ChangeSet(FEED, NOW, upserts=(newcomer(),)))
        feed.push(ChangeSet(FEED, NOW, removed=(MID,)))
        await pilot.pause()
        assert app.board.entries == entries_before
        assert len(app.board.events) == events_before
        assert app.rows.ids == BY_STATE
        assert new_id not in app.board
        assert "PAUSED" in header_text(app)
        assert "2 update(s) held" in header_text(app)

        # Ticks while paused do not move the view's time.
        clock_of(app).advance(30)
        app.tick()
        await pilot.pause()
        assert app.now == NOW
        assert app.query_one("#table", LockTable).now == NOW

        await pilot.press("p")
        await pilot.pause()
        assert not is_paused(app)
        assert "PAUSED" not in header_text(app)
        assert new_id in app.board
        assert MID not in app.board
        assert new_id in app.rows.ids
        assert MID not in app.rows.ids
        assert app.now == NOW + timedelta(seconds=30)
        kinds = [(e.kind, e.lock_id) for e in list(app.board.events)[events_before:]]
        assert (EventKind.APPEARED, new_id) in kinds
        assert (EventKind.RELEASED, MID) in kinds


async def test_pause_and_resume_with_nothing_held() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("p", "p")
        await pilot.pause()
        assert not is_paused(app)
        assert app.rows.ids == BY_STATE
        assert "PAUSED" not in header_text(app)


# --- time alone ------------------------------------------------------------------------------


async def test_a_lock_turns_stale_on_tick_when_its_heartbeat_expires() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        feed = feed_of(app)
        emitted = len(feed.emitted)
        verdict = app.board.verdict(ALPHA)
        assert verdict.state is State.ACTIVE
        assert "heartbeat_late" in verdict.codes
        assert "active" in row_text(app, ALPHA)
        app.query_one("#table", LockTable).select(ALPHA)
        await pilot.press("enter")
        await pilot.pause()
        assert "ACTIVE" in detail_text(app)

        # 60 s after the heartbeat: not past the ttl yet (stale when > ttl).
        clock_of(app).advance(10)
        app.tick()
        await pilot.pause()
        assert app.board.verdict(ALPHA).state is State.ACTIVE

        clock_of(app).advance(1)
        app.tick()
        await pilot.pause()
        verdict = app.board.verdict(ALPHA)
        assert verdict.state is State.STALE
        assert "heartbeat_expired" in verdict.codes
        assert app.now == NOW + timedelta(seconds=11)
        stale = [e for e in app.board.events if e.kind is EventKind.BECAME_STALE]
        assert [e.lock_id for e in stale] == [ALPHA]
        assert stale[0].at == NOW + timedelta(seconds=11)
        assert len(feed.emitted) == emitted  # no file event: time alone did it
        # The row is drawn stale and moved among the stale ones.
        assert app.rows.ids == [ZETA, MID, ALPHA, OTHER, MEMORY]
        assert row_text(app, ALPHA).startswith("  stale")  # after the (empty) mark column
        assert "heartbeat_expired" in row_text(app, ALPHA)
        assert app.board.counts[State.STALE] == 3
        # The open detail pane follows, and the selection stayed on the lock.
        assert app.query_one("#table", LockTable).selected == ALPHA
        assert "STALE" in detail_text(app)
        assert "heartbeat_expired" in detail_text(app)
        assert "4 stale" not in header_text(app) and "3 stale" in header_text(app)


async def test_a_lock_turning_stale_on_tick_moves_between_filters() -> None:
    app = app_with(filter_text="state:active")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.rows.ids == [ALPHA, MEMORY]
        clock_of(app).advance(11)
        app.tick()
        await pilot.pause()
        assert app.rows.ids == [MEMORY]
        # The selected lock left the filter by itself: said so, never swapped for MEMORY.
        table = app.query_one("#table", LockTable)
        assert selected(table) is None
        assert "out of view: alpha-deploy no longer matches the filter" in gone_line(app)
        await pilot.press("j")
        assert selected(table) == MEMORY
        await pilot.press("slash", *"state:stale", "enter")
        await pilot.pause()
        assert app.rows.ids == [ZETA, MID, ALPHA]


async def test_a_tick_redraws_ages_without_new_data() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert " 33m20s " in row_text(app, ZETA)  # acquired 2000 s ago
        emitted = len(feed_of(app).emitted)
        clock_of(app).advance(120)
        app.tick()
        await pilot.pause()
        assert app.query_one("#table", LockTable).now == NOW + timedelta(seconds=120)
        assert " 35m20s " in row_text(app, ZETA)
        assert " 33m20s " not in row_text(app, ZETA)
        assert len(feed_of(app).emitted) == emitted


# --- views, themes, help ---------------------------------------------------------------------


async def test_tab_cycles_the_views() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert view_of(app) is View.LOCKS
        seen = []
        for _ in range(3):
            await pilot.press("tab")
            await pilot.pause()
            seen.append(app.current)
        assert seen == [View.CONTENTION, View.EVENTS, View.LOCKS]
        assert app.focused is app.query_one("#table", LockTable)


async def test_t_cycles_the_built_in_themes() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.theme == "lockwatch-dark"
        seen = []
        for _ in range(3):
            await pilot.press("t")
            await pilot.pause()
            seen.append(app.theme)
        assert seen == ["lockwatch-light", "incident", "lockwatch-dark"]
        # Each theme's state colours reach the CSS.
        assert app.get_css_variables()["lw-stale"] == app.lock_themes[app.theme].states["stale"]


async def test_theme_given_at_start() -> None:
    app = app_with(theme="incident")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.theme == "incident"
        await pilot.press("t")
        assert app.theme == "lockwatch-dark"


async def test_help_opens_and_closes_and_keys_behind_it_do_nothing() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert showing(app, HelpScreen)
        help_text = plain(app.screen.query_one(Static).content)
        assert "filter" in help_text and "pause" in help_text

        await pilot.press("tab", "s", "p", "t", "enter")
        await pilot.pause()
        assert showing(app, HelpScreen)
        assert view_of(app) is View.LOCKS
        assert app.rows.sort == "state"
        assert not is_paused(app)
        assert app.theme == "lockwatch-dark"
        assert not shown(app.locks.detail)

        await pilot.press("escape")
        await pilot.pause()
        assert not showing(app, HelpScreen)
        assert app.screen is app.screen_stack[0]
        await pilot.press("tab")
        assert view_of(app) is View.CONTENTION


async def test_question_mark_closes_the_help_too() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert showing(app, HelpScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        assert not showing(app, HelpScreen)


# --- export ----------------------------------------------------------------------------------


async def test_e_exports_json_and_markdown(tmp_path: Path) -> None:
    app = app_with(*mixed_scenario(), export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await exported(app)
        await until(pilot, lambda: len(list(tmp_path.iterdir())) >= 2, "two export files")
        await pilot.pause()
        files = sorted(p.name for p in tmp_path.iterdir())
        stem = "lockwatch-incident-" + NOW.strftime("%Y%m%dT%H%M%SZ")
        assert files == [f"{stem}.json", f"{stem}.md"]
        document = json.loads((tmp_path / f"{stem}.json").read_text(encoding="utf-8"))
        assert document["schema"] == "lockwatch.incident/1"
        assert document["host"] == LOCAL_HOST
        assert len(document["locks"]) == len(app.board)
        assert {lock["id"] for lock in document["locks"]} == set(app.board.entries)
        markdown = (tmp_path / f"{stem}.md").read_text(encoding="utf-8")
        assert markdown.startswith("# lockwatch incident")
        for path in tmp_path.iterdir():
            assert path.stat().st_mode & 0o777 == 0o600
        # A second export the same second takes a new name, never overwrites.
        await pilot.press("e")
        await exported(app)
        await until(pilot, lambda: len(list(tmp_path.iterdir())) >= 4, "four export files")
        assert (tmp_path / f"{stem}-2.json").exists()
        assert (tmp_path / f"{stem}-2.md").exists()


async def test_export_where_no_directory_can_be_made_says_so(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    impossible = tmp_path / "a-file" / "nope"
    app = app_with(export_dir=impossible)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await exported(app)
        await until(
            pilot,
            lambda: any("could not write" in str(n.message) for n in app._notifications),
            "an error notification",
        )
        assert not impossible.exists()


async def test_export_goes_to_the_user_state_directory_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await exported(app)
        await until(pilot, lambda: any((tmp_path / "state").rglob("*.md")), "the export")
    (md,) = (tmp_path / "state" / "lockwatch" / "incidents").glob("lockwatch-incident-*.md")
    assert oct(md.parent.stat().st_mode & 0o777) == "0o700"
    assert not list(tmp_path.glob("lockwatch-incident-*"))  # not the current directory


async def test_export_carries_the_filter(tmp_path: Path) -> None:
    app = app_with(export_dir=tmp_path, filter_text="state:stale")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await exported(app)
        await until(pilot, lambda: len(list(tmp_path.glob("*.json"))) == 1, "the json export")
        (path,) = tmp_path.glob("*.json")
        document = json.loads(path.read_text(encoding="utf-8"))
        assert document["filter"] == "state:stale"


# --- rows updated in place -------------------------------------------------------------------


async def test_a_change_keeps_the_selection_on_its_lock_when_rows_move() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        await pilot.press("down", "down", "down")
        assert table.selected == ALPHA
        assert table.cursor == 3
        await pilot.press("enter")
        feed = feed_of(app)

        # Another lock moves above the selected one: the cursor follows ALPHA down.
        dead = entry("/srv/ws/memory/.lock", clawdbot(4343, acquired=5))
        feed.push(ChangeSet(FEED, NOW, upserts=(dead,)))
        await pilot.pause()
        assert app.rows.ids == [ZETA, MID, MEMORY, OTHER, ALPHA]
        assert table.selected == ALPHA
        assert table.cursor == 4
        assert app.locks.detail.lock_id == ALPHA

        # The selected lock itself changes and moves: still selected, updated in place.
        expired = alpha_entry(heartbeat=500)
        feed.push(ChangeSet(FEED, NOW, upserts=(expired,)))
        await pilot.pause()
        assert app.rows.ids == [ZETA, MID, ALPHA, MEMORY, OTHER]
        assert len(app.rows.ids) == len(set(app.rows.ids)) == 5
        assert table.selected == ALPHA
        assert table.cursor == 2
        assert app.board.entries[ALPHA] is expired
        assert row_text(app, ALPHA).startswith("  stale")
        assert "heartbeat_expired" in detail_text(app)
        # Keys move from where the lock is now.
        await pilot.press("down")
        assert table.selected == MEMORY


async def test_a_moved_selection_is_scrolled_into_view() -> None:
    # 60 live pid files (pid 100 runs), more than the table's height.
    many = [entry(f"{ROOT}/job-{n:02d}.pid", "100\n", mtime=ago(1000 - n)) for n in range(60)]
    app = app_with(ChangeSet(FEED, NOW, watching(ROOT), full=True, upserts=tuple(many)))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        last = many[-1].lock.id
        await pilot.press("end")
        assert table.selected == last
        assert table.scroll_offset.y > 0
        assert row_text(app, last).startswith("  active")
        # Its holder dies: it is stale now, first in the table; the view follows it.
        dead = entry(f"{ROOT}/job-59.pid", "4242\n", mtime=ago(1000 - 59))
        feed_of(app).push(ChangeSet(FEED, NOW, upserts=(dead,)))
        await pilot.pause()
        assert app.rows.ids[0] == last
        assert (table.selected, table.cursor) == (last, 0)
        assert table.scroll_offset.y == 0
        assert row_text(app, last).startswith("  stale")


async def test_a_change_that_keeps_the_order_redraws_the_row() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        table.select(MID)
        await pilot.pause()
        assert "4242" in row_text(app, MID)
        # Another dead pid: same state, same age, same place; the holder changes.
        feed_of(app).push(
            ChangeSet(FEED, NOW, upserts=(entry(f"{ROOT}/mid.pid", "4343\n", mtime=ago(500)),))
        )
        await pilot.pause()
        assert app.rows.ids == BY_STATE
        assert table.selected == MID
        assert "4343" in row_text(app, MID)
        assert "4242" not in row_text(app, MID)
        changed = [e for e in app.board.events if e.kind is EventKind.HOLDER_CHANGED]
        assert [e.lock_id for e in changed] == [MID]


def selected(table: LockTable) -> str | None:
    return table.selected


def gone_of(table: LockTable) -> Gone | None:
    return table.gone


def tree_lock(tree: ContentionTree) -> str | None:
    return tree.selected_lock


def tree_gone(tree: ContentionTree) -> Text | None:
    return tree.gone


async def test_rows_coming_and_going_above_keep_the_selection_on_its_lock() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        await pilot.press("j", "j", "j")
        assert (selected(table), table.cursor) == (ALPHA, 3)
        feed = feed_of(app)
        # A new stale lock above it: the cursor goes down with ALPHA.
        new = entry(f"{ROOT}/new.pid", "4343\n", mtime=ago(9000))
        feed.push(ChangeSet(FEED, NOW, upserts=(new,)))
        await pilot.pause()
        assert app.rows.ids[0] == new.lock.id
        assert (selected(table), table.cursor) == (ALPHA, 4)
        # Two rows above it go: the cursor goes up with ALPHA.
        feed.push(ChangeSet(FEED, NOW, removed=(ZETA, new.lock.id)))
        await pilot.pause()
        assert (selected(table), table.cursor) == (ALPHA, 2)
        assert gone_of(table) is None
        await pilot.press("s", "s")  # by name: ALPHA first
        assert (selected(table), table.cursor) == (ALPHA, 0)


def gone_line(app: LockwatchApp) -> str:
    line = app.query_one("#gone-line", Static)
    return plain(line.content) if line.display else ""


async def test_the_selected_lock_gone_is_said_gone_never_replaced_by_another() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        await pilot.press("j", "j", "enter")
        assert selected(table) == OTHER
        clock_of(app).advance(7)
        app.tick()
        feed_of(app).push(ChangeSet(FEED, clock_of(app).now(), removed=(OTHER,)))
        await pilot.pause()
        clock_of(app).advance(5)
        app.tick()
        await pilot.pause()
        # No lock is selected, and the pane does not show the one that took its row.
        assert selected(table) is None
        gone = gone_of(table)
        assert gone is not None and gone.lock_id == OTHER
        assert app.locks.selected_lock() is None
        detail = detail_text(app)
        seen = (NOW + timedelta(seconds=7)).strftime("%H:%M:%S")
        assert detail.startswith(
            f"✖ gone: other — last seen {seen} (5s ago), was invalid held by 100@testhost"
        ), detail
        assert "lock_name" in detail  # its last facts: the reason it was invalid
        assert "alpha-deploy" not in detail
        assert gone_line(app) == ""  # the open pane says it: not twice at 80x24
        # No row is drawn as the cursor.
        cursor = table._styles()["cursor"]
        drawn = [table.render_line(y) for y in range(len(app.rows))]
        assert not any(
            seg.style and cursor.bgcolor == seg.style.bgcolor for s in drawn for seg in s
        )
        await pilot.press("escape")  # the pane closed: the line above the table says it
        assert f"gone: other — last seen {seen}" in gone_line(app)
        assert gone_of(table) is not None
        # Until the operator moves: down is the row now where it was.
        await pilot.press("enter", "j")
        assert selected(table) == ALPHA and gone_of(table) is None
        assert "alpha-deploy" in detail_text(app) and "gone" not in detail_text(app)
        assert gone_line(app) == ""


async def test_up_from_a_gone_lock_is_the_row_above_it() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        table.select(OTHER)
        await pilot.pause()
        feed_of(app).push(ChangeSet(FEED, NOW, removed=(OTHER,)))
        await pilot.pause()
        assert gone_of(table) is not None
        assert "gone: other" in gone_line(app)  # the pane closed: the line says it
        await pilot.press("k")
        assert selected(table) == MID and gone_of(table) is None


async def test_a_gone_lock_written_again_is_selected_again() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        table.select(MID)
        await pilot.pause()
        feed = feed_of(app)
        feed.push(ChangeSet(FEED, NOW, removed=(MID,)))
        await pilot.pause()
        assert gone_of(table) is not None and selected(table) is None
        feed.push(ChangeSet(FEED, NOW, upserts=(entry(f"{ROOT}/mid.pid", "4343\n"),)))
        await pilot.pause()
        assert selected(table) == MID and gone_of(table) is None


async def test_a_selected_lock_that_leaves_the_filter_is_said_out_of_view() -> None:
    app = app_with(filter_text="state:stale")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        table.select(MID)
        await pilot.pause()
        # Its pid file now names a running process: active, no longer stale.
        feed_of(app).push(
            ChangeSet(FEED, NOW, upserts=(entry(f"{ROOT}/mid.pid", "100\n", mtime=ago(500)),))
        )
        await pilot.pause()
        assert app.rows.ids == [ZETA]
        assert selected(table) is None
        assert (
            "out of view: mid no longer matches the filter 'state:stale' — now active held by 100"
            in (gone_line(app))
        )
        # The operator's own filter change is theirs: escape clears it, and the
        # lock is there again, selected.
        await pilot.press("escape")
        assert selected(table) == MID and gone_of(table) is None


async def test_the_operators_filter_hiding_the_selected_lock_moves_to_a_row() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        table.select(ALPHA)
        await pilot.pause()
        await pilot.press("slash", *"state:stale", "enter")
        await until(pilot, lambda: app.rows.ids == [ZETA, MID], "the filter applied")
        assert gone_of(table) is None and selected(table) in (ZETA, MID)


# --- empty state and sources -----------------------------------------------------------------


async def test_no_locks_shows_the_empty_state_naming_what_is_watched() -> None:
    app = app_with(*empty_scenario())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        empty = app.query_one("#empty", EmptyState)
        assert shown(empty)
        assert not app.query_one("#table", LockTable).display
        text = static_text(app, "#empty")
        assert "No locks right now" in text
        assert "/srv/locks" in text
        assert "watching" in text
        # A lock appears: the table comes back.
        feed_of(app).push(ChangeSet(FEED, NOW, upserts=(newcomer(),)))
        await pilot.pause()
        assert not shown(empty)
        assert app.query_one("#table", LockTable).display
        assert app.rows.ids == [newcomer().lock.id]


async def test_before_any_source_reports_the_empty_state_says_it_is_looking() -> None:
    app = make_app(feeds=[StaticFeed(FEED)], clock=FrozenClock(NOW))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.query_one("#empty", EmptyState).display
        assert "Looking for locks" in static_text(app, "#empty")


async def test_a_filter_hiding_everything_says_how_many_it_hides() -> None:
    app = app_with()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"name:nothing-like-this", "enter")
        await pilot.pause()
        assert app.rows.ids == []
        assert app.query_one("#empty", EmptyState).display
        assert not app.query_one("#table", LockTable).display
        text = static_text(app, "#empty")
        assert "name:nothing-like-this" in text
        assert "5 hidden" in text
        await pilot.press("escape")
        await pilot.pause()
        assert not app.query_one("#empty", EmptyState).display
        assert app.rows.ids == BY_STATE


async def test_a_source_in_error_shows_its_reason_in_the_header() -> None:
    missing = SourceStatus("file", "/srv/missing", "error", reason="does not exist")
    app = app_with(ChangeSet(FEED, NOW, (missing,), full=True))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = header_text(app)
        assert "/srv/missing" in text
        assert "error" in text
        assert "does not exist" in text
        # The empty state says it too, and an event records it.
        assert "does not exist" in static_text(app, "#empty")
        sources = [e for e in app.board.events if e.kind is EventKind.SOURCE]
        assert [e.detail for e in sources] == ["error: does not exist"]


async def test_a_source_recovering_updates_the_header() -> None:
    missing = SourceStatus("file", ROOT, "error", reason="does not exist")
    app = app_with(ChangeSet(FEED, NOW, (missing,), full=True))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "does not exist" in header_text(app)
        feed_of(app).push(five_locks())
        await pilot.pause()
        text = header_text(app)
        assert "does not exist" not in text
        assert f"{ROOT} watching" in text
        assert "5 locks" in text


async def test_filter_text_that_looks_like_markup_is_only_text() -> None:
    """`[/` in a filter once crashed the app (parsed as markup in the empty state)."""
    app = app_with(filter_text="zzz[/x]")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert app.rows.ids == []
        await pilot.press("slash", *"pid:[/")
        await pilot.pause()
        assert app.is_running
        assert app.rows.query.text == "pid"  # the last good text; `pid:[/` is refused
        error = app.query_one("#filter-error", Static)
        assert shown(error) and "pid" in str(error.render())


# --- what the footer and the palette offer, and actions on a lock gone ------------------------

REMOTE_URL = "http://db7:9464"


def remote_locks() -> ChangeSet:
    """Another host's locks as the dashboard gets them from its `lockwatch serve`:
    written by the real document writer (model/report.py), read by the real reader
    (sources/remote/document.py)."""
    records = [lock_record(e.lock, e.verdict, NOW) for e in five_entries()]
    data = b"".join(ls_json_bytes(NOW, "db7", [records_json_array(records)], []))
    listing = read_document(data, REMOTE_URL, local_host=LOCAL_HOST)
    return ChangeSet(
        "remote",
        NOW,
        (SourceStatus("remote", REMOTE_URL, "connected", updated_at=NOW),),
        full=True,
        upserts=tuple(judge(listing.locks, StaticProcesses(), NOW, LOCAL_HOST)),
    )


def footer_words(app: LockwatchApp) -> set[str]:
    return {key.description for key in app.screen.query(FooterKey) if key.description}


async def test_the_footer_and_palette_offer_only_what_the_selected_rows_source_provides(
    tmp_path: Path,
) -> None:
    remote = remote_locks()
    remote_id = remote.upserts[0].lock.id
    app = app_with(five_locks(), remote, actions=Scene(tmp_path).session())
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        table.select(ZETA)  # a lock file here: break, steal, mark
        await pilot.pause()
        await until(pilot, lambda: {"Break", "Steal", "Mark"} <= footer_words(app), "file keys")
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Break lock", "Steal lock", "Mark or unmark"} <= titles
        table.select(remote_id)  # another host's: acted on there, never here
        await pilot.pause()
        await until(pilot, lambda: not {"Break", "Steal", "Mark"} & footer_words(app), "none")
        assert {"Help", "Filter", "Quit"} <= footer_words(app)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert not {"Break lock", "Steal lock", "Mark or unmark", "Release lock"} & titles
        assert "Copy lock id" in titles
        # Pressed anyway, its keys open no dialog and mark nothing; b and S say
        # where to act (the command to run on its host).
        await pilot.press("b", "S", "space")
        await pilot.pause()
        assert app.screen is app.locks and not app.marks
        said = [f"{n.title}: {n.message}" for n in app._notifications]
        assert any(s.startswith("cannot break") and "lockwatch break" in s for s in said), said
        assert any(s.startswith("cannot steal") for s in said), said
        # With rows marked, b breaks the marked ones: offered on any row.
        table.select(ZETA)
        await pilot.press("space")
        table.select(remote_id)
        await pilot.pause()
        await until(pilot, lambda: "Break" in footer_words(app), "b for the marked rows")


async def test_an_action_on_a_gone_lock_is_refused_and_touches_nothing(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    app = app_with(actions=scene.session())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one("#table", LockTable)
        table.select(MID)  # stale: b would need no typed name
        await pilot.pause()
        feed_of(app).push(ChangeSet(FEED, NOW, removed=(MID,)))
        await pilot.pause()
        assert gone_of(table) is not None
        # The keys stay (they said Break a moment ago), and say why nothing happens.
        assert "Break" in footer_words(app)
        await pilot.press("b")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        said = [f"{n.title}: {n.message}" for n in app._notifications]
        assert any(
            s.startswith("cannot break: gone: mid — last seen") and "Nothing done" in s
            for s in said
        ), said
        await pilot.press("S")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert scene.records() == []  # nothing asked of the action core


def contention_tree(app: LockwatchApp) -> ContentionTree:
    return contention_view(app).sessions


async def test_the_contention_cursor_follows_its_session_and_says_when_it_is_gone(
    tmp_path: Path,
) -> None:
    app = make_app(mixed_scenario(), actions=Scene(tmp_path).session())
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        app.show_view(View.CONTENTION)
        await until(pilot, lambda: view_of(app) is View.CONTENTION, "the contention view")
        tree = contention_tree(app)
        await until(pilot, lambda: tree_lock(tree) == PG_ROOT_ID, "on the root blocker")
        await pilot.press("j")  # pid 5101, blocking 5300
        chosen = tree_lock(tree)
        assert chosen is not None and ":5101:" in chosen
        line = tree.cursor_line
        # A new session waits on the root, listed before 5101: the cursor stays on 5101.
        pg = app.feeds[1]
        assert isinstance(pg, StaticFeed)
        early = next(c for c in mixed_scenario() if c.feed == PG_FEED)
        newcomer = _backend(
            5000, user="billing", application="billing-cron", client="10.0.3.30",
            state="active", query="UPDATE invoices SET x = 1 WHERE id = 1207",
            state_for=3, xact_for=3, waiting=True,
        )  # fmt: skip
        waits = _pg_lock(
            backend=newcomer, locktype="transactionid", mode="ShareLock", target=XID_TARGET,
            name=INVOICES_XID, granted=False, wait_start=ago(3), blocked_by=(4242,),
        )  # fmt: skip
        (judged,) = judge([waits], StaticProcesses(), NOW, LOCAL_HOST)
        pg.push(ChangeSet(PG_FEED, NOW, early.statuses, upserts=(judged,)))
        await pilot.pause()
        assert tree.get_node_at_line(line) is not None
        assert tree_lock(tree) == chosen and tree.cursor_line == line + 1
        # 5101's session ends: its line says gone, the cursor on no session.
        pg.push(
            ChangeSet(
                PG_FEED, NOW, early.statuses,
                removed=tuple(e.lock.id for e in early.upserts if ":5101:" in e.lock.id),
            )
        )  # fmt: skip
        await pilot.pause()
        assert tree_lock(tree) is None
        said_gone = tree_gone(tree)
        assert said_gone is not None and said_gone.plain.startswith("✖ gone: pid 5101")
        await pilot.press("b")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        said = [f"{n.title}: {n.message}" for n in app._notifications]
        assert any(s.startswith("cannot break: that session is gone") for s in said), said
        await pilot.press("j")
        assert tree_gone(tree) is None
