"""The header at 80 columns: a source status that grows and wraps onto a line of
its own must not push the counts out of view."""

from __future__ import annotations

from lockwatch.model.board import ChangeSet
from lockwatch.model.status import SourceStatus
from tests.conftest import NOW
from tests.ui.fakes import settle, until
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
