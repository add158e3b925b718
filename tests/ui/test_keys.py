"""One key table (lockwatch/ui/keys.py) for the bindings, the footer, the `?`
help, the command palette and `lockwatch watch --help`: they must agree."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.binding import Binding, BindingType
from textual.command import CommandPalette
from textual.widget import Widget

from lockwatch.cli.watch import WATCH_EPILOG
from lockwatch.model.changes import ChangeSet, judge
from lockwatch.model.process import StaticProcesses
from lockwatch.model.status import SourceStatus
from lockwatch.sources.files.decoders import decode_file
from lockwatch.ui.app import SCREENS, LockwatchApp, ReplayApp
from lockwatch.ui.confirm import QuitScreen
from lockwatch.ui.keys import (
    MOVES,
    Group,
    Key,
    Move,
    View,
    all_keys,
    app_keys,
    epilog,
    help_rows,
    keys_of,
    view_keys,
)
from lockwatch.ui.panels import HelpScreen
from lockwatch.ui.screens.base import Movable
from tests.conftest import LOCAL_HOST, NOW, lock_file
from tests.ui.fakes import (
    PG_FEED,
    PG_SERVER,
    _backend,
    _pg_lock,
    ago,
    make_app,
    mixed_scenario,
    settle,
    until,
)
from tests.ui.test_actions_ui import Scene, steal, tower

SIZE = (120, 36)


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    return Scene(tmp_path)


def test_every_key_names_an_action_where_it_applies() -> None:
    """A key for every view is the App's action; any other, each of its views' screen's."""
    for key in all_keys():
        if key.action is None:
            continue
        if key.everywhere:
            owners: list[type[object]] = [ReplayApp if key.group is Group.REPLAY else LockwatchApp]
        else:
            owners = [SCREENS[view] for view in key.views]
        for owner in owners:
            assert callable(getattr(owner, f"action_{key.action}", None)), (key, owner)


def _bound(bindings: list[BindingType]) -> set[tuple[str, str, bool]]:
    return {(b.key, b.action, b.show) for b in bindings if isinstance(b, Binding)}


def test_the_bindings_are_the_table() -> None:
    def wanted(keys: list[Key]) -> set[tuple[str, str, bool]]:
        return {(k.keys, k.action, k.footer) for k in keys if k.action}

    assert _bound(LockwatchApp.BINDINGS) == wanted(app_keys(Group.VIEW, Group.ACTION))
    for view, screen in SCREENS.items():
        assert _bound(screen.BINDINGS) == wanted(view_keys(view, Group.VIEW, Group.ACTION)), view
    # Every key of the table is bound somewhere, once per view it works in.
    everywhere = len(_bound(LockwatchApp.BINDINGS))
    per_view = sum(len(_bound(screen.BINDINGS)) for screen in SCREENS.values())
    keys = keys_of(Group.VIEW, Group.ACTION)
    assert everywhere + per_view == sum(
        1 if k.everywhere else len(k.views) for k in keys if k.action
    )
    replay = {(b.key, b.action) for b in ReplayApp.BINDINGS if isinstance(b, Binding)}
    assert replay == {(k.keys, k.action) for k in keys_of(Group.REPLAY) if k.everywhere}


def test_no_key_is_bound_twice() -> None:
    seen: dict[str, str] = {}
    for key in all_keys():
        for name in key.keys.split(","):
            assert name not in seen, f"{name} bound to {seen[name]} and {key.action}"
            seen[name] = str(key.action)


def test_the_cli_help_lists_every_labelled_key() -> None:
    assert epilog() in WATCH_EPILOG
    for key in all_keys():
        if key.label and key.group is not Group.REPLAY:
            assert f"{key.shown} {key.label.lower()}" in " ".join(WATCH_EPILOG.split())


async def test_the_help_screen_shows_every_key_of_the_table(scene: Scene) -> None:
    app = scene.app(actions=scene.session())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(screen._text())
        lines = console.export_text().splitlines()
        for shown, what in help_rows([Group.VIEW, Group.ACTION]):
            assert any(shown in line and what in line for line in lines), (shown, what)


async def test_the_palette_lists_every_action_and_only_lockwatchs_themes(scene: Scene) -> None:
    scene.write("deploy.lock", tower("deploy", heartbeat=99_999))  # stale: a file row selected
    app = scene.app(actions=scene.session())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.locks.table.selected == scene.id("deploy.lock")
        titles = [command.title for command in app.get_system_commands(app.screen)]
    # Every action of the locks view a lock file offers (a file has no query to cancel).
    wanted = [
        k.palette
        for k in keys_of(Group.VIEW, Group.ACTION)
        if k.palette and k.action and View.LOCKS in k.views and k.kind != "cancel"
    ]
    assert [t for t in titles if not t.startswith("Theme: ")] == wanted
    for must in ("Break lock", "Steal lock", "Release lock", "Mark or unmark"):
        assert must in titles
    for must in ("Clear marks", "Export incident", "Pause or resume"):
        assert must in titles
    assert "Cancel query" not in titles
    themes = sorted(t.removeprefix("Theme: ") for t in titles if t.startswith("Theme: "))
    assert themes == sorted(app.lock_themes)
    assert "textual-dark" not in themes


