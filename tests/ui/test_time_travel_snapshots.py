"""Snapshots of time travel (issue 44, item 4) at 80x24 and 160x45: the Locks,
Contention and Events views in the past (PAST in the header, the recorded
episodes in Events), and the seek dialog.

The SVGs live in tests/ui/__snapshots__/test_time_travel_snapshots/; after a
deliberate change: `.venv/bin/pytest -n0 tests/ui/test_time_travel_snapshots.py
--snapshot-update`, then read the diffs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.past import SeekScreen
from tests.ui.fakes import settle, until
from tests.ui.test_time_travel import record_history, travelling_app, utc_zone

__all__ = ["utc_zone"]  # the fixture, used by name

SnapCompare = Callable[..., bool]
RunBefore = Callable[[Pilot[Any]], Awaitable[None]]

SIZES = pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])


def back(*then: str) -> RunBefore:
    """A run_before: wait for the feeds, step back once (to the last recorded
    change), then press `then`."""

    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, LockwatchApp)
        await settle(pilot)
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: app.past is not None, "the past")
        if then:
            await pilot.press(*then)
        await settle(pilot)

    return run_before


def _app(tmp_path: Path) -> LockwatchApp:
    history = tmp_path / "history.sqlite3"
    record_history(history)
    return travelling_app(history)


@SIZES
def test_locks_in_the_past(
    snap_compare: SnapCompare, size: tuple[int, int], tmp_path: Path
) -> None:
    """PAST and its time in the header; one lock fewer than live."""
    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=back())


@SIZES
def test_contention_in_the_past(
    snap_compare: SnapCompare, size: tuple[int, int], tmp_path: Path
) -> None:
    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=back("tab"))


@SIZES
def test_events_list_recorded_episodes(
    snap_compare: SnapCompare, size: tuple[int, int], tmp_path: Path
) -> None:
    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=back("tab", "tab"))


@SIZES
def test_seek_dialog(snap_compare: SnapCompare, size: tuple[int, int], tmp_path: Path) -> None:
    """The forms it takes, and a time that is no time said in the dialog."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("at")
        await until(pilot, lambda: isinstance(pilot.app.screen, SeekScreen), "the dialog")
        await pilot.press(*"nope", "enter")
        await pilot.pause()

    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=run_before)
