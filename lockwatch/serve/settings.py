"""What `lockwatch serve` is asked to do: the [serve] table, flags over it.

[serve]
listen = "127.0.0.1:9464"                 # HOST:PORT; anything but loopback needs a token
token_file = "/etc/lockwatch/serve.token" # Authorization: Bearer <its content>
open_metrics = false                      # true: /metrics without the token
max_lock_series = 500                     # stale locks with series of their own
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lockwatch.config import COMMAND_TABLES

DEFAULT_LISTEN = "127.0.0.1:9464"
DEFAULT_MAX_LOCK_SERIES = 500


class SettingsError(ValueError):
    """A [serve] entry or flag that cannot be used; the message says which."""


@dataclass(frozen=True)
class ServeSettings:
    listen: str = DEFAULT_LISTEN
    token_file: str | None = None
    open_metrics: bool = False
    max_lock_series: int = DEFAULT_MAX_LOCK_SERIES


def from_table(tables: Mapping[str, Any], where: str) -> ServeSettings:
    table = tables.get("serve", {})
    if not isinstance(table, dict):
        raise SettingsError(f"{where}: [serve] must be a table")
    listen = table.get("listen", DEFAULT_LISTEN)
    if not isinstance(listen, str) or not listen.strip():
        raise SettingsError(f"{where}: serve.listen must be HOST:PORT")
    token_file = table.get("token_file")
    if token_file is not None and (not isinstance(token_file, str) or not token_file.strip()):
        raise SettingsError(f"{where}: serve.token_file must be a path")
    open_metrics = table.get("open_metrics", False)
    if not isinstance(open_metrics, bool):
        raise SettingsError(f"{where}: serve.open_metrics must be true or false")
    series = table.get("max_lock_series", DEFAULT_MAX_LOCK_SERIES)
    if isinstance(series, bool) or not isinstance(series, int) or series < 0:
        raise SettingsError(f"{where}: serve.max_lock_series must be a whole number >= 0")
    unknown = sorted(set(table) - COMMAND_TABLES["serve"])
    if unknown:
        raise SettingsError(f"{where}: [serve] has no {', '.join(unknown)}")
    return ServeSettings(listen.strip(), token_file, open_metrics, series)


def resolve(values: Mapping[str, Any], tables: Mapping[str, Any], where: str) -> ServeSettings:
    """The config's [serve] table with the command's flags over it."""
    base = from_table(tables, where)
    return ServeSettings(
        values.get("listen") or base.listen,
        values.get("token_file") or base.token_file,
        bool(values.get("open_metrics")) or base.open_metrics,
        base.max_lock_series
        if values.get("max_lock_series") is None
        else int(values["max_lock_series"]),
    )