@pytest.mark.parametrize(
    ("view", "offered", "not_offered"),
    [
        # The tree's cursor on a session (the root blocker): its lock's actions.
        (View.CONTENTION, {"Break lock", "Cancel query", "Copy lock id"}, {"Steal lock", "Sort"}),
        (View.EVENTS, {"Hide or show heartbeats", "Filter"}, {"Break lock", "Mark or unmark"}),
    ],
)
async def test_the_palette_offers_what_works_in_the_view_it_was_opened_from(
    scene: Scene, view: View, offered: set[str], not_offered: set[str]
) -> None:
    app = make_app(mixed_scenario(), actions=scene.session())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.show_view(view)
        await pilot.pause()
        titles = {command.title for command in app.get_system_commands(app.screen)}
    assert offered <= titles, titles
    assert not titles & not_offered, titles


async def test_with_nothing_selected_the_palette_offers_no_action_on_a_lock(
    scene: Scene,
) -> None:
    app = scene.app(actions=scene.session())  # no lock at all
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = {command.title for command in app.get_system_commands(app.screen)}
    assert not titles & {"Break lock", "Steal lock", "Mark or unmark", "Cancel query"}, titles
    assert "Clear marks" in titles and "Copy lock id" in titles


async def test_read_only_the_palette_offers_no_action_on_locks() -> None:
    app = make_app(mixed_scenario())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = {command.title for command in app.get_system_commands(app.screen)}
    assert "Break lock" not in titles and "Steal lock" not in titles
    assert "Filter" in titles


async def test_the_palette_runs_a_theme(scene: Scene) -> None:
    app = scene.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        (command,) = [
            c for c in app.get_system_commands(app.screen) if c.title == "Theme: incident"
        ]
        command.callback()
        await pilot.pause()
        assert app.theme == "incident"
        assert not isinstance(app.screen, CommandPalette)


async def test_ctrl_c_quits_like_q() -> None:
    app = make_app(mixed_scenario())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert not app.is_running
    assert app.return_code in (None, 0)


async def test_ctrl_c_with_held_locks_asks_as_q_does(scene: Scene) -> None:
    scene.write("deploy.lock", tower("deploy", heartbeat=600))
    app = scene.app(actions=scene.session())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await steal(pilot, scene.id("deploy.lock"))
        await pilot.press("ctrl+c")
        await until(pilot, lambda: isinstance(app.screen, QuitScreen), "the quit question")
        assert app.is_running


async def test_U_clears_every_mark(scene: Scene) -> None:
    for name in ("a.lock", "b.lock"):
        scene.write(name, tower(name.removesuffix(".lock"), heartbeat=99_999))
    app = scene.app(actions=scene.session())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("space", "space")
        await until(pilot, lambda: len(app.locks.table.marked) == 2, "two marks")
        await pilot.press("U")
        await until(pilot, lambda: not app.locks.table.marked, "no marks")


@pytest.mark.parametrize("group", list(Group))
def test_help_rows_never_show_a_key_twice(group: Group) -> None:
    shown = [row[0] for row in help_rows([group])]
    assert len(shown) == len(set(shown))


