"""No worker error vanishes (issue 43 item 2): the dashboard's workers run with
exit_on_error=False, so a failure inside one — in acting, or in reporting what
was done (a kind with no done event once raised KeyError there) — used to leave
no notification and no event. Each failure is injected here into the real flow,
session and audit log, on a real lock file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockwatch.actions.audit import INTENT
from lockwatch.model.events import EventKind
from lockwatch.ui import flow as flow_module
from tests.ui.fakes import flow_of
from tests.ui.test_actions_ui import (
    Scene,
    generic,
    notes,
    open_action,
    press_confirm,
    type_into,
    until,
)

SIZE = (120, 36)
REASON = "holder died"


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    yield Scene(tmp_path)


def failures(app: Any, lock_id: str) -> list[str]:
    return [
        event.detail
        for event in app.board.events
        if event.kind is EventKind.ACTION_FAILED and event.lock_id == lock_id
    ]


async def test_an_action_that_raises_is_told_and_noted(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    scene.write("job.lock", generic(4242, "bob"))  # pid 4242 is dead: stale
    app = scene.app()
    session = flow_of(app).actions

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(session, "run", broken)
    async with app.run_test(size=SIZE) as pilot:
        await open_action(pilot, scene.id("job.lock"))
        await type_into(pilot, "#reason", REASON)
        await press_confirm(pilot)
        await until(pilot, lambda: any("break failed" in n for n in notes(app)), "the notice")
        said = next(n for n in notes(app) if "break failed" in n)
        assert "RuntimeError: the disk is on fire" in said
        assert "lockwatch audit" in said  # never "nothing done": it may have been
        (detail,) = failures(app, scene.id("job.lock"))
        assert "the disk is on fire" in detail


async def test_a_report_that_raises_after_the_action_is_told_and_noted(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renew case: done and audited, then its report raised (a done event
    missing from a table); the operator hears of it and the event says so."""
    scene.write("job.lock", generic(4242, "bob"))
    app = scene.app()

    def missing(kind: Any) -> str:
        raise KeyError(kind)

    monkeypatch.setattr(flow_module, "done_event", missing)
    async with app.run_test(size=SIZE) as pilot:
        await open_action(pilot, scene.id("job.lock"))
        await type_into(pilot, "#reason", REASON)
        await press_confirm(pilot)
        await until(pilot, lambda: any("break failed" in n for n in notes(app)), "the notice")
        assert not scene.paths["job.lock"].exists()  # it was done
        assert scene.events() == [INTENT, "lock_broken"]  # and audited
        (detail,) = failures(app, scene.id("job.lock"))
        assert "KeyError" in detail and "whether it was done" in detail


async def test_a_heartbeat_that_raises_is_told(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    scene.write("job.lock", generic(4242, "bob"))
    app = scene.app()
    flow = flow_of(app)

    def broken(now: Any) -> list[str]:
        raise OSError("stale NFS handle")

    monkeypatch.setattr(flow.actions, "due", lambda now: True)
    monkeypatch.setattr(flow.actions, "heartbeat", broken)
    async with app.run_test(size=SIZE) as pilot:
        flow.keep_holdings()
        await until(pilot, lambda: any("heartbeat failed" in n for n in notes(app)), "notice")
        assert any(
            e.kind is EventKind.ACTION_FAILED and "stale NFS handle" in e.detail
            for e in app.board.events
        )
