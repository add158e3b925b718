"""The dashboard's actions driven by their keys, on real lock files: break (b), steal
(S), release (r), bulk break of marked rows (space, b), quitting while holding a lock,
the compare-and-swap, the watched roots, --readonly and an audit log that cannot be
written.

Every test writes real lock files into a temp directory, reads them back with the
scanner (`lockwatch.sources.files.scanner.load`) and judges them at NOW, exactly as the
file feed does; a `StaticFeed` puts them on the board. The board does not follow the
disk afterwards, so what a test sees on disk is what the action did and nothing else.
The app and its ActionSession share one frozen clock; actions run in a thread worker,
which a test waits for (`acted`), never a fixed sleep.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Button, Input, Static

from lockwatch.actions.audit import INTENT, read_records
from lockwatch.actions.session import ActionSession
from lockwatch.clock import FrozenClock
from lockwatch.model.changes import ChangeSet, judge
from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.status import SourceStatus
from lockwatch.model.timestamps import format_timestamp
from lockwatch.sources.files.scanner import load
from lockwatch.sources.files.tombstones import TOMBSTONE_DIR
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.confirm import ConfirmScreen, EnterHint, QuitScreen
from lockwatch.ui.keys import View
from lockwatch.ui.table import LockTable
from tests.conftest import LOCAL_HOST, NOW, alive, iso
from tests.ui.fakes import StaticFeed, flow_of, make_app, settle

SIZE = (120, 36)
FEED = "files"
OPERATOR = "alice"
REASON = "holder died in the 02:00 deploy"
WAIT_STEPS = 100  # x 0.05 s: a bound for waiting, never a timing assertion
# pid 100 runs; every other pid is dead.
PROCESSES = StaticProcesses(alive(100))
TTL = 60  # tower-fleet locks here: a heartbeat every 20 s keeps them


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def tower(name: str, *, heartbeat: float, pid: int = 100, actor: str = "claude-code") -> str:
    """A tower-fleet/v1 lock: stale once its heartbeat is over TTL seconds old."""
    return json.dumps(
        {
            "lock_version": "v1",
            "lock_name": name,
            "request_id": "req_abc123def456",
            "actor": actor,
            "intent": "deploy-app",
            "intent_version": "1.2.0",
            "host_id": LOCAL_HOST,
            "pid": pid,
            "created_at": iso(ago(heartbeat + 300)),
            "last_heartbeat_at": iso(ago(heartbeat)),
            "ttl_seconds": TTL,
            "metadata": {},
        },
        indent=2,
    )


def generic(pid: int, owner: str) -> str:
    """A generic JSON lock: stale when its pid is dead."""
    return json.dumps({"pid": pid, "host": LOCAL_HOST, "owner": owner, "created_at": iso(ago(600))})


# --- the scene ---------------------------------------------------------------------------------


class Scene:
    """A directory of real lock files, the app on it, and its action session."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.root = tmp_path / "locks"
        self.root.mkdir()
        self.audit = tmp_path / "state" / "audit.jsonl"
        self.clock = FrozenClock(NOW)
        self.paths: dict[str, Path] = {}

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        self.paths[name] = path
        return path

    def id(self, name: str) -> str:
        return f"file:{self.paths[name]}"

    def change_set(self, extra: tuple[Lock, ...] = ()) -> ChangeSet:
        locks: list[Lock] = []
        for path in self.paths.values():
            loaded = load(str(path))
            assert isinstance(loaded, Lock), loaded
            locks.append(loaded)
        entries = judge([*locks, *extra], PROCESSES, NOW, LOCAL_HOST)
        status = SourceStatus("file", str(self.root), "watching", updated_at=NOW)
        return ChangeSet(FEED, NOW, (status,), full=True, upserts=tuple(entries))

    def session(self, audit_log: Path | None = None) -> ActionSession:
        return ActionSession(
            clock=self.clock,
            host=LOCAL_HOST,
            roots=[str(self.root)],
            audit_log=audit_log or self.audit,
            operator=OPERATOR,
        )

    def app(self, *, extra: tuple[Lock, ...] = (), **kwargs: Any) -> LockwatchApp:
        options: dict[str, Any] = {"clock": self.clock, "actions": self.session()}
        options.update(kwargs)
        feed = StaticFeed(FEED, [self.change_set(extra)])
        return make_app(feeds=[feed], **options)

    def records(self) -> list[dict[str, Any]]:
        if not self.audit.exists():
            return []
        found = []
        for _number, record, _raw in read_records(self.audit):
            assert record is not None
            found.append(record)
        return found

    def events(self) -> list[str]:
        return [record["event"] for record in self.records()]

    def tombstones(self) -> list[Path]:
        where = self.root / TOMBSTONE_DIR
        return sorted(where.iterdir()) if where.is_dir() else []


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    yield Scene(tmp_path)


# --- helpers -----------------------------------------------------------------------------------


