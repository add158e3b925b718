"""NO_COLOR: the dashboard reads right without colour; states are words first."""

from __future__ import annotations

import pytest

from lockwatch.model.verdict import State
from tests.ui.fakes import make_app, mixed_scenario, settle


async def test_no_color_keeps_every_state_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(mixed_scenario())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.no_color
        screen = app.export_screenshot()
        shown = {app.board.verdict(lock_id).state for lock_id in app.rows.ids[:20]}
        assert {State.STALE, State.INVALID, State.WAITING, State.ACTIVE} <= shown
        for state in shown:
            assert f">{state.value}" in screen.replace("&#160;", " ").replace(" ", ""), state
        # Monochrome: no state colour of the theme is painted anywhere.
        stale = app.theme_variables["lw-stale"].lower()
        assert stale not in screen.lower()
