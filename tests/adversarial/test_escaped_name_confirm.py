"""Issue 47 item 17: a lock whose name holds escapes (`esc\\x1b]0;…\\x07`) is shown
sanitised, and the dashboard asked for its name typed: what the operator could
read and type never matched the raw name, so it could not be broken from the
dashboard. The name as displayed now confirms, and nothing else does.

A real lock file (tower-fleet/v1, active: the name must be typed) in a temp
directory, the real dashboard under Textual's pilot, the audit log in the temp
directory too."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from lockwatch.ui.confirm import ConfirmScreen
from lockwatch.ui.safe import clean
from tests.ui.fakes import settle
from tests.ui.test_actions_ui import (
    REASON,
    SIZE,
    Scene,
    acted,
    confirm_screen,
    open_action,
    showing,
    tower,
)

NAME = "esc\x1b]0;pwned\x07deploy"


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    return Scene(tmp_path)


async def _type_name_and_enter(scene: Scene, typed: str) -> bool:
    """Open the break, type the reason and `typed` as the name, enter: whether the
    confirmation closed."""
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        await pilot.press(*REASON, "enter")
        await pilot.pause()
        field = confirm_screen(app).query_one("#must-type", Input)
        assert app.focused is field
        field.value = typed
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        closed = not showing(app, ConfirmScreen)
        await acted(pilot)
    return closed


async def test_the_name_as_displayed_confirms_the_break(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower(NAME, heartbeat=5))
    shown = clean(NAME)
    assert shown == "esc\\x1b]0;pwned\\x07deploy" and shown != NAME
    assert await _type_name_and_enter(scene, shown)
    assert not path.exists()
    assert scene.events()[-1] == "lock_broken"


async def test_another_name_still_confirms_nothing(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower(NAME, heartbeat=5))
    assert not await _type_name_and_enter(scene, "esc]0;pwneddeploy")
    assert path.exists()
    assert "lock_broken" not in scene.events()
