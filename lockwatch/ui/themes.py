"""Dashboard themes: TOML data files turned into Textual themes.

Built-in themes ship in `themes/` (inside the wheel as `lockwatch/themes/`); users add their
own as `*.toml` files in `<user config dir>/lockwatch/themes/`. A theme file holds Textual's
base colours plus a `[states]` table with the colour of each lock state:

    name = "lockwatch-dark"   # optional, defaults to the file name without `.toml`
    dark = true               # optional, defaults to true
    primary = "#5fafd7"       # required; every other colour is optional
    secondary = "#87afaf"     # also: accent, foreground, background, surface, panel,
    success = "#5faf5f"       #       success, warning, error
    [states]                  # optional, and so is each key in it
    active = "#5faf5f"        # missing: the theme's success colour
    stale = "#ff5f5f"         # missing: its error colour
    invalid = "#d787d7"       # missing: its accent colour
    waiting = "#d7af00"       # missing: its warning colour

State colours are also exposed to TCSS as `$lw-active`, `$lw-stale`, `$lw-invalid` and
`$lw-waiting`. Textual refuses CSS that names a variable the current theme lacks, so an app
using them must return `variable_defaults()` from `App.get_theme_variable_defaults()` (for
Textual's own themes), and should set `App.theme` in `__init__`: CSS is parsed before
`on_mount`.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

STATES = ("active", "stale", "invalid", "waiting", "free", "unknown")
DEFAULT_THEME = "lockwatch-dark"
VARIABLE_PREFIX = "lw-"
"""`$lw-stale` in TCSS is the colour of stale locks in the current theme."""

COLOUR_KEYS = (
    "primary",
    "secondary",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "success",
    "warning",
    "error",
)
# A state the theme file leaves out takes this base colour of the same theme...
STATE_ROLES = {
    "active": "success",
    "stale": "error",
    "invalid": "accent",
    "waiting": "warning",
    "free": "panel",
    "unknown": "secondary",
}
# ...or, when that is missing too, these (the states of lockwatch-dark / lockwatch-light).
FALLBACK_STATES: Mapping[bool, Mapping[str, str]] = {
    True: {
        "active": "#5faf5f",
        "stale": "#ff5f5f",
        "invalid": "#d787d7",
        "waiting": "#d7af00",
        "free": "#808080",
        "unknown": "#5fafd7",
    },
    False: {
        "active": "#00875f",
        "stale": "#af0000",
        "invalid": "#870087",
        "waiting": "#875f00",
        "free": "#808080",
        "unknown": "#005f87",
    },
}

_KEYS = frozenset({"name", "dark", "states", *COLOUR_KEYS})
# Textual adds the class `-theme-<name>` to the app and reads `App.theme` as a comma-separated
# list of names, so keep names to what works in both places.
_NAME = re.compile(r"[A-Za-z0-9_-]+")


class ThemeError(ValueError):
    """A theme file cannot be used; the message starts with the file's path and says why."""


@dataclass(frozen=True, slots=True)
class LoadedTheme:
    theme: Theme
    """Ready for `App.register_theme`; `theme.variables` holds the `lw-*` state colours."""
    states: Mapping[str, str]
    """Lock state (see `STATES`) to colour, as a CSS colour string."""
    path: Path | None
    """The file the theme came from."""


def builtin_dir() -> Path:
    """The directory of the shipped themes: `lockwatch/themes` in an installed wheel, the
    repository's `themes/` in an editable install."""
    package = Path(__file__).parent.parent
    candidates = (package / "themes", package.parent / "themes")
    for candidate in candidates:
        # Look for a known file: a bare `site-packages/themes` may belong to someone else.
        if (candidate / f"{DEFAULT_THEME}.toml").is_file():
            return candidate
    raise FileNotFoundError(
        f"built-in themes not found (looked in {', '.join(str(c) for c in candidates)})"
    )


