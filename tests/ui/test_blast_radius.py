"""Root blockers are marked in the Locks table and every blocker's blast radius
is in the detail pane: where to act, and how much it frees."""

from __future__ import annotations

from lockwatch.model.blocking import Radius
from lockwatch.ui.app import LockwatchApp
from tests.facts_of import PgLock, pg_of
from tests.ui.fakes import make_app, mixed_scenario, row_text, settle, until
from tests.ui.test_pilot import detail_text

SIZE = (160, 45)
ROOT_PID = 4242  # mixed_scenario: the billing session the chain waits behind


def root_lock(app: LockwatchApp) -> str:
    board = app.board
    return next(
        lock_id
        for lock_id, entry in board.entries.items()
        if isinstance(entry.lock.facts, PgLock)
        and pg_of(entry.lock).granted
        and pg_of(entry.lock).backend.pid == ROOT_PID
        and board.blast_radius(lock_id) is not None
    )


async def test_the_root_blocker_is_marked_in_the_table() -> None:
    app = make_app(mixed_scenario())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        lock_id = root_lock(app)
        assert app.board.blast_radius(lock_id) == Radius(direct=2, total=3, root=True)
        app.locks.table.select(lock_id)
        await pilot.pause()
        assert "root · blocks 3 in total" in row_text(app, lock_id)


async def test_the_detail_pane_gives_the_blast_radius_in_total() -> None:
    app = make_app(mixed_scenario())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        lock_id = root_lock(app)
        app.locks.table.select(lock_id)
        await pilot.press("enter")
        await until(pilot, lambda: app.locks.detail.display, "the detail pane")
        text = detail_text(app)
        assert "Blast radius" in text
        assert "2 directly, 3 in total" in text
        assert "the root of its chain" in text
