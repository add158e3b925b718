"""Snapshot tests of the action screens: the confirmations for break (stale, and active
with the name to type), steal, a bulk break of marked rows, and quitting while lockwatch
holds a lock for the operator.

The locks are the mixed scenario's (tests/ui/fakes.py), at fixed fake paths, so what the
screens say (paths, effects, hashes) never depends on where the tests run; the action
session's roots cover those paths. Nothing is executed: every snapshot is taken with
the confirmation open, Cancel focused. The operator is named and lockwatch's pid is
fixed, since the steal's effect names both.

The SVGs live in tests/ui/__snapshots__/test_action_snapshots/; after a deliberate change:

    .venv/bin/pytest tests/ui/test_action_snapshots.py --snapshot-update
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from lockwatch.actions import session as session_module
from lockwatch.actions.session import ActionSession, HeldFile
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.confirm import ConfirmScreen, QuitScreen
from lockwatch.ui.table import LockTable
from tests.ui.fakes import (
    LOCAL_HOST,
    TOWER,
    frozen_clock,
    make_app,
    mixed_scenario,
    settle,
)

SnapCompare = Callable[..., bool]
RunBefore = Callable[[Pilot[Any]], Awaitable[None]]

MAIN = (120, 36)
ROOTS = ("/srv", "/home", "/run")  # the mixed scenario's file roots
OPERATOR = "alice"
LOCKWATCH_PID = 31337
STALE = f"file:{TOWER}/home-portal-staging.lock"  # tower-fleet, heartbeat expired
ACTIVE = f"file:{TOWER}/money-tracker-production.lock"  # tower-fleet, fresh heartbeat
STALE_PIDFILE = "file:/run/report-gen.pid"  # generic, holder dead
STALE_LOOP = "file:/home/dev/proj/.loops/.running/docs-sweep.lock"  # little-loops, loop dead


@pytest.fixture
def actions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ActionSession:
    # The steal's effect names lockwatch's pid: the same in every run.
    monkeypatch.setattr(session_module, "os", types.SimpleNamespace(getpid=lambda: LOCKWATCH_PID))
    return ActionSession(
        clock=frozen_clock(),
        host=LOCAL_HOST,
        roots=ROOTS,
        audit_log=tmp_path / "audit.jsonl",
        operator=OPERATOR,
    )


def app_with(actions: ActionSession, **kwargs: Any) -> LockwatchApp:
    return make_app(mixed_scenario(), actions=actions, **kwargs)


async def _select(pilot: Pilot[Any], lock_id: str) -> None:
    app = pilot.app
    assert isinstance(app, LockwatchApp)
    assert lock_id in app.board, lock_id
    app.query_one("#table", LockTable).select(lock_id)
    await pilot.pause()


def on(lock_id: str, *pressed: str, expect: type = ConfirmScreen) -> RunBefore:
    """A run_before: wait for the feeds, select `lock_id`, press `pressed`."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await _select(pilot, lock_id)
        await pilot.press(*pressed)
        await settle(pilot)
        assert isinstance(pilot.app.screen, expect), pilot.app.screen

    return run_before


def test_break_confirmation_of_a_stale_lock(snap_compare: SnapCompare, actions: Any) -> None:
    """b on a tower-fleet lock whose heartbeat expired: the lock, holder, state, reasons,
    the rename into the tombstone; a reason to give, Cancel focused, Break disabled."""
    app = app_with(actions)
    assert snap_compare(app, terminal_size=MAIN, run_before=on(STALE, "b"))


def test_break_confirmation_of_an_active_lock(snap_compare: SnapCompare, actions: Any) -> None:
    """b on a lock that is not stale: the warning, and its name to type."""
    app = app_with(actions)
    assert snap_compare(app, terminal_size=MAIN, run_before=on(ACTIVE, "b"))


def test_steal_confirmation(snap_compare: SnapCompare, actions: Any) -> None:
    """S on a stale tower-fleet lock: the new lock written for the operator."""
    app = app_with(actions)
    assert snap_compare(app, terminal_size=MAIN, run_before=on(STALE, "S"))


def test_bulk_break_confirmation(snap_compare: SnapCompare, actions: Any) -> None:
    """Three rows marked (two stale, one active), one of them hidden by the filter: the
    count, how many are hidden, which will be refused, and the count to type."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        for lock_id in (STALE, STALE_PIDFILE, ACTIVE):
            await _select(pilot, lock_id)
            await pilot.press("space")
        await pilot.press("slash", *"!report-gen", "enter")
        await pilot.pause()
        await _select(pilot, STALE_LOOP)  # the cursor on a row that is not marked
        await pilot.press("b")
        await settle(pilot)
        assert isinstance(pilot.app.screen, ConfirmScreen)

    app = app_with(actions)
    assert snap_compare(app, terminal_size=MAIN, run_before=run_before)


def test_marked_and_held_rows(snap_compare: SnapCompare, actions: ActionSession) -> None:
    """The table with two rows marked (●) and one lock held by you (★ held by you):
    the header counts both, the footer offers the action keys."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        hold(pilot.app, actions, STALE)
        for lock_id in (STALE_PIDFILE, STALE_LOOP):
            await _select(pilot, lock_id)
            await pilot.press("space")
        await _select(pilot, ACTIVE)
        await settle(pilot)

    app = app_with(actions)
    assert snap_compare(app, terminal_size=MAIN, run_before=run_before)


def hold(app: Any, actions: ActionSession, lock_id: str) -> None:
    """Make lockwatch hold `lock_id` for the operator, as a steal would leave it (nothing
    is written: the snapshot only needs the holding)."""
    assert isinstance(app, LockwatchApp)
    lock = app.board.entries[lock_id].lock
    assert lock.path is not None and lock.sha256 is not None
    actions.holdings.files[lock_id] = HeldFile(
        lock_id=lock_id,
        path=lock.path,
        name=lock.name,
        format=lock.format,
        sha256=lock.sha256,
        content=lock.content,
        refresh_every=None,  # no heartbeat during the snapshot
        next_refresh=None,
    )
    app._sync_held()


def test_quit_while_holding_a_lock(snap_compare: SnapCompare, actions: ActionSession) -> None:
    """q while lockwatch holds a lock for the operator: stay (focused), release, or keep."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        hold(pilot.app, actions, STALE)
        await pilot.press("q")
        await settle(pilot)
        assert isinstance(pilot.app.screen, QuitScreen)

    app = app_with(actions)
    assert snap_compare(app, terminal_size=MAIN, run_before=run_before)


def test_break_confirmation_on_a_small_terminal(snap_compare: SnapCompare, actions: Any) -> None:
    """80x24, the tallest confirmation (a name to type): the box opens at its top and
    scrolls; the inputs and buttons below are reached with tab."""
    app = app_with(actions)
    assert snap_compare(app, terminal_size=(80, 24), run_before=on(ACTIVE, "b"))
