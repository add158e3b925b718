"""The registry's promises to everything built from it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from lockwatch.config import ConfigError, from_mapping
from lockwatch.sources import registry
from lockwatch.sources.contract import LABEL_WIDTH
from lockwatch.sources.lazy import LazySource


def test_names_prefixes_and_labels_are_unique() -> None:
    for attribute in ("name", "id_prefix", "label"):
        values = [getattr(source, attribute) for source in registry.SOURCES]
        assert len(set(values)) == len(values), (attribute, values)


def test_every_label_fits_the_source_column() -> None:
    for source in registry.SOURCES:
        assert 0 < len(source.label) <= LABEL_WIDTH, source.name
        assert registry.label(source.name) == source.label


def test_a_source_this_build_lacks_is_shown_by_its_name() -> None:
    """A recording from a newer lockwatch may name a source unknown here."""
    assert registry.label("consul") == "consul"
    assert registry.by_name("consul") is None


# --- lazy entries (sources/lazy.py): a declaration now, the plugin when used -------

_DECLARED = (
    "name",
    "label",
    "id_prefix",
    "summary",
    "config_tables",
    "title",
    "status_word",
    "sees_waits",
    "wait_metrics",
    "wait_label_prefixed",
)


def test_a_lazy_entry_answers_as_its_plugin_would() -> None:
    """What a declared.py says of its source is what its plugin says: a
    declaration that drifted from its plugin would show one thing in --help and
    the config, another once the source runs."""
    for source in registry.SOURCES:
        if not isinstance(source, LazySource):
            continue
        plugin = source.plugin
        for attribute in _DECLARED:
            assert getattr(source, attribute) == getattr(plugin, attribute), (
                source.name,
                attribute,
            )
        options = [_option_name(option) for option in source.options()]
        assert options == [_option_name(option) for option in plugin.options()], source.name


def _option_name(decorator: Any) -> list[str]:
    command = decorator(click.Command("probe"))
    return [param.name or "" for param in command.params]


def test_a_source_nothing_asks_for_is_not_selected_and_its_plugin_stays_unloaded(
    tmp_path: Path,
) -> None:
    """`ls DIR` with no flag, no config table and no variable for any server:
    the registry selects files alone and loads no other source's plugin; with
    --redis, the redis plugin is loaded and selected."""
    code = (
        "import sys\n"
        "from lockwatch.config import Config\n"
        "from lockwatch.sources import registry\n"
        "from lockwatch.sources.contract import Wanted\n"
        "config = registry.configured(Config())\n"
        "values = {'redis_urls': tuple(sys.argv[1:])}\n"
        "chosen = registry.select(Wanted(('.',), values, config, {}))\n"
        "plugins = sorted(m for m in sys.modules if m.endswith('.plugin'))\n"
        "print([source.name for source, _ in chosen], plugins)\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    env.pop("LOCKWATCH_PG", None)

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
            env=env,
        )
        return done.stdout.strip()

    assert run() == "['file'] ['lockwatch.sources.files.plugin']"
    assert run("redis://127.0.0.1:1/0") == (
        "['file', 'redis'] ['lockwatch.sources.files.plugin', 'lockwatch.sources.redis.plugin']"
    )


def test_a_config_table_loads_its_source_to_read_it(tmp_path: Path) -> None:
    """A source's table in the config is read (and checked) by its plugin: a
    mistake in it is still refused; a table nobody has is still unknown."""
    good = registry.configured(from_mapping({"redis": {"url": "redis://h/0"}}))
    assert good.source("redis").urls == ("redis://h/0",)
    assert good.source("etcd") is None  # no [etcd]: its defaults
    with pytest.raises(ConfigError, match=r"redis\.url"):
        registry.configured(from_mapping({"redis": {"url": 5}}))
    with pytest.raises(ConfigError, match="unknown table"):
        registry.configured(from_mapping({"rediss": {}}))


def test_a_declaration_without_action_options_gets_its_plugins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A declared.py written before the action commands' options were declared
    still works: its plugin answers them (loaded for it); one that declares them
    answers without its plugin (`--help` loads none)."""
    for name, declares in (("olddeclared", False), ("newdeclared", True)):
        package = tmp_path / name
        package.mkdir()
        (package / "__init__.py").write_text("")
        own = "    def action_options(self, kind):\n        return ['declared']\n"
        (package / "declared.py").write_text(
            "class D:\n    name = label = id_prefix = summary = title = status_word = 'x'\n"
            "    config_tables = ()\n    sees_waits = False\n    wait_metrics = None\n"
            + (own if declares else "")
            + "DECLARED = D()\n"
        )
        (package / "plugin.py").write_text(
            "class P:\n    def action_options(self, kind):\n        return ['plugin']\n"
            "SOURCE = P()\n"
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    old, new = LazySource("olddeclared"), LazySource("newdeclared")
    answers: list[Any] = [list(old.action_options(None)), list(new.action_options(None))]
    assert answers == [["plugin"], ["declared"]]
    assert new._plugin is None  # never loaded