def test_the_readme_key_table_is_the_key_table() -> None:
    """Every key of the dashboard is in the README's table, in the views it works in."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    rows = {
        cells[0]: cells[2]
        for line in readme.splitlines()
        if line.startswith("| `")
        and len(cells := [c.strip() for c in line.strip("|").split("|")]) == 3
    }
    for key in keys_of(Group.VIEW, Group.ACTION):
        if key.action is None or key.keys == "ctrl+c":
            continue
        row = next((k for k in rows if f"`{key.shown}`" in k), None)
        assert row is not None, f"{key.shown} is missing from the README's key table"
        where = rows[row]
        if key.everywhere:
            assert where.startswith("every view"), (key.shown, where)
        else:
            named = {View(w.strip().lower()) for w in where.split(",")}
            assert named == set(key.views), (key.shown, where)


# --- the movement keys, in every view ------------------------------------------------------

# Every movement key of the table, one by one (each of `up,k` on its own).
MOVE_KEYS = [(key, move) for keys, move in MOVES for key in keys.split(",")]


def _expected(move: Move, start: int, count: int, page: int) -> int:
    """Where `move` must take a cursor at `start` of `count` positions with
    `page` in view: a page keeps one line of the last one in view."""
    target = {
        Move.UP: start - 1,
        Move.DOWN: start + 1,
        Move.PAGE_UP: start - (page - 1),
        Move.PAGE_DOWN: start + (page - 1),
        Move.FIRST: 0,
        Move.LAST: count - 1,
    }[move]
    return max(0, min(count - 1, target))


def _long_lists() -> list[ChangeSet]:
    """More than two pages in every view at 80x24 and 160x45: 100 lock files (each an event,
    a row) and a server where one session blocks 100 others (the tree)."""
    files = judge(
        [decode_file(lock_file(f"/srv/locks/job-{n:02d}.pid", "100\n")) for n in range(100)],
        StaticProcesses(),
        NOW,
        LOCAL_HOST,
    )
    root = _backend(
        4000, user="app", application="report", client="10.0.0.1",
        state="idle in transaction", query="UPDATE t SET x = 1", state_for=60, xact_for=61,
    )  # fmt: skip
    target = "transactionid/////1///"
    locks = [
        _pg_lock(
            backend=root, locktype="transactionid", mode="ExclusiveLock", target=target,
            name="xid 1", blocking=tuple(range(5000, 5100)),
            blocking_here=tuple(range(5000, 5100)),
        )
    ]  # fmt: skip
    for pid in range(5000, 5100):
        waiter = _backend(
            pid, user="app", application=f"worker-{pid}", client="10.0.0.2", state="active",
            query="UPDATE t SET x = 2", state_for=30, xact_for=30, waiting=True,
        )  # fmt: skip
        locks.append(
            _pg_lock(
                backend=waiter, locktype="transactionid", mode="ShareLock", target=target,
                name="xid 1", granted=False, wait_start=ago(30), blocked_by=(4000,),
            )
        )  # fmt: skip
    return [
        ChangeSet(
            "files",
            NOW,
            (SourceStatus("file", "/srv/locks", "watching", updated_at=NOW),),
            full=True,
            upserts=tuple(files),
        ),
        ChangeSet(
            PG_FEED,
            NOW,
            (SourceStatus("postgres", PG_SERVER, "connected", updated_at=NOW),),
            full=True,
            upserts=tuple(judge(locks, StaticProcesses(), NOW, LOCAL_HOST)),
        ),
    ]


async def _to_middle(widget: Movable) -> None:
    widget.action_move(Move.FIRST.value)
    for _ in range(widget.positions // 2):
        widget.action_move(Move.DOWN.value)


# Every view at both sizes; the help, at the size where it is longer than a page.
LISTS = [
    pytest.param(where, size, id=f"{where}-{size[0]}x{size[1]}")
    for where, sizes in [*((view, [(80, 24), (160, 45)]) for view in View), ("help", [(80, 24)])]
    for size in sizes
]


@pytest.mark.parametrize(("where", "size"), LISTS)
async def test_every_movement_key_moves_in_every_list(
    where: View | str, size: tuple[int, int]
) -> None:
    """Generated from the key table: a new view or a new movement key is covered
    without a word here (the Contention tree once ignored j, k, g and G). Each
    view's list or tree, and the help's list of keys."""
    app = make_app(_long_lists())
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        if isinstance(where, View):
            view = app.show_view(where)
            await until(pilot, lambda: app.screen is view, "the view on screen")
            await pilot.pause()
            widget: Movable = view.movable
        else:
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
            screen = app.screen
            assert isinstance(screen, HelpScreen)
            widget = screen.movable
        await pilot.pause()
        assert isinstance(widget, Widget) and app.focused is widget, (where, app.focused)
        count, page = widget.positions, widget.page
        # A page moves by less than there is: page keys are told from home and end.
        assert count > page + 2 and page > 2, (where, count, page)
        for key, move in MOVE_KEYS:
            await _to_middle(widget)
            await pilot.pause()
            start = widget.position
            wanted = _expected(move, start, count, page)
            assert wanted != start  # every key must move: none passes by standing still
            await pilot.press(key)
            assert widget.position == wanted, (where, key, start, widget.position, wanted)


def test_the_help_names_every_movement_key() -> None:
    (row,) = [what for shown, what in help_rows([Group.VIEW]) if "pgup" in shown]
    assert "contention" in row and "j k g G" in row
    moving = next(k for k in all_keys() if k.action is None and "pageup" in k.keys)
    assert set(moving.keys.split(",")) == {key for key, _ in MOVE_KEYS}
