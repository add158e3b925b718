"""Snapshot tests of the dashboard: what the operator sees, cell for cell.

Each test runs the app headless at a fixed size with fake feeds (tests/ui/fakes.py):
the clock is frozen at NOW, the tick is an hour away, animations are off, only the
built-in themes are loaded. `run_before` waits for the feeds to deliver before any
key is pressed, so a snapshot never catches a half-drawn screen.

The SVGs live in tests/ui/__snapshots__/test_snapshots/. After a deliberate change to
the UI, look at the failure report, then accept with:

    .venv/bin/pytest tests/ui/test_snapshots.py --snapshot-update

These are plain `def` tests: the snapshot fixture runs the app in its own event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from lockwatch.model.changes import ChangeSet
from lockwatch.sources.contract import Hint
from lockwatch.sources.files.plugin import LOOKED_FOR
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.table import LockTable
from tests.ui.fakes import (
    FILES_FEED,
    NOW,
    PG_FEED,
    PG_ROOT_ID,
    TOWER,
    StaticFeed,
    empty_scenario,
    error_scenario,
    formats_scenario,
    kernel_scenario,
    lock_count,
    make_app,
    mixed_scenario,
    settle,
    until,
)

SnapCompare = Callable[..., bool]
RunBefore = Callable[[Pilot[Any]], Awaitable[None]]

SMALL = (80, 24)
LARGE = (160, 45)
# Every screen and dialog at both: the smallest terminal it must work in, and a big one.
SIZES = pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x45"])
STALE_HEARTBEAT_ID = f"file:{TOWER}/home-portal-staging.lock"


def keys(*pressed: str, select: str | None = None) -> RunBefore:
    """A run_before: wait for the feeds, put the cursor on `select`, press `pressed`."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        app = pilot.app
        assert isinstance(app, LockwatchApp)
        sent = [
            change for feed in app.feeds if isinstance(feed, StaticFeed) for change in feed.emitted
        ]
        assert len(app.board) == lock_count(sent), "the feeds' locks never reached the board"
        if select is not None:
            assert select in app.board, select
            app.query_one("#table", LockTable).select(select)
            await pilot.pause()
        if pressed:
            await pilot.press(*pressed)
        await settle(pilot)

    return run_before


