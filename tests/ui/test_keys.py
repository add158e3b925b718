"""One key table (lockwatch/ui/keys.py) for the bindings, the footer, the `?`
help, the command palette and `lockwatch watch --help`: they must agree."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.binding import Binding, BindingType
from textual.command import CommandPalette

from lockwatch.cli.watch import WATCH_EPILOG
from lockwatch.ui.app import SCREENS, LockwatchApp, ReplayApp
from lockwatch.ui.confirm import QuitScreen
from lockwatch.ui.keys import (
    KEYS,
    Group,
    Key,
    View,
    app_keys,
    epilog,
    help_rows,
    keys_of,
    view_keys,
)
from lockwatch.ui.panels import HelpScreen
from tests.ui.fakes import make_app, mixed_scenario, settle, until
from tests.ui.test_actions_ui import Scene, steal, tower

SIZE = (120, 36)


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    return Scene(tmp_path)


def test_every_key_names_an_action_where_it_applies() -> None:
    """A key for every view is the App's action; any other, each of its views' screen's."""
    for key in KEYS:
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
    for key in KEYS:
        for name in key.keys.split(","):
            assert name not in seen, f"{name} bound to {seen[name]} and {key.action}"
            seen[name] = str(key.action)


def test_the_cli_help_lists_every_labelled_key() -> None:
    assert epilog() in WATCH_EPILOG
    for key in KEYS:
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
    app = scene.app(actions=scene.session())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = [command.title for command in app.get_system_commands(app.screen)]
    wanted = [
        k.palette
        for k in keys_of(Group.VIEW, Group.ACTION)
        if k.palette and k.action and View.LOCKS in k.views
    ]
    assert [t for t in titles if not t.startswith("Theme: ")] == wanted
    for must in ("Break lock", "Steal lock", "Cancel query", "Release lock", "Mark or unmark"):
        assert must in titles
    for must in ("Clear marks", "Export incident", "Pause or resume"):
        assert must in titles
    themes = sorted(t.removeprefix("Theme: ") for t in titles if t.startswith("Theme: "))
    assert themes == sorted(app.lock_themes)
    assert "textual-dark" not in themes


@pytest.mark.parametrize(
    ("view", "offered", "not_offered"),
    [
        (View.CONTENTION, {"Break lock", "Cancel query", "Copy lock id"}, {"Steal lock", "Sort"}),
        (View.EVENTS, {"Hide or show heartbeats", "Filter"}, {"Break lock", "Mark or unmark"}),
    ],
)
async def test_the_palette_offers_what_works_in_the_view_it_was_opened_from(
    scene: Scene, view: View, offered: set[str], not_offered: set[str]
) -> None:
    app = scene.app(actions=scene.session())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.show_view(view)
        await pilot.pause()
        titles = {command.title for command in app.get_system_commands(app.screen)}
    assert offered <= titles, titles
    assert not titles & not_offered, titles


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
