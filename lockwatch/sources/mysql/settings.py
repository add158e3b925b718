"""The mysql source's settings: its [mysql] table of lockwatch.toml (documented
in plugin.py), read and checked."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lockwatch.sources.locktables.config import TableSpec, read_specs
from lockwatch.sources.mysql.declared import DEFAULT_IDLE_AFTER as DEFAULT_IDLE_AFTER
from lockwatch.sources.servers import config_seconds, config_strings, config_table

if TYPE_CHECKING:
    from lockwatch.sources.contract import Wanted
    from lockwatch.sources.mysql.dsn import Endpoint

# Seconds a holder may sit idle (in a transaction) before its locks count as stale.


@dataclass(frozen=True)
class MySettings:
    dsns: tuple[str, ...] = ()
    idle_after: float = DEFAULT_IDLE_AFTER
    # Named locks to ask IS_USED_LOCK about where no metadata-lock table says.
    named_locks: tuple[str, ...] = ()
    password_file: str | None = None
    option_file: str | None = None
    # [[locktables]]: lock tables the config names (shared with PostgreSQL's source).
    locktables: tuple[TableSpec, ...] = ()


DEFAULTS = MySettings()


def _error(message: str) -> Exception:
    from lockwatch.config import ConfigError

    return ConfigError(message)


def _path(table: Mapping[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise _error(f"{where}: mysql.{key} must be a path")
    return os.path.expanduser(value)


def read_settings(data: Mapping[str, Any], where: str) -> MySettings:
    table = config_table(data, "mysql", where)
    return MySettings(
        config_strings(table.get("dsn", []), "mysql.dsn", where),
        config_seconds(table, "idle_after", DEFAULT_IDLE_AFTER, "mysql.idle_after", where),
        config_strings(table.get("named_locks", []), "mysql.named_locks", where),
        _path(table, "password_file", where),
        _path(table, "option_file", where),
        read_specs(data.get("locktables"), where),
    )


def resolve(wanted: Wanted, settings: MySettings) -> tuple[Endpoint, ...]:
    from lockwatch.sources.mysql.dsn import note_command_line, parse, remember

    flags = tuple(wanted.values.get("mysql_dsns") or ())
    if flags:
        note_command_line(flags)
    dsns = flags or settings.dsns
    endpoints = tuple(
        parse(dsn, wanted.environ, settings.password_file, settings.option_file)
        for dsn in dict.fromkeys(dsns)
    )
    remember(endpoints)
    return endpoints
