"""The HOLDER cell of one lock as `lockwatch ls` prints it and as the live
dashboard draws it, both read off what the operator sees (issue 46, item 5:
one holder name in every view). Used with real servers (tests/postgres,
tests/mysql): the tables must say the same thing of the same session."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any

from lockwatch.cli.table import WIDTHS
from lockwatch.cli.where import select_targets
from lockwatch.clock import SystemClock
from lockwatch.config import Config
from lockwatch.model.columns import Said
from lockwatch.model.lock import Lock
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.table import LockTable
from tests.conftest import LOCAL_HOST
from tests.ui.fakes import make_app, row_text, until

WAIT_S = 30.0  # a bound for waits under a loaded suite, never a timing assertion
HOLDER_WIDTH = WIDTHS[3]


def ls_holder(args: tuple[str, ...], line_has: str) -> tuple[str, str]:
    """(the HOLDER cell as `ls -l ARGS` prints it on the one line holding
    `line_has`, the holder whole: `-l` prints a cut cell whole beneath its row)."""
    # A process of its own, as the operator runs it (the dashboard's loop runs here).
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "-l", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 3), done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("STATE") for line in lines), done.stdout + done.stderr
    header = next(line for line in lines if line.startswith("STATE"))
    start, end = header.index("HOLDER"), header.index("AGE")
    (at,) = [i for i, line in enumerate(lines) if line_has in line and line[:1] != " "]
    cell = lines[at][start:end].rstrip()
    whole = cell
    for line in lines[at + 1 :]:
        if not line.startswith("    "):
            break
        if line.startswith("    holder: "):
            whole = line.removeprefix("    holder: ")
    return cell, whole


def dashboard(values: Mapping[str, Any], filter_text: str) -> LockwatchApp:
    """The dashboard `lockwatch --pg DSN` (or `--mysql`) runs, with its filter
    typed: the feeds its sources build, on the system clock (real servers)."""
    targets = select_targets(dict(values), Config(), {})
    clock = SystemClock()
    feeds = [feed for _, selected in targets.sources for feed in selected.feeds(clock, LOCAL_HOST)]
    return make_app(feeds=feeds, clock=clock, filter_text=filter_text)


async def dashboard_holder(
    values: Mapping[str, Any], filter_text: str, wanted: Callable[[Lock], bool]
) -> tuple[str, int]:
    """(the HOLDER cell the dashboard draws for the first lock `wanted` picks,
    the column's width), at 200 columns where HOLDER is at its widest."""
    app = dashboard(values, filter_text)
    async with app.run_test(size=(200, 40)) as pilot:

        def found() -> str | None:
            return next(
                (lock_id for lock_id in app.rows.ids if wanted(app.board.entries[lock_id].lock)),
                None,
            )

        await until(pilot, lambda: found() is not None, "the session's row", WAIT_S)
        await pilot.pause()
        lock_id = found()
        assert lock_id is not None
        table = app.query_one("#table", LockTable)
        line = row_text(app, lock_id)
        start = 0
        for column, width in table._columns(table.scrollable_content_region.width):
            if column.key == "holder":
                return line[start : start + width].rstrip(), width
            start += width + 1
    raise AssertionError("the dashboard has no HOLDER column at 200 columns")


def same_holder(ls_cell: str, whole: str, dash_cell: str, dash_width: int, name: str) -> None:
    """Both tables say the same text of the holder, each cut to its own width,
    the holder's name kept whole in both."""
    said = Said(whole, name)
    assert ls_cell == said.fit(HOLDER_WIDTH), (ls_cell, whole)
    assert dash_cell == said.fit(dash_width), (dash_cell, whole)
    assert name in ls_cell and name in dash_cell, (ls_cell, dash_cell)