async def until(pilot: Pilot[Any], condition: Callable[[], bool], what: str) -> None:
    for _ in range(WAIT_STEPS):
        if condition():
            return
        await pilot.pause(0.05)
    assert condition(), f"never happened: {what}"


async def acted(pilot: Pilot[Any]) -> None:
    """Let a dismissed confirmation start its worker, wait for the action and heartbeat
    workers (not all workers: the feeds' never complete), then let `_report` run."""
    app = pilot.app
    await pilot.pause()
    running = [w for w in app.workers if w.group in ("actions", "heartbeat") and not w.is_finished]
    if running:
        await app.workers.wait_for_complete(running)
    await pilot.pause()
    await pilot.pause()


async def select(pilot: Pilot[Any], lock_id: str) -> None:
    app = pilot.app
    assert isinstance(app, LockwatchApp)
    assert lock_id in app.board, lock_id
    app.query_one("#table", LockTable).select(lock_id)
    await pilot.pause()


async def open_action(pilot: Pilot[Any], lock_id: str, key: str = "b") -> None:
    """Select `lock_id` and press an action's key: its confirmation opens (or a
    refusal is said)."""
    await select(pilot, lock_id)
    await pilot.press(key)
    await pilot.pause()


def showing(app: LockwatchApp, kind: type) -> bool:
    """Whether a screen of `kind` is on top (a call: each check looks afresh)."""
    return isinstance(app.screen, kind)


def confirm_screen(app: LockwatchApp) -> ConfirmScreen:
    screen = app.screen
    assert isinstance(screen, ConfirmScreen), f"no confirmation on screen: {screen!r}"
    return screen


def screen_text(screen: Any) -> str:
    """Every Static's text on `screen` (not the buttons'), plainly, one per line."""
    parts = []
    for static in screen.query(Static):
        if isinstance(static, Button):
            continue
        content = static.content
        if isinstance(content, str | Text):
            parts.append(str(content))
            continue
        console = Console(width=1000, record=True, file=io.StringIO())
        console.print(content)
        parts.append(console.export_text())
    return "\n".join(parts)


def confirm_button(app: LockwatchApp) -> Button:
    return confirm_screen(app).query_one("#confirm", Button)


async def type_into(pilot: Pilot[Any], field: str, text: str) -> None:
    """Focus the confirmation's input `field` and type `text` as keys."""
    screen = confirm_screen(pilot.app)  # type: ignore[arg-type]
    screen.query_one(field, Input).focus()
    await pilot.pause()
    await pilot.press(*text)
    await pilot.pause()


async def press_confirm(pilot: Pilot[Any]) -> None:
    button = confirm_button(pilot.app)  # type: ignore[arg-type]
    assert not button.disabled
    button.focus()
    await pilot.pause()
    await pilot.press("enter")
    await acted(pilot)


def hint(app: LockwatchApp) -> str:
    """What the confirmation's hint line says now (why enter did nothing, too)."""
    return str(confirm_screen(app).query_one("#confirm-hint", EnterHint).render())


