"""Act from where you see it: in the Contention view, b, c and enter work on the
selected session; the root blocker of a chain is a few keys away."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockwatch.actions.session import ActionSession
from lockwatch.clock import FrozenClock
from lockwatch.model.changes import ChangeSet
from lockwatch.model.status import SourceStatus
from lockwatch.ui.confirm import ConfirmScreen
from lockwatch.ui.contention import ContentionTree
from lockwatch.ui.keys import View
from tests.conftest import LOCAL_HOST, NOW
from tests.facts_of import PgLock, pg_of
from tests.ui.fakes import make_app, mixed_scenario, settle, until

SIZE = (120, 36)
ROOT_PID = 4242  # mixed_scenario: the billing session everybody waits behind


def session(tmp_path: Path) -> ActionSession:
    return ActionSession(
        clock=FrozenClock(NOW),
        host=LOCAL_HOST,
        roots=[str(tmp_path)],
        audit_log=tmp_path / "audit.jsonl",
        operator="alice",
        dsns={"monitor@db1:5432/app": "postgresql://monitor@db1:5432/app"},
    )


async def test_b_on_the_root_blocker_in_the_contention_view(tmp_path: Path) -> None:
    app = make_app(mixed_scenario(), actions=session(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # From the Locks view: tab (the cursor starts on the first root blocker), b.
        await pilot.press("tab")
        await pilot.pause()
        tree = app.screen.query_one(ContentionTree)
        target = tree.selected_lock
        assert target is not None
        lock = app.board.entries[target].lock
        assert (
            isinstance(lock.facts, PgLock)
            and pg_of(lock).backend.pid == ROOT_PID
            and pg_of(lock).granted
        )
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        screen = app.screen
        assert isinstance(screen, ConfirmScreen)
        assert screen._title == f"Break {lock.name}?"
        assert any("pg_terminate_backend" in value for _, value in screen._lines)
        # Then the reason and enter, which goes to the action's button: 4 keys in
        # all (tab, b, enter, enter) plus the reason, and the session's name where
        # its staleness is only inferred (a client on another host).
        await pilot.press(*"root blocker of the billing chain", "enter")
        await pilot.pause()
        if screen._must_type is not None:
            assert app.focused is screen.query_one("#must-type")
            await pilot.press(*screen._must_type, "enter")
            await pilot.pause()
        assert app.focused is screen.query_one("#confirm")


async def test_enter_on_a_session_opens_its_lock_in_the_locks_view(tmp_path: Path) -> None:
    app = make_app(mixed_scenario(), actions=session(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("tab", "down")
        await pilot.pause()
        target = app.screen.query_one(ContentionTree).selected_lock
        assert target is not None
        await pilot.press("enter")
        await pilot.pause()
        assert app.current is View.LOCKS
        assert app.locks.table.selected == target
        assert app.locks.detail.display


async def test_a_heading_offers_no_action(tmp_path: Path) -> None:
    app = make_app(mixed_scenario(), actions=session(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("tab", "up")
        await pilot.pause()
        assert app.screen.query_one(ContentionTree).selected_lock is None  # the server's heading
        # Not offered (the footer has no Break), and b does nothing.
        assert not any(b.binding.action == "break_lock" for b in app.active_bindings.values())
        await pilot.press("b")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)


async def test_steal_and_mark_stay_in_the_locks_view(tmp_path: Path) -> None:
    app = make_app(mixed_scenario(), actions=session(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("tab")
        await pilot.pause()
        bound = {active.binding.action for active in app.screen.active_bindings.values()}
        assert not {"steal_lock", "mark", "clear_marks", "release_lock"} & bound
        assert {"break_lock", "cancel_query", "copy_id"} <= bound


@pytest.mark.parametrize(
    ("statuses", "hint"),
    [
        # A server is watched and simply has no locks now: nothing to add --pg for.
        ((SourceStatus("postgres", "app@db1:5432/app", "connected", updated_at=NOW),), False),
        ((SourceStatus("kernel", "kernel", "ok", updated_at=NOW),), False),
        ((SourceStatus("file", "/srv/locks", "watching"),), True),
    ],
)
async def test_no_contention_suggests_a_source_only_when_none_is_watched(
    statuses: tuple[SourceStatus, ...], hint: bool
) -> None:
    app = make_app([ChangeSet("only", NOW, statuses)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("tab")
        await until(pilot, lambda: app.current is View.CONTENTION, "the contention view")
        tree = app.screen.query_one(ContentionTree)
        text = " ".join(str(node.label) for node in tree.root.children)
        assert "No contention" in text
        assert ("add --pg DSN or --kernel" in text) is hint
