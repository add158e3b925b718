"""The beacon source's settings: the config's [beacon] table, and the servers
and prefix a run names (its options first, then the table)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lockwatch.sources.contract import SourceError, Wanted

from .declared import NAME

# Seconds between polls when the run names none (the dashboard's --refresh does).
DEFAULT_REFRESH = 2.0


@dataclass(frozen=True)
class BeaconSettings:
    """The config's [beacon] table."""

    urls: tuple[str, ...] = ()
    prefix: str | None = None
    token_file: str | None = None  # the token a change needs (not in argv: `ps` shows it)


def read_settings(tables: Mapping[str, Any], where: str) -> BeaconSettings:
    from lockwatch.config import ConfigError

    from .client import server_of

    table = tables.get(NAME, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [beacon] must be a table")
    urls = table.get("url", [])
    if not isinstance(urls, list) or not all(isinstance(url, str) for url in urls):
        raise ConfigError(f"{where}: beacon.url must be a list of http://host:port URLs")
    for url in urls:
        try:
            server_of(url)
        except ValueError as exc:
            raise ConfigError(f"{where}: beacon.url: {exc}") from exc
    given = {key: table.get(key) for key in ("prefix", "token_file")}
    for key, value in given.items():
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{where}: beacon.{key} must be a string")
    return BeaconSettings(tuple(urls), given["prefix"], given["token_file"])


def settings_of(wanted: Wanted) -> BeaconSettings:
    settings = wanted.settings(NAME)
    return settings if isinstance(settings, BeaconSettings) else BeaconSettings()


def urls_of(wanted: Wanted) -> tuple[str, ...]:
    """The servers this run names: --beacon's, else the config's (SourceError: a
    URL that is not a beacon's)."""
    from .client import server_of

    urls = tuple(wanted.values.get("beacon_urls") or ()) or settings_of(wanted).urls
    for url in urls:
        try:
            server_of(url)
        except ValueError as exc:
            raise SourceError(f"--beacon: {exc}") from exc
    return urls