@SIZES
def test_main_view_mixed_states(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """Every format in every state, worst first; Postgres waiters and blockers."""
    app = make_app(mixed_scenario())
    assert snap_compare(app, terminal_size=size, run_before=keys())


@SIZES
def test_detail_pane_of_a_stale_lock(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """enter on a tower-fleet lock whose heartbeat expired: reasons, times, content."""
    app = make_app(mixed_scenario())
    assert snap_compare(
        app, terminal_size=size, run_before=keys("enter", select=STALE_HEARTBEAT_ID)
    )


@SIZES
def test_detail_pane_of_a_postgres_blocker(
    snap_compare: SnapCompare, size: tuple[int, int]
) -> None:
    """enter on the session idle in transaction that holds everybody up."""
    app = make_app(mixed_scenario())
    assert snap_compare(app, terminal_size=size, run_before=keys("enter", select=PG_ROOT_ID))


def gone(lock_id: str) -> RunBefore:
    """A run_before: `lock_id` selected, its details open, then its file removed."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await keys("enter", select=lock_id)(pilot)
        app = pilot.app
        assert isinstance(app, LockwatchApp)
        files = next(f for f in app.feeds if isinstance(f, StaticFeed) and f.name == FILES_FEED)
        files.push(ChangeSet(FILES_FEED, NOW, removed=(lock_id,)))
        await settle(pilot)
        assert app.locks.table.gone is not None

    return run_before


@SIZES
def test_detail_pane_of_a_lock_gone(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """The selected lock's file removed: no row is selected, the line above the
    table and the pane say it is gone, with its last facts, not another lock's."""
    app = make_app(mixed_scenario())
    assert snap_compare(app, terminal_size=size, run_before=gone(STALE_HEARTBEAT_ID))


@SIZES
def test_contention_tree(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """tab: the three-deep blocking chain and the little-loops scope conflict."""
    app = make_app(mixed_scenario())
    assert snap_compare(app, terminal_size=size, run_before=keys("tab"))


async def _session_gone(pilot: Pilot[Any]) -> None:
    """tab, j j j (pid 5102, waiting on the root blocker), then its session ends."""
    await keys("tab", "j", "j", "j")(pilot)
    app = pilot.app
    assert isinstance(app, LockwatchApp)
    pg = next(f for f in app.feeds if isinstance(f, StaticFeed) and f.name == PG_FEED)
    ended = tuple(e.lock.id for e in pg.emitted[0].upserts if ":5102:" in e.lock.id)
    assert ended
    pg.push(ChangeSet(PG_FEED, NOW, removed=ended))
    await settle(pilot)


@SIZES
def test_contention_session_gone(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """The selected session ended: its line on top, said gone, the cursor on it
    (never on the session that took its line) until the operator moves."""
    app = make_app(mixed_scenario())
    assert snap_compare(app, terminal_size=size, run_before=_session_gone)


@SIZES
def test_events_view(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """tab tab: what appeared, stamped with the frozen clock's time."""
    app = make_app(mixed_scenario())
    assert snap_compare(app, terminal_size=size, run_before=keys("tab", "tab"))


@SIZES
def test_help_screen(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    app = make_app(mixed_scenario())
    assert snap_compare(app, terminal_size=size, run_before=keys("question_mark"))


@pytest.mark.parametrize("theme", ["lockwatch-dark", "lockwatch-light", "incident"])
def test_theme(snap_compare: SnapCompare, theme: str) -> None:
    """The main view in each built-in theme: the state colours are the theme's."""
    app = make_app(mixed_scenario(), theme=theme)
    assert snap_compare(app, terminal_size=LARGE, run_before=keys())


# What the sources say to an empty dashboard, as the files, kernel and postgres
# plugins word it (tests/ui/test_empty_state.py asks the real ones).
EMPTY_HINTS = (
    Hint(looked_for=f"{LOOKED_FOR}, under /srv/locks"),
    Hint(
        could_show="kernel locks on 2 files under /srv/locks not shown: --kernel shows them"
        " (and who waits for them)"
    ),
    Hint(
        could_show="a PostgreSQL server listens on port 5432 on this host, not watched:"
        " --pg postgresql://USER@127.0.0.1:5432/postgres (or LOCKWATCH_PG) shows its locks"
    ),
)


@SIZES
def test_empty_state(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """A watched root with no lock: what was looked for and where, the root's state,
    and what is not shown with the flags that show it."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await keys()(pilot)
        empty = pilot.app.query_one("#empty", Static)
        await until(pilot, lambda: "--kernel" in str(empty.content), "the hints shown")

    app = make_app(empty_scenario(), hints=lambda: EMPTY_HINTS)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_sources_in_error(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """A missing root and a server gone away: the last locks stay, the header says why."""
    app = make_app(error_scenario())
    assert snap_compare(app, terminal_size=size, run_before=keys())


@SIZES
def test_sources_in_error_with_nothing_to_show(
    snap_compare: SnapCompare, size: tuple[int, int]
) -> None:
    """Only broken sources: the empty state gives each one's reason."""
    app = make_app(error_scenario(last_locks=False))
    assert snap_compare(app, terminal_size=size, run_before=keys())


@SIZES
def test_filter_applied(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """--filter state:stale: the filter bar shows, the header counts what is hidden."""
    app = make_app(mixed_scenario(), filter_text="state:stale")
    assert snap_compare(app, terminal_size=size, run_before=keys())


@SIZES
def test_kernel_locks(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """Lock files judged by the kernel (held, an empty one nobody holds unknown, open_by) beside
    the kernel's own flock/POSIX records, a waiter among them."""
    app = make_app(kernel_scenario())
    assert snap_compare(app, terminal_size=size, run_before=keys())


@SIZES
def test_kernel_contention(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """tab: the process blocked on build.lock under the process holding it."""
    app = make_app(kernel_scenario())
    assert snap_compare(app, terminal_size=size, run_before=keys("tab"))


@SIZES
def test_tools_lock_files(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """git, flufl.lock, a SoftFileLock from a container (unknown), Emacs, a lock
    directory and LibreOffice, each judged by its own tool's rules."""
    app = make_app(formats_scenario())
    assert snap_compare(app, terminal_size=size, run_before=keys())
