"""Theme files: the built-ins, user themes, broken files, and the `$lw-*` TCSS variables."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.color import Color
from textual.widgets import Static

from lockwatch.ui import themes
from lockwatch.ui.themes import STATES, LoadedTheme, ThemeError, load_all, load_file

REAL_USER_DIR = themes.user_dir
BUILTIN_FILES = sorted(themes.builtin_dir().glob("*.toml"))

MINIMAL = 'primary = "#123456"\n'


@pytest.fixture(autouse=True)
def user_themes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user theme directory under tmp_path (not created): no test sees the real home."""
    directory = tmp_path / "config" / "lockwatch" / "themes"
    monkeypatch.setattr(themes, "user_dir", lambda: directory)
    return directory


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


# --- built-in themes -------------------------------------------------------------------------


def test_builtin_themes_are_found() -> None:
    assert {p.stem for p in BUILTIN_FILES} >= {"lockwatch-dark", "lockwatch-light", "incident"}


@pytest.mark.parametrize("path", BUILTIN_FILES, ids=lambda p: p.stem)
def test_each_builtin_theme_loads_with_four_distinct_states(path: Path) -> None:
    loaded = load_file(path)
    assert loaded.path == path
    assert loaded.theme.name == path.stem
    assert tuple(loaded.states) == STATES
    parsed = {Color.parse(colour) for colour in loaded.states.values()}
    assert len(parsed) == len(STATES), f"{path.name}: two states share a colour"
    assert loaded.theme.variables == {f"lw-{s}": loaded.states[s] for s in STATES}
    # Everything in the file is used: no colour silently left to Textual's defaults.
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    for key in themes.COLOUR_KEYS:
        assert getattr(loaded.theme, key) == data[key], key
    assert dict(loaded.states) == data["states"]


def test_required_builtin_themes() -> None:
    found, warnings = load_all()
    assert warnings == []
    assert themes.DEFAULT_THEME == "lockwatch-dark"
    assert found["lockwatch-dark"].theme.dark is True
    assert found["lockwatch-light"].theme.dark is False
    assert "incident" in found


@pytest.mark.parametrize("dark", [True, False])
def test_fallback_states_match_the_builtin_defaults(dark: bool) -> None:
    name = "lockwatch-dark" if dark else "lockwatch-light"
    loaded = load_file(themes.builtin_dir() / f"{name}.toml")
    assert dict(loaded.states) == dict(themes.FALLBACK_STATES[dark])
    assert themes.variable_defaults(dark) == loaded.theme.variables


def test_states_cannot_be_changed() -> None:
    loaded = load_file(themes.builtin_dir() / "incident.toml")
    with pytest.raises(TypeError):
        loaded.states["stale"] = "#000000"  # type: ignore[index]


# --- user themes -----------------------------------------------------------------------------


def test_user_dir_follows_platformdirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert REAL_USER_DIR() == tmp_path / "xdg" / "lockwatch" / "themes"


def test_missing_user_dir_is_fine(user_themes: Path) -> None:
    assert not user_themes.exists()
    found, warnings = load_all()
    assert warnings == []
    assert "lockwatch-dark" in found


def test_user_theme_adds_and_overrides(user_themes: Path) -> None:
    write(user_themes, "mine.toml", MINIMAL)
    override = write(
        user_themes,
        "my-incident.toml",
        'name = "incident"\nprimary = "#010101"\n[states]\nstale = "#020202"\n',
    )
    found, warnings = load_all()
    assert warnings == []
    assert found["mine"].theme.primary == "#123456"
    assert found["incident"].path == override
    assert found["incident"].theme.primary == "#010101"
    assert found["incident"].states["stale"] == "#020202"
    assert found["lockwatch-light"].path == themes.builtin_dir() / "lockwatch-light.toml"


def test_extra_dirs_come_last(user_themes: Path, tmp_path: Path) -> None:
    write(user_themes, "mine.toml", MINIMAL)
    extra = tmp_path / "extra"
    write(extra, "mine.toml", 'primary = "#abcdef"\n')
    found, warnings = load_all([extra])
    assert warnings == []
    assert found["mine"].theme.primary == "#abcdef"


