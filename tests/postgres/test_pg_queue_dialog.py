"""The dashboard's break of a PostgreSQL queue head (issue 35, item 5): its dialog
offers cancelling the ALTER's statement first (the default: no name to type, the
effect says the queue behind it goes on) and terminating the root that holds the
table second; choosing the root opens the root's own confirmation, which asks
for its name. The locks are an imitation of what a poll of the outage reports
(nothing is signalled here; the real queue is test_pg_ddl_queue.py's)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

from textual.widgets import Button

from lockwatch.actions.session import ActionSession
from lockwatch.model.changes import ChangeSet, judge
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.status import SourceStatus
from lockwatch.sources.postgres.facts import PgBackend, PgLock
from lockwatch.ui.confirm import ChoiceRow
from tests.ui.fakes import LOCAL_HOST, NOW, PG_FEED, PG_SERVER, frozen_clock, make_app, settle
from tests.ui.test_actions_ui import confirm_screen, open_action, screen_text

TARGET = "relation/16384/16999////////"
ROOT, ALTER, READERS = 8100, 8200, (8301, 8302)


def _backend(pid: int, application: str, state: str, query: str) -> PgBackend:
    return PgBackend(
        pid=pid,
        user="app",
        application=application,
        client="10.0.3.7",
        state=state,
        query=query,
        backend_type="client backend",
        state_since=NOW - timedelta(seconds=40),
        xact_start=NOW - timedelta(seconds=45),
        backend_start=NOW - timedelta(hours=2),
    )


def _lock(backend: PgBackend, mode: str, granted: bool, **facts: object) -> Lock:
    pg = PgLock(
        server=PG_SERVER,
        locktype="relation",
        mode=mode,
        granted=granted,
        database="app",
        backend=backend,
        wait_start=None if granted else NOW - timedelta(seconds=30),
        known_held_at=NOW if granted else None,
        **facts,  # type: ignore[arg-type]
    )
    state = "held" if granted else "wait"
    return Lock(
        id=f"pg:{PG_SERVER}:{backend.pid}:{TARGET}:{mode}:{state}",
        source="postgres",
        format="pg_locks",
        name="public.orders",
        path=None,
        holder=Holder(pid=backend.pid, actor=backend.user, session=backend.application),
        acquired_at=None,
        content={"target": TARGET, "pid": backend.pid, "mode": mode, "granted": granted},
        facts=dataclasses.replace(pg, idle_after=60.0),
    )


def outage() -> list[ChangeSet]:
    alter = "ALTER TABLE orders ADD COLUMN note text"
    locks = [
        _lock(
            _backend(ROOT, "report-job", "idle in transaction", "SELECT * FROM orders"),
            "AccessShareLock",
            True,
            blocking=(ALTER,),
            blocking_here=(ALTER,),
        ),
        _lock(
            _backend(ALTER, "migrate", "active", alter),
            "AccessExclusiveLock",
            False,
            blocked_by=(ROOT,),
            blocking=READERS,
            blocking_here=READERS,
            queued_here=READERS,
        ),
        *(
            _lock(
                _backend(pid, "web", "active", "SELECT count(*) FROM orders"),
                "AccessShareLock",
                False,
                blocked_by=(ALTER,),
                queue_heads=(ALTER,),
                queue_head_query=alter,
            )
            for pid in READERS
        ),
    ]
    entries = judge(locks, StaticProcesses(), NOW, LOCAL_HOST)
    status = SourceStatus("postgres", PG_SERVER, "connected", updated_at=NOW)
    return [ChangeSet(PG_FEED, NOW, (status,), full=True, upserts=tuple(entries))]


def head_id() -> str:
    return f"pg:{PG_SERVER}:{ALTER}:{TARGET}:AccessExclusiveLock:wait"


def root_id() -> str:
    return f"pg:{PG_SERVER}:{ROOT}:{TARGET}:AccessShareLock:held"


def session(tmp_path: Path) -> ActionSession:
    return ActionSession(
        clock=frozen_clock(),
        host=LOCAL_HOST,
        roots=[],
        audit_log=tmp_path / "audit.jsonl",
        operator="alice",
    )


def text(app: object) -> str:
    return " ".join(screen_text(confirm_screen(app)).split())  # type: ignore[arg-type]


async def test_cancel_is_the_default_and_the_root_opens_its_own_confirmation(
    tmp_path: Path,
) -> None:
    app = make_app(outage(), actions=session(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        await open_action(pilot, head_id())
        screen = confirm_screen(app)
        row = screen.query_one(ChoiceRow)
        assert str(row.content).startswith("(•) cancel its statement"), row.content
        assert f"( ) terminate root pid {ROOT}" in str(row.content)
        said = text(app)
        assert "Unblock the 2 sessions queued behind migrate" in said
        assert f"call pg_cancel_backend({ALTER})" in said
        assert "the 2 sessions queued behind it" in said
        # The low-risk way asks for no name, and its button says what it does.
        assert not screen.query("#must-type")
        assert "Cancel query" in str(screen.query_one("#confirm", Button).label)

        # The root, chosen: the effect says so; confirming opens the root's own dialog.
        await pilot.press("shift+tab")
        await pilot.press("right")
        await pilot.pause()
        assert f"call pg_terminate_backend({ROOT})" in text(app)
        assert "Break" in str(screen.query_one("#confirm", Button).label)
        await pilot.press("enter")  # from the choice row on to the reason
        assert screen.focused is not None and screen.focused.id == "reason"
        for key in "outage":
            await pilot.press(key)
        await pilot.press("enter")
        await pilot.pause()
        root_screen = confirm_screen(app)
        assert root_screen is not screen
        root_said = text(app)
        assert root_said.startswith("Terminate report-job"), root_said
        assert f"call pg_terminate_backend({ROOT})" in root_said
        assert root_screen.query("#must-type"), "the root's name must be typed"
        # Nothing was done: no audit record yet.
        assert (
            not (tmp_path / "audit.jsonl").exists()
            or not (tmp_path / "audit.jsonl").read_text().strip()
        )
