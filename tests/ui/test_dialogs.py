"""Confirmations tell the truth now: they tick while open, say when the verdict
changes, never cancel silently on enter, and their buttons say what they do.
The effect comes first and stays in view at 80x24; paths fold at their
separators; enter walks the fields and confirms from the last; the focus is
marked in characters (a plain text capture shows it); keys typed ahead land in
the field that had the focus when they were typed."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual import events
from textual.widgets import Button, Input

from lockwatch.model.kinds import kinds
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.confirm import DISMISS_LABEL, ConfirmScreen, button_label
from lockwatch.ui.fold import fold_lines
from tests.ui.fakes import settle, until
from tests.ui.test_actions_ui import (
    REASON,
    SIZE,
    TTL,
    Scene,
    acted,
    confirm_screen,
    hint,
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


async def test_enter_in_a_filled_reason_confirms_when_it_is_the_last_field(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        assert focused_id(app) == "reason"  # typing is the reason from the start
        await pilot.press(*REASON, "enter")
        await acted(pilot)
        assert not showing(app, ConfirmScreen)
    assert not path.exists()
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
        await until(pilot, lambda: "reason is required" in hint(app), "said on the hint line")
        assert not any("reason is required" in n for n in notes(app))  # no toast over the fields


async def test_enter_goes_from_the_reason_to_the_name_and_confirms_from_there(
    scene: Scene,
) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=5))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        await pilot.press(*REASON, "enter")
        await pilot.pause()
        assert showing(app, ConfirmScreen)
        assert focused_id(app) == "must-type"
        await pilot.press(*"deplo", "enter")  # not the name: nothing done, and said
        await pilot.pause()
        assert showing(app, ConfirmScreen)
        await until(pilot, lambda: "type deploy exactly" in hint(app), "said on the hint line")
        await pilot.press("y")
        assert confirm_screen(app).query_one("#must-type", Input).value == "deploy"
        await pilot.press("enter")
        await acted(pilot)
        assert not showing(app, ConfirmScreen)
    assert not path.exists()
    assert scene.records()[-1]["forced"] is True


def focused_id(app: LockwatchApp) -> str | None:
    """The id of the focused widget (a call: each check looks afresh)."""
    return None if app.focused is None else app.focused.id


async def test_dismissing_says_nothing_was_done(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    before = path.read_bytes()
    app = scene.app()
    # Every notice, kept: a notification expires on the wall clock, which a loaded
    # machine may pass before the check.
    said: list[str] = []
    notify = app.notify

    def keep(message: str, **options: Any) -> None:
        said.append(message)
        notify(message, **options)

    app.notify = keep  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # escape; and enter on "Do nothing" (tab from the reason, marked [ Do nothing ]).
        for dismiss in (("escape",), ("tab", "enter")):
            await open_action(pilot, scene.id("deploy.lock"))
            cancel = confirm_screen(app).query_one("#cancel", Button)
            assert str(cancel.label).strip() == DISMISS_LABEL
            await pilot.press(*dismiss)
            await acted(pilot)
            assert not showing(app, ConfirmScreen)
        assert len([n for n in said if "cancelled — nothing done" in n]) == 2, said
    assert path.read_bytes() == before


def test_no_dialog_has_two_buttons_with_one_label() -> None:
    from lockwatch.actions.plan import Kind
    from lockwatch.ui.flow import verb_of

    for kind in kinds():
        verb = verb_of(kind)
        assert verb != DISMISS_LABEL
        assert button_label(verb, True) != button_label(DISMISS_LABEL, False)
        assert verb != "Cancel" or kind is not Kind.CANCEL
    assert verb_of(Kind.CANCEL) == "Cancel query"


# --- the focus, in characters; keys typed ahead --------------------------------------


def plain_text(app: Any) -> list[str]:
    """The screen as a terminal without colour shows it: characters only."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system=None,
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text().splitlines()


NAMED_KEYS = {"tab": "\t", "enter": "\r", "space": " "}


def type_ahead(app: Any, keys: Sequence[str]) -> None:
    """Keys as a fast paste delivers them: every one handed to the app before it
    has taken the first (Pilot.press waits for the app after each key)."""
    for key in keys:
        if len(key) == 1:
            name = "space" if key == " " else key if key.isalnum() else events.Key(key, key).key
            event = events.Key(name, key)
        else:
            event = events.Key(key, NAMED_KEYS.get(key))
        event.set_sender(app)
        app._driver.send_message(event)


def marked(lines: list[str]) -> list[str]:
    return [line for line in lines if "▶" in line or "[ " in line]


async def test_the_focus_is_marked_in_characters(scene: Scene) -> None:
    """Where the focus is shows with no colour at all: ▶ before the focused field,
    [ ] around the focused button, and a line that says what enter does."""
    scene.write("deploy.lock", tower("deploy", heartbeat=5))
    app = scene.app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        lines = plain_text(app)
        assert any("▶ reason" in line for line in lines), lines
        assert any("type why, for the audit log" in line for line in lines), lines
        assert not any("[ Do nothing ]" in line for line in lines)
        await pilot.press(*REASON)
        assert any("enter: on to the name" in line for line in plain_text(app))
        await pilot.press("enter")
        await pilot.pause()
        lines = plain_text(app)
        assert any("▶ name" in line for line in lines), lines
        assert not any("▶ reason" in line for line in lines)
        await pilot.press(*"deploy")
        assert any("enter: break" in line for line in plain_text(app))
        await pilot.press("tab")
        await pilot.pause()
        lines = plain_text(app)
        assert any("[ Do nothing ]" in line for line in lines), lines
        assert not any("▶" in line for line in lines)
        await pilot.press("tab")
        await pilot.pause()
        lines = plain_text(app)
        assert any("[ Break ]" in line for line in lines), lines
        assert not any("[ Do nothing ]" in line for line in lines)


