"""Full ids and paths are reachable: `y` copies the selected lock's id (for
`lockwatch break ID`), and the detail pane folds long ids instead of cutting them."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from lockwatch.model.board import Board
from lockwatch.ui.detail import describe
from lockwatch.ui.keys import View
from tests.conftest import LOCAL_HOST, NOW
from tests.ui.fakes import PG_ROOT_ID, make_app, mixed_scenario, settle, until


async def test_y_copies_the_selected_locks_id_and_shows_it() -> None:
    app = make_app(mixed_scenario())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.locks.table.select(PG_ROOT_ID)
        await pilot.press("y")
        await pilot.pause()
        assert app.clipboard == PG_ROOT_ID
        said = [str(n.message) for n in app._notifications]
        assert PG_ROOT_ID in said


async def test_y_in_the_contention_view_copies_the_selected_sessions_lock() -> None:
    app = make_app(mixed_scenario())
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("tab")
        await until(pilot, lambda: app.current is View.CONTENTION, "the contention view")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        # The cursor starts on the first root blocker: the billing session's lock.
        assert app.clipboard == PG_ROOT_ID


@pytest.mark.parametrize("width", [40, 60, 78])
def test_the_detail_pane_folds_a_long_id_rather_than_cutting_it(width: int) -> None:
    board = Board(LOCAL_HOST)
    for change in mixed_scenario():
        board.apply(change)
    lock = board.entries[PG_ROOT_ID].lock
    body = describe(lock, board.verdict_at(PG_ROOT_ID, NOW), (), NOW)
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(body)
    lines = console.export_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("id "))
    column = lines[start].index("pg:")
    assert len(PG_ROOT_ID) > width - column  # it cannot fit on one line
    # The id goes on in its column on the lines below, whole and never cut.
    folded = "".join(line[column:].rstrip() for line in lines[start : start + 4])
    assert folded.startswith(PG_ROOT_ID)
    assert "…" not in lines[start]