def test_missing_extra_dir_is_a_warning(tmp_path: Path) -> None:
    found, warnings = load_all([tmp_path / "nope"])
    assert "lockwatch-dark" in found
    assert len(warnings) == 1 and "nope" in warnings[0]


def test_only_toml_files_are_read(user_themes: Path) -> None:
    write(user_themes, "notes.txt", "not a theme")
    write(user_themes, ".#mine.toml", "garbage [")
    (user_themes / "dir.toml").mkdir()
    found, warnings = load_all()
    assert warnings == []
    assert set(found) == {p.stem for p in BUILTIN_FILES}


def test_minimal_theme_gets_defaults(user_themes: Path) -> None:
    loaded = load_file(write(user_themes, "tiny.toml", MINIMAL))
    assert loaded.theme.name == "tiny"
    assert loaded.theme.dark is True
    assert dict(loaded.states) == dict(themes.FALLBACK_STATES[True])
    light = load_file(write(user_themes, "tiny-light.toml", MINIMAL + "dark = false\n"))
    assert dict(light.states) == dict(themes.FALLBACK_STATES[False])


def test_missing_states_fall_back_to_the_theme_colours(user_themes: Path) -> None:
    text = (
        'primary = "#111111"\nsuccess = "green"\nerror = "red"\naccent = "magenta"\n'
        'warning = "yellow"\n[states]\nwaiting = "ansi_bright_yellow"\n'
    )
    loaded = load_file(write(user_themes, "roles.toml", text))
    assert dict(loaded.states) == {
        "active": "green",
        "stale": "red",
        "free": "#808080",  # the panel colour is missing too: the fallback
        "unknown": "#5fafd7",  # and so is the secondary colour
        "invalid": "magenta",
        "waiting": "ansi_bright_yellow",
    }


BROKEN = {
    "bad-toml": ('primary = "#123456\n', "not valid TOML"),
    "bad-colour": ('primary = "#123456"\n[states]\nstale = "rde"\n', "states.stale"),
    "bad-primary": ('primary = "blurple"\n', "primary"),
    "no-primary": ('secondary = "#123456"\n', "primary colour missing"),
    "number-colour": ("primary = 123\n", "primary must be a colour string"),
    "dark-not-bool": (MINIMAL + 'dark = "yes"\n', "dark must be true or false"),
    "states-not-table": (MINIMAL + 'states = "red"\n', "states must be a table"),
    "unknown-state": (MINIMAL + '[states]\nstuck = "red"\n', "unknown state 'stuck'"),
    "unknown-key": (MINIMAL + 'primay = "red"\n', "unknown key 'primay'"),
    "bad-name": (MINIMAL + 'name = "my theme"\n', "name = 'my theme'"),
    "not-utf8": ("primary = '\xff'\n", "cannot read"),
}


@pytest.mark.parametrize("stem", sorted(BROKEN))
def test_broken_file_raises_theme_error_naming_it(stem: str, user_themes: Path) -> None:
    text, reason = BROKEN[stem]
    path = write(user_themes, f"{stem}.toml", "")
    path.write_bytes(text.encode("latin-1" if stem == "not-utf8" else "utf-8"))
    with pytest.raises(ThemeError) as caught:
        load_file(path)
    message = str(caught.value)
    assert message.startswith(str(path))
    assert reason in message


def test_broken_user_themes_are_warnings_not_crashes(user_themes: Path) -> None:
    for stem, (text, _) in BROKEN.items():
        write(user_themes, f"{stem}.toml", "").write_bytes(
            text.encode("latin-1" if stem == "not-utf8" else "utf-8")
        )
    write(user_themes, "good.toml", MINIMAL)
    found, warnings = load_all()
    assert "good" in found and "lockwatch-dark" in found
    assert not set(found) & set(BROKEN)
    assert len(warnings) == len(BROKEN)
    for stem in BROKEN:
        assert sum(f"{stem}.toml" in w for w in warnings) == 1, stem


