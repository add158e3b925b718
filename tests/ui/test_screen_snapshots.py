"""Snapshot tests of issue 46's 80x24 clutter, at 80x24, 120x40 and 160x45: the
header's counts on one line, Contention's lines cut at words, the terminate
dialog with no scrollbar and no toast over its fields, and the table after the
operator's own break (the cursor on the next row, no "✖ gone" line).

The SVGs live in tests/ui/__snapshots__/test_screen_snapshots/; after a deliberate
change: `.venv/bin/pytest -n0 tests/ui/test_screen_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from lockwatch.actions.session import ActionSession
from lockwatch.model.changes import ChangeSet
from lockwatch.ui import flow
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.confirm import ConfirmScreen
from tests.ui.fakes import (
    FILES_FEED,
    NOW,
    PG_ROOT_ID,
    TOWER,
    StaticFeed,
    make_app,
    mixed_scenario,
    sentinels_scenario,
    settle,
)
from tests.ui.test_action_snapshots import actions, app_with, on
from tests.ui.test_snapshots import keys

__all__ = ["actions"]  # the fixture, used by name

SnapCompare = Callable[..., bool]
RunBefore = Callable[[Pilot[Any]], Awaitable[None]]

SIZES = pytest.mark.parametrize(
    "size", [(80, 24), (120, 40), (160, 45)], ids=["80x24", "120x40", "160x45"]
)
STALE_HEARTBEAT_ID = f"file:{TOWER}/home-portal-staging.lock"


@SIZES
def test_header_counts_on_one_line(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """Every state counted (1 unknown, 1 free too): one line, the sort dropped
    where it would wrap (the STATE▼ title says it)."""
    app = make_app([*mixed_scenario(), sentinels_scenario()])
    assert snap_compare(app, terminal_size=size, run_before=keys())


@SIZES
def test_contention_lines_cut_at_words(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """tab, then Right three times: nothing scrolls sideways; long lines end at a
    whole word or part."""
    app = make_app(mixed_scenario())
    assert snap_compare(app, terminal_size=size, run_before=keys("tab", "right", "right", "right"))


@SIZES
def test_terminate_dialog_after_a_toast(
    snap_compare: SnapCompare,
    size: tuple[int, int],
    actions: ActionSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """b on the root blocker, escape (`cancelled — nothing done` toasts), b again,
    enter with no reason: no toast over the name field or the buttons (the hint
    line says a reason is required), the facts' overflow said in words. The toast
    is pinned: on a loaded machine its three seconds could pass before the picture."""
    monkeypatch.setattr(flow, "SAY_SECONDS", 3600.0)

    async def run_before(pilot: Pilot[Any]) -> None:
        await on(PG_ROOT_ID, "b")(pilot)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(pilot.app.screen, ConfirmScreen)

    assert snap_compare(app_with(actions), terminal_size=size, run_before=run_before)


@SIZES
def test_the_row_after_a_break(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """The selected lock broken by the operator, then gone from its feed: the
    cursor on the row that took its place, no "✖ gone" line above the table."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await keys(select=STALE_HEARTBEAT_ID)(pilot)
        app = pilot.app
        assert isinstance(app, LockwatchApp)
        files = next(f for f in app.feeds if isinstance(f, StaticFeed) and f.name == FILES_FEED)
        app.acted_on([STALE_HEARTBEAT_ID])  # as the flow says once the break is done
        files.push(ChangeSet(FILES_FEED, NOW, removed=(STALE_HEARTBEAT_ID,)))
        await settle(pilot)
        table = app.locks.table
        assert table.gone is None and table.selected not in (None, STALE_HEARTBEAT_ID)

    assert snap_compare(make_app(mixed_scenario()), terminal_size=size, run_before=run_before)