def notes(app: LockwatchApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


def exit_messages(app: LockwatchApp, monkeypatch: pytest.MonkeyPatch) -> Callable[[], str]:
    """Record what the app prints once it is gone (`exit(message=...)`)."""
    messages: list[str] = []
    real_exit = app.exit

    def exit_(*args: Any, **kwargs: Any) -> None:
        message = kwargs.get("message", args[2] if len(args) > 2 else None)
        if message is not None:
            messages.append(str(message))
        real_exit(*args, **kwargs)

    monkeypatch.setattr(app, "exit", exit_)
    return lambda: "\n".join(messages)


def row_text(app: LockwatchApp, lock_id: str) -> str:
    table = app.query_one("#table", LockTable)
    index = app.rows.index_of(lock_id)
    assert index is not None, f"{lock_id} is not a row"
    return table.render_line(index - table.scroll_offset.y).text


# --- break -------------------------------------------------------------------------------------


@pytest.mark.parametrize("beside", [True, False])
async def test_an_audit_key_beside_its_log_is_told_on_screen(scene: Scene, beside: bool) -> None:
    """`break` warns on stderr; the dashboard's stderr is behind its screen."""
    scene.write("a.lock", generic(31999, "a"))
    key = (scene.audit.parent if beside else scene.tmp / "keys") / "audit.key"
    session = ActionSession(
        clock=scene.clock,
        host=LOCAL_HOST,
        roots=[str(scene.root)],
        audit_log=scene.audit,
        operator=OPERATOR,
        audit_key=key,
    )
    app = scene.app(actions=session)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        told = [note for note in notes(app) if note.startswith("audit: ")]
        if beside:
            assert len(told) == 1 and f"the audit key {key} is kept beside" in told[0]
        else:
            assert told == []


async def test_the_dialog_tells_the_same_time_as_the_table(scene: Scene) -> None:
    """A stale lock's break dialog opened a while after the board judged it says
    the age and heartbeat of the dashboard's clock now, as the table does."""
    scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        lock_id = scene.id("deploy.lock")
        judged = app.board.entries[lock_id].verdict.age_seconds
        assert judged is not None
        scene.clock.advance(7)  # no new change set: the board's verdict stays as it was
        app.tick()
        await pilot.pause()
        row = row_text(app, lock_id)
        await open_action(pilot, lock_id)
        text = screen_text(confirm_screen(app))
        now_age = duration(judged + 7)
        assert f"age {now_age}" in " ".join(text.split()), text
        assert "last heartbeat 10m07s ago" in text, text
        assert duration(judged) not in text
        assert now_age in row  # the table's AGE at the same instant


async def test_break_a_stale_lock(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    before = path.read_bytes()
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        screen = confirm_screen(app)
        # The reason has the focus: typing is the reason, a stray enter confirms nothing.
        assert app.focused is not None and app.focused.id == "reason"
        text = screen_text(screen)
        assert "Break deploy?" in text
        assert str(path) in text
        assert f"rename {path} to {scene.root}/{TOMBSTONE_DIR}/deploy.lock@" in text
        assert "kept, never deleted" in text
        assert "100@testhost claude-code" in text  # the holder
        assert "stale" in text and "heartbeat_expired" in text  # the state and reasons
        # A stale lock: no name to type.
        assert not screen.query("#must-type")
        # Nothing to confirm without a reason; a blank one is no reason.
        assert confirm_button(app).disabled
        await type_into(pilot, "#reason", "   ")
        assert confirm_button(app).disabled
        await type_into(pilot, "#reason", REASON)
        assert not confirm_button(app).disabled
        # Enter in the last field (here the reason: no name to type) confirms.
        await pilot.press("enter")
        await acted(pilot)
        assert not showing(app, ConfirmScreen)

    assert not path.exists()
    (tomb,) = scene.tombstones()
    assert tomb.name.startswith("deploy.lock@")
    assert tomb.read_bytes() == before
    assert scene.events() == [INTENT, "lock_broken"]
    intent, broken = scene.records()
    assert intent["intent"] == "lock_broken"
    assert broken["reason"] == " ".join(REASON.split())
    assert broken["operator"] == OPERATOR
    assert broken["tombstone"] == str(tomb)
    assert broken["forced"] is False
    assert any("broke" in n and str(path) in n for n in notes(app))


async def test_enter_right_away_confirms_nothing_and_escape_cancels(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    before = path.read_bytes()
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        assert showing(app, ConfirmScreen)
        await pilot.press("enter")  # no reason yet: it stays, and says why
        await acted(pilot)
        assert showing(app, ConfirmScreen)
        # Said on the dialog's hint line: a toast would lie over its fields and buttons.
        assert "reason is required" in hint(app)
        assert not any("reason is required" in n for n in notes(app))
        await pilot.press("escape")
        await acted(pilot)
        assert not showing(app, ConfirmScreen)
    assert path.read_bytes() == before
    assert scene.tombstones() == []
    assert scene.records() == []


async def test_after_a_break_the_cursor_goes_on_to_the_next_row(scene: Scene) -> None:
    """Issue 46, item 8: the lock the operator broke leaves the table: the cursor
    is on the row that took its place, where `b` breaks that lock, not on a
    "✖ gone" line where `b` said "Nothing done". Whichever comes first: the
    outcome, or the feed seeing the file go."""
    names = ("a-deploy.lock", "b-deploy.lock", "c-deploy.lock")
    for name in names:
        scene.write(name, tower(name.removesuffix(".lock"), heartbeat=600))
    app = scene.app(sort="name")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.locks.table
        feed = app.feeds[0]
        assert isinstance(feed, StaticFeed)
        await open_action(pilot, scene.id(names[0]))
        await type_into(pilot, "#reason", REASON)
        await pilot.press("enter")
        await acted(pilot)
        assert not scene.paths[names[0]].exists()
        feed.push(ChangeSet(FEED, NOW, removed=(scene.id(names[0]),)))  # the feed sees it go
        await until(pilot, lambda: scene.id(names[0]) not in app.board, "the row gone")
        assert table.gone is None and table.selected == scene.id(names[1])
        assert not app.locks.gone_line.display
        # The feed first this time: the row said gone, until the outcome comes.
        feed.push(ChangeSet(FEED, NOW, removed=(scene.id(names[1]),)))
        await until(pilot, lambda: table.gone is not None, "said gone")
        app.acted_on([scene.id(names[1])])
        await pilot.pause()
        assert table.gone is None and table.selected == scene.id(names[2])
        await pilot.press("b")
        await pilot.pause()
        assert "Break c-deploy?" in screen_text(confirm_screen(app))


async def test_a_dialog_opens_with_no_toast_over_it(scene: Scene) -> None:
    """Issue 46, item 6: `cancelled — nothing done` from the last dialog would lie
    over the next one's name field: a dialog opening clears it."""
    scene.write("deploy.lock", tower("deploy", heartbeat=5))
    app = scene.app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        await pilot.press("escape")
        await pilot.pause()
        assert any("cancelled — nothing done" in n for n in notes(app))
        await pilot.press("b")
        await pilot.pause()
        assert showing(app, ConfirmScreen)
        assert notes(app) == []


async def test_tab_goes_round_the_fields_and_the_buttons(scene: Scene) -> None:
    scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        focused = []
        for _ in range(2):  # the action's button is no stop while it cannot be pressed
            await pilot.press("tab")
            await pilot.pause()
            assert app.focused is not None
            focused.append(app.focused.id)
        assert focused == ["cancel", "reason"], focused
        await type_into(pilot, "#reason", REASON)
        for _ in range(3):
            await pilot.press("tab")
            await pilot.pause()
            assert app.focused is not None
            focused.append(app.focused.id)
        assert focused[2:] == ["cancel", "confirm", "reason"], focused
        # Tab is the confirmation's, not the dashboard's view switch.
        assert showing(app, ConfirmScreen)


async def test_typing_with_cancel_focused_goes_to_the_reason_and_q_never_quits(
    scene: Scene,
) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    before = path.read_bytes()
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        await pilot.press("shift+tab")  # back from the reason to "Do nothing"
        await pilot.pause()
        assert app.focused is not None and app.focused.id == "cancel"
        # "quit…": the q is the reason's first letter, not the dashboard's quit.
        await pilot.press(*"quiet holder")
        await pilot.pause()
        assert showing(app, ConfirmScreen)
        screen = confirm_screen(app)
        assert screen.query_one("#reason", Input).value == "quiet holder"
        assert app.focused is not None and app.focused.id == "reason"
        # On to Cancel, enter still cancels: typing never confirms.
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is not None and app.focused.id == "cancel"
        await pilot.press("enter")
        await acted(pilot)
        assert not showing(app, ConfirmScreen)
        assert app.is_running
    assert path.read_bytes() == before
    assert scene.records() == []


async def test_break_an_active_lock_needs_its_name(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=5))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        lock = scene.id("deploy.lock")
        assert app.board.verdict(lock).state.value == "active"
        await open_action(pilot, lock)
        screen = confirm_screen(app)
        assert app.focused is not None and app.focused.id == "reason"
        text = screen_text(screen)
        assert "deploy is active, not stale" in text
        assert "Type the lock's name to break it anyway: deploy" in text
        await type_into(pilot, "#reason", REASON)
        assert confirm_button(app).disabled  # the name is still missing
        await type_into(pilot, "#must-type", "deplo")
        assert confirm_button(app).disabled
        await type_into(pilot, "#must-type", "x")
        assert confirm_button(app).disabled
        screen.query_one("#must-type", Input).value = ""
        await type_into(pilot, "#must-type", "Deploy")
        assert confirm_button(app).disabled  # exactly: case counts
        screen.query_one("#must-type", Input).value = ""
        await type_into(pilot, "#must-type", "deploy")
        assert not confirm_button(app).disabled
        await press_confirm(pilot)

    assert not path.exists()
    assert len(scene.tombstones()) == 1
    assert scene.events() == [INTENT, "lock_broken"]
    assert scene.records()[-1]["forced"] is True
    assert scene.records()[-1]["state"] == "active"


async def test_a_lock_rewritten_after_the_confirmation_opened_is_not_touched(
    scene: Scene,
) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        await type_into(pilot, "#reason", REASON)
        # Meanwhile its owner comes back and takes it again.
        retaken = tower("deploy", heartbeat=0, pid=4242, actor="ops-bot")
        path.write_text(retaken)
        await press_confirm(pilot)

    assert path.read_text() == retaken
    assert scene.tombstones() == []
    assert scene.events() == [INTENT, "action_refused"]
    refused = scene.records()[-1]
    assert refused["code"] == "changed"
    assert "changed since you saw it" in refused["message"]
    assert any("changed since you saw it" in n for n in notes(app))


# --- steal, heartbeat, release -----------------------------------------------------------------


async def test_steal_heartbeat_and_release(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    before = path.read_bytes()
    app = scene.app()
    lock = scene.id("deploy.lock")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, lock, "S")
        screen = confirm_screen(app)
        assert app.focused is not None and app.focused.id == "reason"
        text = screen_text(screen)
        assert "Steal deploy?" in text
        assert f"write a new tower-fleet/v1 lock there held by {OPERATOR}" in text
        assert not screen.query("#must-type")
        await type_into(pilot, "#reason", REASON)
        await press_confirm(pilot)

        # Written for the operator, the stale one kept in the tombstone.
        doc = json.loads(path.read_text())
        assert doc["actor"] == OPERATOR
        assert doc["host_id"] == LOCAL_HOST
        assert doc["last_heartbeat_at"] == format_timestamp(NOW, precise=False)
        (tomb,) = scene.tombstones()
        assert tomb.read_bytes() == before
        assert scene.events() == [INTENT, "lock_stolen"]
        # Held by you: ★ in the mark column, the holder says so, the header counts it.
        assert app.locks.table.held == {lock}
        row = row_text(app, lock)
        assert row.startswith("★ ")
        assert "★ held by you" in row
        assert "you hold 1 lock(s)" in str(app.mode())
        # The detail pane says it in words too.
        await select(pilot, lock)
        await pilot.press("enter")
        await pilot.pause()
        assert "held by you: lockwatch keeps it alive" in screen_text(app.query_one("#detail"))
        await pilot.press("enter")
        await pilot.pause()

        # A heartbeat once the refresh time has come (a third of the ttl).
        assert app.actions is not None
        flow_of(app).keep_holdings()  # not due yet: nothing written
        await acted(pilot)
        assert json.loads(path.read_text())["last_heartbeat_at"] == doc["last_heartbeat_at"]
        scene.clock.advance(TTL / 3 + 1)
        flow_of(app).keep_holdings()
        await acted(pilot)
        beat = json.loads(path.read_text())
        assert beat["last_heartbeat_at"] == format_timestamp(scene.clock.now(), precise=False)
        assert {k: v for k, v in beat.items() if k != "last_heartbeat_at"} == {
            k: v for k, v in doc.items() if k != "last_heartbeat_at"
        }
        assert app.locks.table.held == {lock}

        # r releases it: moved aside, audited, no longer held.
        await pilot.press("r")
        await pilot.pause()
        screen = confirm_screen(app)
        assert "the lock is free" in screen_text(screen)
        await type_into(pilot, "#reason", "deploy done")
        await press_confirm(pilot)
        assert not path.exists()
        assert len(scene.tombstones()) == 2
        assert scene.events() == [INTENT, "lock_stolen", INTENT, "lock_released"]
        assert app.locks.table.held == set()
        assert "★" not in row_text(app, lock)
        # Quitting now asks nothing.
        await pilot.press("q")
        await pilot.pause()
        assert not showing(app, QuitScreen)


async def test_steal_an_active_lock_is_refused(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=5))
    before = path.read_bytes()
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"), "S")
        assert not showing(app, ConfirmScreen)
        assert any(n.startswith("cannot steal:") and "never allowed" in n for n in notes(app)), (
            notes(app)
        )
        assert app.locks.table.held == set()
    assert path.read_bytes() == before
    assert scene.tombstones() == []


async def test_release_a_lock_lockwatch_does_not_hold_is_refused(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    before = path.read_bytes()
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"), "r")
        assert not showing(app, ConfirmScreen)
        assert any("does not hold this lock" in n for n in notes(app)), notes(app)
    assert path.read_bytes() == before


async def steal(pilot: Pilot[Any], lock_id: str) -> None:
    await open_action(pilot, lock_id, "S")
    await type_into(pilot, "#reason", REASON)
    await press_confirm(pilot)


@pytest.mark.parametrize("choice", ["release", "keep", "stay"])
async def test_quitting_while_holding_a_lock_asks(
    scene: Scene, choice: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app()
    said = exit_messages(app, monkeypatch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await steal(pilot, scene.id("deploy.lock"))
        stolen = path.read_bytes()
        assert app.locks.table.held
        await pilot.press("q")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, QuitScreen)
        assert app.focused is not None and app.focused.id == "stay"
        assert "lockwatch holds 1 lock(s) for you: deploy" in screen_text(screen)
        if choice == "stay":
            await pilot.press("enter")  # Stay has the focus
            await pilot.pause()
            assert not showing(app, QuitScreen)
            assert app.is_running
            await pilot.press("q")
            await pilot.pause()
            assert showing(app, QuitScreen)
            await pilot.press("escape")
            await pilot.pause()
            assert not showing(app, QuitScreen)
            assert app.is_running
        else:
            screen.query_one(f"#{choice}", Button).focus()
            await pilot.pause()
            await pilot.press("enter")
            await acted(pilot)
            await until(pilot, lambda: not app.is_running, "the app to exit")

    if choice == "release":
        # What was done is printed once the dashboard is gone.
        assert f"released {path}" in said(), said()
        assert not path.exists()
        assert len(scene.tombstones()) == 2
        assert scene.events()[-2:] == [INTENT, "lock_released"]
        assert scene.records()[-1]["reason"] == "released on quitting lockwatch"
    else:
        assert path.read_bytes() == stolen
        assert scene.events() == [INTENT, "lock_stolen"]


# --- bulk --------------------------------------------------------------------------------------


async def test_bulk_break_of_marked_rows(scene: Scene) -> None:
    stale_a = scene.write("alpha.lock", tower("alpha", heartbeat=600))
    stale_b = scene.write("worker.lock", generic(31999, "nightly"))
    active = scene.write("deploy.lock", tower("deploy", heartbeat=5))
    kept = scene.write("zulu.lock", tower("zulu", heartbeat=700))  # stale, never marked
    active_bytes, kept_bytes = active.read_bytes(), kept.read_bytes()
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.board.verdict(scene.id("worker.lock")).state.value == "stale"
        marked_ids = [scene.id(n) for n in ("alpha.lock", "worker.lock", "deploy.lock")]
        for lock in marked_ids:
            await select(pilot, lock)
            await pilot.press("space")
            await pilot.pause()
        assert app.locks.table.marked == set(marked_ids)
        for lock in marked_ids:
            assert row_text(app, lock).startswith("● "), row_text(app, lock)
        assert not row_text(app, scene.id("zulu.lock")).startswith("●")
        assert "3 marked (space)" in str(app.mode())
        # space again unmarks; and marks again.
        await select(pilot, scene.id("worker.lock"))
        await pilot.press("space")
        await pilot.pause()
        assert scene.id("worker.lock") not in app.locks.table.marked
        assert "2 marked" in str(app.mode())
        await select(pilot, scene.id("worker.lock"))
        await pilot.press("space")
        await pilot.pause()

        # A filter that hides one of the marked rows.
        await pilot.press("slash")
        await pilot.press(*"!worker")
        await pilot.press("enter")
        await pilot.pause()
        assert scene.id("worker.lock") not in app.rows.ids
        await pilot.press("b")
        await pilot.pause()
        screen = confirm_screen(app)
        assert app.focused is not None and app.focused.id == "reason"
        text = screen_text(screen)
        assert "Break 3 marked locks?" in text
        assert "3 lock(s)" in text
        assert "1 of them hidden by the current filter" in text
        assert "1 of them is not stale" in text
        assert "Type the number of marked locks to confirm: 3" in text
        await type_into(pilot, "#reason", REASON)
        assert confirm_button(app).disabled
        await type_into(pilot, "#must-type", "2")
        assert confirm_button(app).disabled
        screen.query_one("#must-type", Input).value = ""
        await type_into(pilot, "#must-type", "3")
        await press_confirm(pilot)
        assert app.locks.table.marked == set()
        assert any("2 done, 1 refused" in n for n in notes(app)), notes(app)

    assert not stale_a.exists() and not stale_b.exists()
    assert active.read_bytes() == active_bytes
    assert kept.read_bytes() == kept_bytes
    assert len(scene.tombstones()) == 2
    records = scene.records()
    # One intent and one result per lock: each its own action.
    by_path: dict[str, list[str]] = {}
    for record in records:
        by_path.setdefault(record["target"]["path"], []).append(record["event"])
    assert by_path == {
        str(stale_a): [INTENT, "lock_broken"],
        str(stale_b): [INTENT, "lock_broken"],
        str(active): ["action_refused"],
    }
    refused = next(r for r in records if r["event"] == "action_refused")
    assert refused["code"] == "not_stale"
    assert len({r["action_id"] for r in records}) == 3


async def test_bulk_break_cancelled_keeps_the_marks(scene: Scene) -> None:
    path = scene.write("alpha.lock", tower("alpha", heartbeat=600))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select(pilot, scene.id("alpha.lock"))
        await pilot.press("space")
        await pilot.press("b")
        await pilot.pause()
        assert "Break 1 marked locks?" in screen_text(confirm_screen(app))
        await pilot.press("escape")
        await acted(pilot)
        assert app.locks.table.marked == {scene.id("alpha.lock")}
    assert path.exists()
    assert scene.records() == []


# --- refusals ----------------------------------------------------------------------------------


async def test_a_lock_outside_the_watched_roots_is_refused(scene: Scene, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outside = elsewhere / "other.lock"
    outside.write_text(tower("other", heartbeat=600))
    before = outside.read_bytes()
    loaded = load(str(outside))
    assert isinstance(loaded, Lock)
    scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app(extra=(loaded,))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select(pilot, loaded.id)
        for key in ("b", "S"):
            await pilot.press(key)
            await pilot.pause()
            assert not showing(app, ConfirmScreen)
        refusals = [n for n in notes(app) if "outside the watched roots" in n]
        assert len(refusals) == 2, notes(app)
        assert str(outside) in refusals[0]
    assert outside.read_bytes() == before
    assert not (elsewhere / TOMBSTONE_DIR).exists()


async def test_readonly_has_no_action_keys(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    before = path.read_bytes()
    app = scene.app(readonly=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.actions is None
        await select(pilot, scene.id("deploy.lock"))
        for key in ("b", "S", "c", "r", "space"):
            await pilot.press(key)
            await pilot.pause()
            assert app.screen is app.screen_stack[0], key
        assert app.locks.table.marked == set()
        # The action keys are gone, not merely disabled: the footer does not offer them.
        offered = {
            active.binding.description
            for active in app.active_bindings.values()
            if active.binding.show and active.enabled
        }
        assert not offered & {"Mark", "Break", "Steal", "Cancel query", "Release"}
        assert {"Filter", "Quit"} <= offered
        assert "READ-ONLY" in str(app.mode())
        assert notes(app) == []
    assert path.read_bytes() == before
    assert not scene.audit.exists()


async def test_the_footer_shows_the_action_keys(scene: Scene) -> None:
    scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        shown = {
            active.binding.description
            for active in app.active_bindings.values()
            if active.binding.show and active.enabled
        }
        assert {"Mark", "Break", "Steal"} <= shown


async def test_an_unwritable_audit_log_refuses_the_action(scene: Scene) -> None:
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    before = path.read_bytes()
    blocker = scene.tmp / "not-a-dir"
    blocker.write_text("a regular file where the audit log's directory should be")
    app = scene.app(actions=scene.session(audit_log=blocker / "audit.jsonl"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        await type_into(pilot, "#reason", REASON)
        await press_confirm(pilot)
        refused = [n for n in notes(app) if "audit log" in n]
        assert refused, notes(app)
        assert "nothing was done" in refused[0]
        assert refused[0].startswith("action refused:")
    assert path.read_bytes() == before
    assert scene.tombstones() == []


async def test_overlapping_heartbeats_never_lose_the_lock(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A heartbeat that takes longer than the 1 s between `_keep_holdings` calls (a slow
    filesystem) must not race the next one: the loser's compare-and-swap would fail and
    lockwatch would let go of a lock it still holds on disk."""
    import threading

    from lockwatch.sources.files import cas as files

    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    session = scene.session()
    app = scene.app(actions=session)
    real_rewrite = files.rewrite
    entered, gate = threading.Event(), threading.Event()
    calls = 0

    def slow_rewrite(*args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            entered.set()
            gate.wait(10)
        real_rewrite(*args, **kwargs)

    in_flight = 0
    real_heartbeat = session.heartbeat

    def counted(now: datetime) -> list[str]:
        nonlocal in_flight
        in_flight += 1
        try:
            return real_heartbeat(now)
        finally:
            in_flight -= 1

    monkeypatch.setattr(files, "rewrite", slow_rewrite)
    monkeypatch.setattr(session, "heartbeat", counted)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await steal(pilot, scene.id("deploy.lock"))
        assert session.held_ids() == {scene.id("deploy.lock")}
        scene.clock.advance(TTL / 3 + 1)
        flow_of(app).keep_holdings()  # the first heartbeat: stuck writing
        await until(pilot, entered.is_set, "the first heartbeat to start writing")
        flow_of(app).keep_holdings()  # the next tick comes while it is still writing
        await until(pilot, lambda: in_flight == 1, "the second heartbeat to finish")
        gate.set()
        await until(pilot, lambda: in_flight == 0, "the first heartbeat to finish")
        await acted(pilot)
        beat = json.loads(path.read_text())
        assert beat["last_heartbeat_at"] == format_timestamp(scene.clock.now(), precise=False)
        assert session.held_ids() == {scene.id("deploy.lock")}
        assert app.locks.table.held == {scene.id("deploy.lock")}
        assert not any("no longer held" in n for n in notes(app)), notes(app)


async def test_breaking_a_lock_you_hold_lets_go_of_it(scene: Scene) -> None:
    """b instead of r on a lock lockwatch holds: it is broken like any other, and
    lockwatch stops holding it (no ★ left behind, no "lock lost" at the next heartbeat)."""
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app()
    lock = scene.id("deploy.lock")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await steal(pilot, lock)
        assert app.locks.table.held == {lock}
        # The feed reads the lock lockwatch wrote: active, held by the operator.
        feed = app.feeds[0]
        assert isinstance(feed, StaticFeed)
        feed.push(scene.change_set())
        await pilot.pause()
        assert app.board.verdict(lock).state.value == "active"
        await open_action(pilot, lock)
        await type_into(pilot, "#reason", "done with it")
        await type_into(pilot, "#must-type", "deploy")
        await press_confirm(pilot)
        assert not path.exists()
        assert scene.events()[-2:] == [INTENT, "lock_broken"]
        assert app.locks.table.held == set()
        assert "★" not in row_text(app, lock)
        scene.clock.advance(TTL)
        flow_of(app).keep_holdings()
        await acted(pilot)
        assert not any("lock lost" in n for n in notes(app)), notes(app)
        await pilot.press("q")
        await pilot.pause()
        assert not showing(app, QuitScreen)


async def test_action_keys_act_only_in_the_locks_view(scene: Scene) -> None:
    """In the contention and events views the table's selection is not on screen: the
    action keys must not act on a lock the operator cannot see (in the Contention
    view b and c act on the selected session only: here there is none)."""
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    before = path.read_bytes()
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select(pilot, scene.id("deploy.lock"))
        for view in (View.CONTENTION, View.EVENTS):
            await pilot.press("tab")
            await pilot.pause()
            assert app.current is view
            for key in ("b", "S", "r", "c"):
                await pilot.press(key)
                await pilot.pause()
                assert app.screen is app.screen_stack[0], (view, key)
            offered = {
                active.binding.description
                for active in app.active_bindings.values()
                if active.binding.show and active.enabled
            }
            assert not offered & {"Mark", "Steal"}, (view, offered)
            if view is View.EVENTS:
                assert "Break" not in offered
        assert app.locks.table.marked == set()
        assert all("no lock selected" in note for note in notes(app)), notes(app)
        # Back in the locks view they work again.
        await pilot.press("tab")
        await pilot.pause()
        assert app.current is View.LOCKS
        await pilot.press("b")
        await pilot.pause()
        assert showing(app, ConfirmScreen)
    assert path.read_bytes() == before


async def test_a_release_refused_on_quitting_is_said(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone rewrote the lock lockwatch held: releasing it on quitting is refused, the
    lock is left alone, and the operator is told once the dashboard is gone."""
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app()
    said = exit_messages(app, monkeypatch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await steal(pilot, scene.id("deploy.lock"))
        theirs = tower("deploy", heartbeat=0, pid=4242, actor="ops-bot")
        path.write_text(theirs)
        await pilot.press("q")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, QuitScreen)
        screen.query_one("#release", Button).focus()
        await pilot.pause()
        await pilot.press("enter")
        await acted(pilot)
        await until(pilot, lambda: not app.is_running, "the app to exit")
    assert path.read_text() == theirs
    assert scene.events()[-2:] == [INTENT, "action_refused"]
    assert "changed since you saw it" in said(), said()


async def test_a_small_terminal_shows_the_fields_and_buttons_at_once(scene: Scene) -> None:
    """80x24 cannot show the tallest confirmation whole: the facts scroll
    (pgdn), while the reason, the name and both buttons are in view from the
    start, without scrolling."""
    path = scene.write("deploy.lock", tower("deploy", heartbeat=5))
    app = scene.app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await open_action(pilot, scene.id("deploy.lock"))
        await pilot.pause()
        screen = confirm_screen(app)
        box = screen.query_one("#confirm-box")
        facts = screen.query_one("#confirm-facts")

        def on_screen(widget_id: str) -> bool:
            region = screen.query_one(widget_id).region
            return region.height > 0 and box.region.contains_region(region)

        for widget_id in (
            "#confirm-title",
            "#confirm-effect",
            "#reason",
            "#must-type",
            "#cancel",
            "#confirm",
        ):
            assert on_screen(widget_id), widget_id
        assert box.max_scroll_y == 0  # nothing of the box itself is out of view
        assert facts.max_scroll_y > 0  # the facts are what scrolls
        await pilot.press("pagedown")
        await pilot.pause()
        assert facts.scroll_y > 0
        for widget_id, keys in (("#reason", REASON), ("#must-type", "deploy")):
            screen.query_one(widget_id).focus()
            await pilot.pause()
            await pilot.press(*keys)
        await press_confirm(pilot)
    assert not path.exists()
    assert scene.events() == [INTENT, "lock_broken"]


async def test_a_terminal_that_goes_away_keeps_held_locks_and_audits_them(scene: Scene) -> None:
    """SIGHUP or EIO on the tty: lockwatch leaves at once, as a crash would leave
    things (the stolen lock file stays, naming this process), and says so in the
    audit log."""
    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    audit = scene.root.parent / "hangup-audit.jsonl"
    session = scene.session(audit_log=audit)
    app = scene.app(actions=session)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await steal(pilot, scene.id("deploy.lock"))
        held = path.read_bytes()
        app._terminal_gone("SIGHUP")
        await pilot.pause()
    assert app.return_code == 129
    assert path.read_bytes() == held  # kept, not released
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    kept = records[-1]
    assert kept["event"] == "locks_kept"
    assert kept["reason"] == "lockwatch's terminal went away (SIGHUP)"
    assert kept["kept"] == [{"id": scene.id("deploy.lock"), "name": "deploy"}]


async def test_a_stolen_lock_never_looks_late(scene: Scene) -> None:
    """The dashboard's heartbeat for a lock it holds comes well inside the
    format's lateness threshold: judged at every tick for over a ttl, the lock is
    never `heartbeat_late`, let alone stale."""
    from lockwatch.model.verdict import State, evaluate

    path = scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await steal(pilot, scene.id("deploy.lock"))
        # Ticks as a busy dashboard has them: about a second apart, never aligned.
        # Judged just before each tick: what anyone else sees between heartbeats.
        for _ in range(45):  # 76 s: the old 20 s rhythm would be late three times
            scene.clock.advance(1.7)
            held = load(str(path))
            assert isinstance(held, Lock)
            verdict = evaluate(held, PROCESSES, scene.clock, LOCAL_HOST)
            assert verdict.state is State.ACTIVE, verdict
            assert "heartbeat_late" not in verdict.codes, (scene.clock.now(), verdict)
            flow_of(app).keep_holdings()
            await acted(pilot)
