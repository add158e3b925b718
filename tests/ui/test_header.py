"""The header at 80 columns: a source status that grows and wraps onto a line of
its own must not push the counts out of view."""

from __future__ import annotations

from lockwatch.model.changes import ChangeSet
from lockwatch.model.status import SourceStatus
from tests.conftest import NOW
from tests.ui.fakes import FailingFeed, make_app, settle, until
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
