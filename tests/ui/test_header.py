"""The header at 80 columns: a source status that grows and wraps onto a line of
its own must not push the counts out of view."""

from __future__ import annotations

from functools import partial

from lockwatch.model.changes import ChangeSet
from lockwatch.model.status import SourceStatus
from lockwatch.ui.app import LockwatchApp
from tests.conftest import NOW
from tests.ui.fakes import (
    FailingFeed,
    StaticFeed,
    make_app,
    mixed_scenario,
    sentinels_scenario,
    settle,
    until,
)
from tests.ui.test_pilot import FEED, ROOT, app_with, five_locks


def screen_lines(app: object) -> list[str]:
    strips = app.screen._compositor.render_strips()  # type: ignore[attr-defined]
    return ["".join(segment.text for segment in strip) for strip in strips]


async def test_a_status_that_wraps_keeps_the_counts_in_view() -> None:
    app = app_with(five_locks())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert any(line.startswith(" 5 locks") for line in screen_lines(app))
        # The same source, now with a long status: the first line wraps.
        long = SourceStatus(
            "file", ROOT, "error", reason="permission denied reading the directory " * 2
        )
        app.receive(ChangeSet(FEED, NOW, (long,)))
        await pilot.pause()
        await until(
            pilot,
            lambda: any(line.startswith(" 5 locks") for line in screen_lines(app)),
            "the counts line, below the wrapped status",
        )


async def test_a_feed_that_fails_in_a_task_group_names_the_cause() -> None:
    """A feed's loops run in a TaskGroup: its failure arrives wrapped, and the
    header and the notice name what went wrong inside, not the group."""
    inner = OSError(5, "Input/output error", "/proc/locks")
    group = ExceptionGroup("unhandled errors in a TaskGroup", [inner])
    app = make_app(feeds=[FailingFeed("files", group)])
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: bool(app.board.statuses.get("files")), "the error shown")
        (status,) = app.board.statuses["files"]
        assert status.state == "error"
        assert status.reason == "stopped: OSError: [Errno 5] Input/output error: '/proc/locks'"
        text = "\n".join(screen_lines(app))
        assert "Input/output error" in text and "TaskGroup" not in text


async def test_a_count_that_comes_and_goes_never_moves_the_table() -> None:
    """Issue 46, item 6: at 80 columns "1 free" coming and going neither splits
    `sort:` from `state` onto two lines nor moves the table a line: the counts
    stay one line, the sort (marked ▼ in the table's titles) dropped where they
    would not fit."""
    app = make_app([*mixed_scenario(), sentinels_scenario(free=False)])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.query_one("#table")
        top = table.region.y
        counts = [line for line in screen_lines(app) if line.startswith(" 25 locks")]
        assert counts and "sort: state" in counts[0]
        for free, total in ((True, 26), (False, 25), (True, 26)):
            feed = next(f for f in app.feeds if isinstance(f, StaticFeed) and f.name == "builds")
            feed.push(sentinels_scenario(free=free))
            await until(pilot, partial(_has, app, total), f"{total} locks")
            await pilot.pause()
            lines = screen_lines(app)
            assert not any(line.strip() in ("state", "sort: state") for line in lines)
            (line,) = [line for line in lines if line.startswith(f" {total} locks")]
            assert ("1 free" in line) is free and "1 unknown" in line
            assert table.region.y == top


def _has(app: LockwatchApp, total: int) -> bool:
    return len(app.board) == total
