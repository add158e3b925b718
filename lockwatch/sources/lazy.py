"""A registry entry that loads a source's plugin only when the source is used.

`ls` and the dashboard take every source's options, and every run reads the
config and asks each source whether it runs: with each `plugin.py` imported for
that, a listing of files paid for five servers' settings, endpoints and
selections (their dataclasses), ~80M instructions of a ~600M start (issue 42).
A source's package therefore declares what every run asks of it in a light
`declared.py` (`DECLARED`, a `contract.Declared`): its names, options (the
action commands' too: `--help` builds them), config tables, `clues` and
`may_run`. Its `plugin.SOURCE` is imported the first time anything else is
asked: its settings when the config has one of its tables, its `select` when
`may_run` says it may run, its actions, records, `find`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.model.clues import Clue
    from lockwatch.sources.contract import (
        ActionProvider,
        Declared,
        Decorator,
        Found,
        LogFolding,
        Selected,
        Source,
        Wanted,
    )


class LazySource:
    """The source of package `package` (`lockwatch.sources.redis`): its
    `declared.DECLARED` now, its `plugin.SOURCE` when first needed."""

    def __init__(self, package: str) -> None:
        declared: Declared = importlib.import_module(f"{package}.declared").DECLARED
        self._package = package
        self._declared = declared
        self._plugin: Source | None = None
        self.name = declared.name
        self.label = declared.label
        self.id_prefix = declared.id_prefix
        self.summary = declared.summary
        self.config_tables = declared.config_tables
        self.title = declared.title
        self.status_word = declared.status_word
        self.sees_waits = declared.sees_waits
        self.wait_metrics = declared.wait_metrics
        self.wait_label_prefixed: bool = getattr(declared, "wait_label_prefixed", False)
        # Optional in a declared.py (contract.Declared): a default here, so that
        # asking never loads the plugin.
        self.holder_gone: frozenset[str] = getattr(declared, "holder_gone", frozenset())
        self.fold_log: Callable[[str, str], LogFolding] | None = getattr(declared, "fold_log", None)

    @property
    def package(self) -> str:
        """Its package's name (`lockwatch.sources.redis`)."""
        return self._package

    @property
    def plugin(self) -> Source:
        if self._plugin is None:
            self._plugin = importlib.import_module(f"{self._package}.plugin").SOURCE
        return self._plugin

    # -- asked by every run: answered by the declaration ---------------------------

    def options(self) -> Sequence[Decorator]:
        return self._declared.options()

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        # The action commands are built with every source's (so is `--help`): a
        # declaration answers without its plugin; one that does not say, its plugin.
        declared = getattr(self._declared, "action_options", None)
        if declared is None:
            return self.plugin.action_options(kind)
        options: Sequence[Decorator] = declared(kind)
        return options

    def asked(self, values: Mapping[str, Any]) -> bool:
        return self._declared.asked(values)

    def clues(self, text: str) -> Sequence[Clue]:
        return self._declared.clues(text)

    def read_config(self, tables: Mapping[str, Any], where: str) -> Any:
        # None is what a source is handed when the config was not read: its defaults.
        if not any(table in tables for table in self.config_tables):
            return None
        return self.plugin.read_config(tables, where)

    def select(self, wanted: Wanted) -> Selected | None:
        if not self._declared.may_run(wanted):
            return None
        return self.plugin.select(wanted)

    # -- asked once the source is in use: answered by its plugin --------------------

    @property
    def record_types(self) -> tuple[type, ...]:
        return self.plugin.record_types

    @property
    def actions(self) -> ActionProvider | None:
        return self.plugin.actions

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        return self.plugin.find(target, wanted, host)

    def __getattr__(self, name: str) -> Any:
        # What only some sources have (`hint`: contract.Hinting) is the plugin's.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.plugin, name)

    def __repr__(self) -> str:
        return f"LazySource({self._package!r})"
