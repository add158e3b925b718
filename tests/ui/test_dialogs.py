"""Confirmations tell the truth now: they tick while open, say when the verdict
changes, never cancel silently on enter, and their buttons say what they do."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button, Input

from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.confirm import DISMISS_LABEL, ConfirmScreen
from tests.ui.fakes import settle, until
from tests.ui.test_actions_ui import (
    REASON,
    SIZE,
    TTL,
    Scene,
    acted,
    confirm_button,
    confirm_screen,
    notes,
    open_action,
    screen_text,
    showing,
    tower,
)


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    return Scene(tmp_path)


async def test_ages_tick_while_the_dialog_is_open(scene: Scene) -> None:
    scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        screen = confirm_screen(app)
        assert "last heartbeat 10m00s ago" in screen_text(screen)
        scene.clock.advance(63)
        screen.refresh_facts()
        await pilot.pause()
        text = screen_text(screen)
        assert "last heartbeat 11m03s ago" in text
        assert "10m00s" not in text
        assert "changed while open" not in text  # still stale: nothing to say


async def test_a_verdict_that_changes_while_open_is_said(scene: Scene) -> None:
    # Active (heartbeat 5 s ago) when the dialog opens; stale once the ttl passes.
    scene.write("deploy.lock", tower("deploy", heartbeat=5))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        screen = confirm_screen(app)
        assert not screen.query_one("#confirm-changed").display
        scene.clock.advance(TTL)
        screen.refresh_facts()
        await pilot.pause()
        assert screen.query_one("#confirm-changed").display
        assert "changed while open: now stale, was active when this opened" in screen_text(screen)


async def test_enter_in_a_filled_reason_goes_to_the_action_button(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    before = path.read_bytes()
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        await pilot.press(*REASON, "enter")
        await pilot.pause()
        assert showing(app, ConfirmScreen)  # enter never confirms by itself
        assert app.focused is confirm_button(app)
        assert path.read_bytes() == before
        await pilot.press("enter")  # now it is the action's button
        await acted(pilot)
    assert scene.tombstones()


async def test_enter_in_an_empty_reason_stays_and_says_why(scene: Scene) -> None:
    scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        reason = confirm_screen(app).query_one("#reason", Input)
        app.set_focus(reason)
        await pilot.press("enter")
        await pilot.pause()
        assert showing(app, ConfirmScreen)
        assert app.focused is reason
        await until(pilot, lambda: any("reason is required" in n for n in notes(app)), "a hint")


async def test_enter_in_the_reason_of_an_active_lock_goes_to_its_name(scene: Scene) -> None:
    scene.write("deploy.lock", tower("deploy", heartbeat=5))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        await pilot.press(*REASON, "enter")
        await pilot.pause()
        assert focused_id(app) == "must-type"
        await pilot.press(*"deploy", "enter")
        await pilot.pause()
        assert focused_id(app) == "confirm"


def focused_id(app: LockwatchApp) -> str | None:
    """The id of the focused widget (a call: each check looks afresh)."""
    return None if app.focused is None else app.focused.id


async def test_dismissing_says_nothing_was_done(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    before = path.read_bytes()
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for dismiss in ("escape", "enter"):  # enter on the focused "Do nothing"
            await open_action(pilot, scene.id("deploy.lock"))
            assert str(confirm_screen(app).query_one("#cancel", Button).label) == DISMISS_LABEL
            await pilot.press(dismiss)
            await acted(pilot)
            assert not showing(app, ConfirmScreen)
        said = [n for n in notes(app) if "cancelled — nothing done" in n]
        assert len(said) == 2
    assert path.read_bytes() == before


def test_no_dialog_has_two_buttons_with_one_label() -> None:
    from lockwatch.actions.plan import Kind
    from lockwatch.ui.flow import VERBS

    for kind in Kind:
        verb = VERBS.get(kind, kind.value.capitalize())
        assert verb != DISMISS_LABEL
        assert verb != "Cancel" or kind is not Kind.CANCEL
    assert VERBS[Kind.CANCEL] == "Cancel query"
