"""Snapshot tests of the action screens: the confirmations for break (stale, and active
with the name to type), steal, a bulk break of marked rows, and quitting while lockwatch
holds a lock for the operator.

The locks are the mixed scenario's (tests/ui/fakes.py), at fixed fake paths, so what the
screens say (paths, effects, hashes) never depends on where the tests run; the action
session's roots cover those paths. Nothing is executed: every snapshot is taken with
the confirmation open, the reason field focused (▶ reason) unless said otherwise. Each
confirmation says its effect first, right under its title, at 80x24 too; the facts
scroll below it. The operator is named and lockwatch's pid is
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
from lockwatch.sources.files.actions import ACTIONS as FILE_ACTIONS
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.confirm import ConfirmScreen, QuitScreen
from lockwatch.ui.table import LockTable
from tests.ui.fakes import (
    LOCAL_HOST,
    PG_ROOT_ID,
    TOWER,
    flow_of,
    frozen_clock,
    kernel_scenario,
    make_app,
    mixed_scenario,
    settle,
)

SnapCompare = Callable[..., bool]
RunBefore = Callable[[Pilot[Any]], Awaitable[None]]

SMALL = (80, 24)
LARGE = (160, 45)
# Every screen and dialog at both: the smallest terminal it must work in, and a big one.
SIZES = pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x45"])
ROOTS = ("/srv", "/home", "/run")  # the mixed scenario's file roots
OPERATOR = "alice"
LOCKWATCH_PID = 31337
STALE = f"file:{TOWER}/home-portal-staging.lock"  # tower-fleet, heartbeat expired
ACTIVE = f"file:{TOWER}/money-tracker-production.lock"  # tower-fleet, fresh heartbeat
STALE_PIDFILE = "file:/run/report-gen.pid"  # generic, holder dead
STALE_LOOP = "file:/home/dev/proj/.loops/.running/docs-sweep.lock"  # little-loops, loop dead
PG_LEAKED_ID = "pg:monitor@db1:5432/app:3410:advisory/16384/////1/7/2:ExclusiveLock:held"


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


@SIZES
def test_break_confirmation_of_a_stale_lock(
    snap_compare: SnapCompare, size: tuple[int, int], actions: Any
) -> None:
    """b on a tower-fleet lock whose heartbeat expired: the effect (the rename into the
    tombstone, its paths folded after a `/`) first, then the lock, holder, state and
    reasons; a reason to give (focused), Break not yet pressable."""
    app = app_with(actions)
    assert snap_compare(app, terminal_size=size, run_before=on(STALE, "b"))


@SIZES
def test_break_confirmation_of_an_active_lock(
    snap_compare: SnapCompare, size: tuple[int, int], actions: Any
) -> None:
    """b on a lock that is not stale: the warning, and its name to type."""
    app = app_with(actions)
    assert snap_compare(app, terminal_size=size, run_before=on(ACTIVE, "b"))


@SIZES
def test_steal_confirmation(snap_compare: SnapCompare, size: tuple[int, int], actions: Any) -> None:
    """S on a stale tower-fleet lock: the new lock written for the operator, and whether
    its holder is alive (a hung holder may wake)."""
    app = app_with(actions)
    assert snap_compare(app, terminal_size=size, run_before=on(STALE, "S"))


@SIZES
def test_bulk_break_confirmation(
    snap_compare: SnapCompare, size: tuple[int, int], actions: Any
) -> None:
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
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_marked_and_held_rows(
    snap_compare: SnapCompare, size: tuple[int, int], actions: ActionSession
) -> None:
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
    assert snap_compare(app, terminal_size=size, run_before=run_before)


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
        actions=FILE_ACTIONS,
        sha256=lock.sha256,
        content=lock.content,
        refresh_every=None,  # no heartbeat during the snapshot
        next_refresh=None,
    )
    flow_of(app).sync_held()


@SIZES
def test_quit_while_holding_a_lock(
    snap_compare: SnapCompare, size: tuple[int, int], actions: ActionSession
) -> None:
    """q while lockwatch holds a lock for the operator: stay (focused), release, or keep."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        hold(pilot.app, actions, STALE)
        await pilot.press("q")
        await settle(pilot)
        assert isinstance(pilot.app.screen, QuitScreen)

    app = app_with(actions)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.fixture