def test_unreadable_user_dir_is_a_warning(
    user_themes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(user_themes, "mine.toml", MINIMAL)

    real_glob = Path.glob

    def glob(self: Path, pattern: str) -> Iterator[Path]:
        if self == user_themes:
            raise PermissionError(13, "Permission denied", str(self))
        return real_glob(self, pattern)

    monkeypatch.setattr(Path, "glob", glob)
    found, warnings = load_all()
    assert "mine" not in found and "lockwatch-dark" in found
    assert len(warnings) == 1 and "Permission denied" in warnings[0]


def test_unreadable_file_is_a_warning(user_themes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(user_themes, "mine.toml", MINIMAL)
    real_read_bytes = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    found, warnings = load_all()
    assert "mine" not in found
    assert len(warnings) == 1 and warnings[0].startswith(f"{path}: cannot read")


def test_broken_builtin_theme_is_loud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builtins = tmp_path / "builtins"
    write(builtins, "lockwatch-dark.toml", "primary = [")
    monkeypatch.setattr(themes, "builtin_dir", lambda: builtins)
    with pytest.raises(ThemeError, match=r"lockwatch-dark\.toml"):
        load_all()


# --- with Textual ----------------------------------------------------------------------------


class StateApp(App[None]):
    """Uses `$lw-stale` in its CSS, as the dashboard will."""

    CSS = "#stale { color: $lw-stale; } #active { color: $lw-active; }"

    def __init__(self, loaded: dict[str, LoadedTheme], name: str) -> None:
        super().__init__()
        for theme in loaded.values():
            self.register_theme(theme.theme)
        # Here, not in on_mount: the CSS is parsed before on_mount, against the current theme.
        self.theme = name

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return themes.variable_defaults(self.current_theme.dark)

    def compose(self) -> ComposeResult:
        yield Static("stale", id="stale")
        yield Static("active", id="active")


def colour_of(app: App[None], widget_id: str) -> Color:
    return app.query_one(f"#{widget_id}", Static).styles.color


@pytest.mark.parametrize("name", ["lockwatch-dark", "lockwatch-light", "incident"])
async def test_theme_registers_and_css_variables_resolve(name: str) -> None:
    found, _ = load_all()
    app = StateApp(found, name)
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.current_theme.name == name
        states = found[name].states
        assert app.get_css_variables()["lw-stale"] == states["stale"]
        assert colour_of(app, "stale") == Color.parse(states["stale"])
        assert colour_of(app, "active") == Color.parse(states["active"])


async def test_switching_themes_recolours_and_textual_themes_use_defaults() -> None:
    found, _ = load_all()
    app = StateApp(found, "lockwatch-dark")
    async with app.run_test() as pilot:
        app.theme = "incident"
        await pilot.pause()
        assert colour_of(app, "stale") == Color.parse(found["incident"].states["stale"])
        app.theme = "textual-light"  # not ours: no lw-* variables of its own
        await pilot.pause()
        assert colour_of(app, "stale") == Color.parse(themes.FALLBACK_STATES[False]["stale"])


@pytest.mark.parametrize(
    "colour", ["#ff0000", "red", "rgb(255, 0, 0)", "hsl(0, 100%, 50%)", "ansi_red", "#f00a"]
)
async def test_any_accepted_colour_form_works_in_css(colour: str, user_themes: Path) -> None:
    write(user_themes, "forms.toml", f'primary = "#123456"\n[states]\nstale = "{colour}"\n')
    found, warnings = load_all()
    assert warnings == []
    app = StateApp(found, "forms")
    async with app.run_test() as pilot:
        await pilot.pause()
        assert colour_of(app, "stale") == Color.parse(colour)


async def test_no_color_does_not_break_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    found, warnings = load_all()
    assert warnings == []
    app = StateApp(found, "incident")
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.no_color
        assert app.get_css_variables()["lw-stale"] == found["incident"].states["stale"]
        # Styles keep the theme's colours; NO_COLOR is applied when rendering.
        assert colour_of(app, "stale") == Color.parse(found["incident"].states["stale"])
