"""A break that can be carried out more than one way offers the choice in its
dialog, as its source offers it (issue 37, item 1): a kernel lock's holders are
signalled TERM then KILL after a grace (the default), TERM only, or KILL now,
and the effect says what the chosen way does before anything is sent. A lock
whose source offers one way shows no choice.

The locks are the kernel scenario's (tests/ui/fakes.py: an imitation of what
/proc/locks and the file feed report, nothing is signalled here; the real
flock tree is tests/kernel/test_dashboard_break.py's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import Input

from lockwatch.actions.session import ActionSession
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.confirm import ChoiceRow, EnterHint
from tests.ui.fakes import (
    KERNEL_FREE_ID,
    LOCAL_HOST,
    frozen_clock,
    kernel_scenario,
    make_app,
    settle,
)
from tests.ui.test_actions_ui import confirm_screen, open_action, screen_text

BUILD = "build.lock"


def session(tmp_path: Path) -> ActionSession:
    return ActionSession(
        clock=frozen_clock(),
        host=LOCAL_HOST,
        roots=["/srv"],
        audit_log=tmp_path / "audit.jsonl",
        operator="alice",
    )


def kernel_holder_id(app: LockwatchApp) -> str:
    """The kernel's own row for build.lock (held, not the waiter's)."""
    for lock_id, entry in app.board.entries.items():
        facts = entry.lock.facts
        if isinstance(facts, KernelFacts) and entry.lock.name == BUILD and not facts.waiting:
            return lock_id
    raise AssertionError("no kernel row for build.lock")


def focus_of(screen: Any) -> str | None:
    focused = screen.focused
    return None if focused is None else str(focused.id)


def effect(app: LockwatchApp) -> str:
    return " ".join(screen_text(confirm_screen(app)).split())


async def test_the_signal_is_chosen_in_the_dialog_and_the_effect_follows(
    tmp_path: Path,
) -> None:
    app = make_app(kernel_scenario(), actions=session(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        await open_action(pilot, kernel_holder_id(app))
        screen = confirm_screen(app)
        row = screen.query_one(ChoiceRow)
        # The default first, marked in characters; the reason has the focus.
        assert str(row.content).startswith("(•) TERM, then KILL after 10 s"), row.content
        assert "( ) TERM only" in str(row.content) and "( ) KILL now" in str(row.content)
        assert focus_of(screen) == "reason"
        assert "SIGKILL (no clean-up) to any still holding it after 10 s" in effect(app)

        # shift+tab reaches the choice; → picks TERM only; the effect says so.
        await pilot.press("shift+tab")
        assert focus_of(screen) == row.id == "choice"
        assert "▶ signal" in effect(app)
        hint = screen.query_one(EnterHint).render().plain
        assert hint == "←/→: choose the signal · esc: do nothing", hint
        await pilot.press("right")
        await pilot.pause()
        assert str(row.content).startswith("( ) TERM, then KILL"), row.content
        assert "(•) TERM only" in str(row.content)
        said = effect(app)
        assert "send SIGTERM (asks to exit)" in said
        assert "no SIGKILL: if it is still held after 10 s, the break fails naming who" in said
        assert "any still holding it after" not in said

        # Its number picks one too; letters typed there are the reason's.
        await pilot.press("3")
        await pilot.pause()
        assert "(•) KILL now" in str(row.content)
        assert "send SIGKILL (no clean-up)" in effect(app)
        assert "SIGTERM" not in effect(app)
        await pilot.press("l", "e", "f", "t")
        await pilot.pause()
        assert screen.query_one("#reason", Input).value == "left"
        assert "(•) KILL now" in str(row.content)  # still the choice made

        # What is confirmed is what was chosen.
        plan = await _confirmed_plan(pilot, app)
        assert (plan.signal, plan.then_signal) == ("KILL", None)


async def _confirmed_plan(pilot: Any, app: LockwatchApp) -> Any:
    """The plan the confirmation would carry out now (the one it shows)."""
    flow = app.flow
    assert flow is not None
    captured: list[Any] = []
    original = flow._execute

    def execute(plans: list[Any], reason: str, forced: bool, row: str | None = None) -> None:
        captured.extend(plans)

    flow._execute = execute  # type: ignore[method-assign]
    try:
        screen = confirm_screen(app)
        screen.query_one("#must-type", Input).focus()
        await pilot.pause()
        await pilot.press(*BUILD, "enter")
        await pilot.pause()
        await pilot.pause()
    finally:
        flow._execute = original  # type: ignore[method-assign]
    assert len(captured) == 1, captured
    return captured[0]


async def test_a_lock_with_one_way_to_break_it_offers_no_choice(tmp_path: Path) -> None:
    app = make_app(kernel_scenario(), actions=session(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        await open_action(pilot, KERNEL_FREE_ID)
        screen = confirm_screen(app)
        assert not screen.query(ChoiceRow)
        assert "signal" not in effect(app).split()