def pg_actions(tmp_path: Path, actions: ActionSession) -> ActionSession:
    """A session that can reach the scenario's PostgreSQL server (nothing connects:
    the dialogs only plan)."""
    return ActionSession(
        clock=frozen_clock(),
        host=LOCAL_HOST,
        roots=ROOTS,
        audit_log=tmp_path / "audit.jsonl",
        operator=OPERATOR,
        reach={"dsn_for": {"monitor@db1:5432/app": "postgresql://monitor@db1:5432/app"}.get},
    )


@SIZES
def test_cancel_query_confirmation(
    snap_compare: SnapCompare, size: tuple[int, int], pg_actions: ActionSession
) -> None:
    """c on the root blocker of a Postgres chain: pg_cancel_backend on its pid, the
    query it cancels, and the buttons "Do nothing" and "Cancel query"."""
    app = app_with(pg_actions)
    assert snap_compare(app, terminal_size=size, run_before=on(PG_ROOT_ID, "c"))


@SIZES
def test_break_of_a_session_with_the_focus_on_its_name(
    snap_compare: SnapCompare, size: tuple[int, int], pg_actions: ActionSession
) -> None:
    """tab, b, a reason, enter: the root blocker's terminate dialog titled by its session
    (billing-api, pid 4242, idle in transaction 7m12s), its effect naming every session
    of the chain (who proceeds, who still waits), the reason given and the focus on the
    name to type (▶ name), which is its application."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("tab")
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        await pilot.press(*"blocks billing", "enter")
        await settle(pilot)
        assert isinstance(pilot.app.screen, ConfirmScreen)

    app = app_with(pg_actions)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_steal_of_a_leaked_advisory_lock(
    snap_compare: SnapCompare, size: tuple[int, int], pg_actions: ActionSession
) -> None:
    """S on the advisory lock a pooled session leaked (idle 26m): titled by the session,
    whether its holder is alive (it may wake), and its application to type (stale only
    by inference), with the focus on "Do nothing" ([ Do nothing ])."""
    app = app_with(pg_actions)
    assert snap_compare(app, terminal_size=size, run_before=on(PG_LEAKED_ID, "S", "shift+tab"))


@SIZES
def test_release_confirmation(
    snap_compare: SnapCompare, size: tuple[int, int], actions: ActionSession
) -> None:
    """r on a lock lockwatch holds for the operator: what releasing writes."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        hold(pilot.app, actions, STALE)
        await _select(pilot, STALE)
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(pilot.app.screen, ConfirmScreen)

    app = app_with(actions)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_break_from_the_contention_view(
    snap_compare: SnapCompare, size: tuple[int, int], pg_actions: ActionSession
) -> None:
    """tab, b: the root blocker selected in the Contention view, its break confirmed
    there (pg_terminate_backend, every lock it holds, who proceeds)."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("tab")
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        assert isinstance(pilot.app.screen, ConfirmScreen)

    app = app_with(pg_actions)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_contention_view_with_actions(
    snap_compare: SnapCompare, size: tuple[int, int], pg_actions: ActionSession
) -> None:
    """The Contention view when actions are on: the cursor on the first root blocker,
    and the footer offers what works on it (b, and the rest in ? and ctrl+p)."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("tab")
        await settle(pilot)

    app = app_with(pg_actions)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_break_of_a_kernel_lock_with_the_signal_chosen(
    snap_compare: SnapCompare, size: tuple[int, int], actions: ActionSession
) -> None:
    """b on the kernel's lock on build.lock, shift+tab, →: the signal chosen in the
    dialog (▶ signal, (•) TERM only) and the effect saying what that does: SIGTERM to
    its holder, no SIGKILL, the break failing after 10 s naming who still holds it."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        app = pilot.app
        assert isinstance(app, LockwatchApp)
        (kernel_id,) = [
            lock_id
            for lock_id, entry in app.board.entries.items()
            if entry.lock.source == "kernel"
            and entry.lock.name == "build.lock"
            and entry.lock.holder.pid == 5501
        ]
        await _select(pilot, kernel_id)
        await pilot.press("b")
        await settle(pilot)
        await pilot.press("shift+tab", "right")
        await settle(pilot)
        assert isinstance(pilot.app.screen, ConfirmScreen)

    app = make_app(kernel_scenario(), actions=actions)
    assert snap_compare(app, terminal_size=size, run_before=run_before)