async def test_the_focus_is_marked_under_no_color(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        await pilot.press("tab")
        await pilot.pause()
        cancel = confirm_screen(app).query_one("#cancel", Button)
        assert str(cancel.label) == "[ Do nothing ]"
        assert any("[ Do nothing ]" in line for line in plain_text(app))


@pytest.mark.parametrize("move", ["tab", "enter"])
async def test_keys_typed_ahead_land_in_the_field_they_were_typed_in(
    scene: Scene, move: str
) -> None:
    """A paste of the reason, tab (or enter), the name, enter: each key goes to the
    field that had the focus when it was typed, and the last enter confirms."""
    path = scene.write("deploy.lock", tower("deploy", heartbeat=5))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        screen = confirm_screen(app)
        seen: list[tuple[str, str]] = []

        def watch(message: Input.Changed) -> None:
            seen.append((message.input.id or "", message.value))

        screen.on_input_changed = watch  # type: ignore[method-assign]
        type_ahead(app, [*REASON, move, *"deploy"])
        await until(
            pilot,
            lambda: screen.query_one("#must-type", Input).value == "deploy",
            "the name typed",
        )
        assert screen.query_one("#reason", Input).value == REASON
        assert focused_id(app) == "must-type"
        type_ahead(app, ["enter"])
        await until(pilot, lambda: not showing(app, ConfirmScreen), "the confirmation to close")
        await acted(pilot)
    assert not path.exists()
    record = scene.records()[-1]
    assert record["reason"] == " ".join(REASON.split())


async def test_keys_typed_on_a_button_go_to_the_reason(scene: Scene) -> None:
    scene.write("deploy.lock", tower("deploy", heartbeat=5))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        await pilot.press("shift+tab")
        await pilot.pause()
        assert focused_id(app) == "cancel"
        await pilot.press(*"quick", "tab", *"deploy")
        screen = confirm_screen(app)
        assert screen.query_one("#reason", Input).value == "quick"
        assert screen.query_one("#must-type", Input).value == "deploy"


# --- the effect first, always in view; paths fold ------------------------------------


def box_lines(lines: list[str]) -> list[str]:
    """The dialog's lines, inside its border."""
    return [line.strip()[1:-1].strip() for line in lines if line.strip().startswith("█")]


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
async def test_the_effect_comes_first_and_paths_fold_at_separators(
    scene: Scene, size: tuple[int, int]
) -> None:
    deep = "/".join(["a-rather-long-directory-name-for-a-deploy"] * 2)
    (scene.root / deep).mkdir(parents=True)
    path = scene.write(f"{deep}/deploy.lock", tower("deploy", heartbeat=5))
    app = scene.app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id(f"{deep}/deploy.lock"))
        lines = box_lines(plain_text(app))
        text = "\n".join(lines)
        assert lines[1].startswith("Break deploy?"), text
        assert lines[3].startswith("Effect: rename"), text  # first, right under the title
        screen = confirm_screen(app)
        effect = screen.query_one("#confirm-effect")
        facts = screen.query_one("#confirm-facts")
        assert effect.region.bottom <= facts.region.y  # the facts below it
        assert effect.max_scroll_y == 0  # the whole effect is in view
        assert "Type the lock's name to break it anyway: deploy" in text
        assert any("▶ reason" in line for line in lines)
        assert any("Do nothing" in line and "Break" in line for line in lines)
        # Every segment of the path is whole on some line: folded after a `/`, never cut.
        for segment in str(path).split("/"):
            if segment:
                assert any(segment in line for line in lines), (segment, text)
        assert "…" not in text


def test_fold_breaks_paths_after_a_separator_and_words_at_spaces() -> None:
    text = "rename /srv/locks/deploy.lock to /srv/locks/.lockwatch-broken/deploy.lock@now"
    for width in range(20, 90):
        lines = fold_lines(text, width)
        assert all(len(line) <= width for line in lines), (width, lines)
        # Broken only at a space (which the break takes) or after a `/`.
        joined = "".join(line if line.endswith("/") else line + " " for line in lines)
        assert joined.strip() == text, (width, lines)
    assert fold_lines(text, 30) == [
        "rename /srv/locks/deploy.lock",
        "to /srv/locks/",
        ".lockwatch-broken/",
        "deploy.lock@now",
    ]
    # A name longer than the line, with no separator at all: cut by cells, nothing lost.
    assert fold_lines("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


@pytest.mark.parametrize(
    ("pid", "said"), [(100, "is alive: it may wake"), (4242, "is not running")]
)
async def test_a_steal_says_whether_the_holder_may_wake(scene: Scene, pid: int, said: str) -> None:
    scene.write("deploy.lock", tower("deploy", heartbeat=600, pid=pid))
    app = scene.app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"), "S")
        text = "\n".join(box_lines(plain_text(app)))
        assert f"Its holder (pid {pid}) {said}" in text, text