def user_dir() -> Path:
    """Where users put their own `*.toml` themes; it need not exist."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("lockwatch")) / "themes"


def css_variables(states: Mapping[str, str]) -> dict[str, str]:
    """State colours as Textual theme variables: `{"lw-active": ..., "lw-stale": ...}`."""
    return {f"{VARIABLE_PREFIX}{state}": states[state] for state in STATES}


def variable_defaults(dark: bool = True) -> dict[str, str]:
    """`lw-*` values for `App.get_theme_variable_defaults()`, so `$lw-stale` still resolves
    under themes that are not lockwatch's (Textual's own, say)."""
    return css_variables(FALLBACK_STATES[dark])


def load_file(path: Path) -> LoadedTheme:
    """One theme file. Raises ThemeError (unreadable, not TOML, unknown key, bad value)."""
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ThemeError(f"{path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ThemeError(f"{path}: not valid TOML: {exc}") from exc
    return from_mapping(data, path)


def from_mapping(data: Mapping[str, Any], path: Path) -> LoadedTheme:
    """A theme from parsed TOML; `path` names it in errors and gives the default name."""
    where = str(path)
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        # Strict, so a typo ("primay", "[state]") is reported rather than silently ignored.
        raise ThemeError(f"{where}: unknown key {unknown[0]!r}")

    name = data.get("name", path.stem)
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ThemeError(
            f"{where}: name = {name!r}: use only letters, digits, '-' and '_'"
            + ("" if "name" in data else " (or set `name`)")
        )
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ThemeError(f"{where}: dark must be true or false, not {dark!r}")
    if "primary" not in data:
        raise ThemeError(f"{where}: primary colour missing (required)")
    colours = {key: _colour(data[key], where, key) for key in COLOUR_KEYS if key in data}

    table = data.get("states", {})
    if not isinstance(table, dict):
        raise ThemeError(f"{where}: states must be a table ([states])")
    unknown = sorted(set(table) - set(STATES))
    if unknown:
        raise ThemeError(
            f"{where}: unknown state {unknown[0]!r} in [states] (known: {', '.join(STATES)})"
        )
    states: dict[str, str] = {}
    for state in STATES:
        if state in table:
            states[state] = _colour(table[state], where, f"states.{state}")
        else:
            role = STATE_ROLES[state]
            states[state] = colours.get(role, FALLBACK_STATES[dark][state])

    theme = Theme(
        name=name,
        primary=colours["primary"],
        secondary=colours.get("secondary"),
        accent=colours.get("accent"),
        foreground=colours.get("foreground"),
        background=colours.get("background"),
        surface=colours.get("surface"),
        panel=colours.get("panel"),
        success=colours.get("success"),
        warning=colours.get("warning"),
        error=colours.get("error"),
        dark=dark,
        variables=css_variables(states),
    )
    return LoadedTheme(theme=theme, states=MappingProxyType(states), path=path)


def _colour(value: object, where: str, key: str) -> str:
    if not isinstance(value, str):
        raise ThemeError(f"{where}: {key} must be a colour string, not {value!r}")
    try:
        Color.parse(value)
    except ColorParseError as exc:
        raise ThemeError(f"{where}: {key}: {exc}") from None
    return value


def load_all(extra_dirs: Sequence[Path] = ()) -> tuple[dict[str, LoadedTheme], list[str]]:
    """Every theme by name, and warnings about the ones that could not be loaded.

    Built-in themes come first, then the user's (`user_dir()`), then `extra_dirs`, each
    directory in file-name order; a later theme replaces an earlier one of the same name.
    A broken built-in theme raises ThemeError (a packaging bug); any other broken file,
    unreadable directory or missing extra directory only adds a warning. A missing user
    directory is normal and says nothing.
    """
    themes: dict[str, LoadedTheme] = {}
    for path in _theme_files(builtin_dir()):
        loaded = load_file(path)
        themes[loaded.theme.name] = loaded

    warnings: list[str] = []
    directories = [(user_dir(), False), *((Path(d), True) for d in extra_dirs)]
    for directory, must_exist in directories:
        try:
            if not directory.is_dir():
                if must_exist:
                    warnings.append(f"{directory}: no such theme directory")
                continue
            paths = _theme_files(directory)
        except OSError as exc:
            warnings.append(f"{directory}: cannot list themes: {exc.strerror or exc}")
            continue
        for path in paths:
            try:
                loaded = load_file(path)
            except ThemeError as exc:
                warnings.append(str(exc))
                continue
            themes[loaded.theme.name] = loaded
    return themes, warnings


def _theme_files(directory: Path) -> list[Path]:
    # Dot files are editor leftovers (".dark.toml.swp" is not matched anyway, ".#x.toml" is).
    return sorted(
        path
        for path in directory.glob("*.toml")
        if not path.name.startswith(".") and path.is_file()
    )
