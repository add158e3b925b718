"""`lockwatch.toml`: what every run shares, and each source's own tables.

Looked for in the current directory, then in the user config directory
(platformdirs), unless `--config` names a file. Flags override it.

    readonly = true        # (top level) no break, steal, release or cancel, anywhere

    [actions]
    audit_log = "/var/log/lockwatch/audit.jsonl"  # default: the user state dir
    audit_key = "/etc/lockwatch/audit.key"        # HMAC key, apart from the log;
                                                  # default: the user config dir
    audit_syslog = true    # also send each record's hash to syslog/journald
    tombstone_dir = ".lockwatch-broken"           # relative: beside each lock

Each source owns its tables and documents them in its plugin module
(lockwatch/sources/*/plugin.py): [postgres] and [advisory] (servers,
thresholds, advisory key names), [kernel] (list the kernel's locks). This
module reads none of them: it keeps every table as read, and whoever builds
what to watch has the registry read the sources' own
(`lockwatch.sources.registry.configured`), so the config knows no source.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FILE_NAME = "lockwatch.toml"


class ConfigError(ValueError):
    """The config file exists but cannot be used; the message says where and why."""


@dataclass(frozen=True)
class Config:
    readonly: bool = False
    audit_log: str | None = None
    tombstone_dir: str | None = None
    audit_key: str | None = None
    audit_syslog: bool = False
    # Each source's settings from its own tables, by source name, once the
    # registry has read them (`registry.configured`); absent: not read (defaults).
    sources: Mapping[str, Any] = field(default_factory=dict)
    # Where it was read from, and every table as read: commands read their own
    # tables (`lockwatch serve`: [serve]).
    where: str = "config"
    tables: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def source(self, name: str) -> Any:
        return self.sources.get(name)


def default_paths() -> list[Path]:
    from platformdirs import user_config_dir

    return [Path.cwd() / FILE_NAME, Path(user_config_dir("lockwatch")) / FILE_NAME]


def load(explicit: str | os.PathLike[str] | None = None) -> Config:
    """The config in force: `explicit` if given (it must exist), else the first
    default path that exists, else defaults."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"{path}: no such config file")
        return parse(path)
    for candidate in default_paths():
        try:
            found = candidate.is_file()
        except OSError as exc:  # e.g. a config directory we may not search
            raise ConfigError(f"{candidate}: cannot read: {exc.strerror}") from exc
        if found:
            return parse(candidate)
    return Config()


def parse(path: Path) -> Config:
    import tomllib  # only when there is a file: most runs have none

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return from_mapping(data, str(path))


def _table(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{key}] must be a table")
    return value


def from_mapping(data: dict[str, Any], where: str = "config") -> Config:
    """The settings every run shares, checked; the sources' tables kept as read."""
    readonly = data.get("readonly", False)
    if not isinstance(readonly, bool):
        raise ConfigError(f"{where}: readonly must be true or false")
    actions = _table(data, "actions", where)
    paths: dict[str, str | None] = {}
    for key in ("audit_log", "tombstone_dir", "audit_key"):
        value = actions.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{where}: actions.{key} must be a path")
        paths[key] = os.path.expanduser(value) if value else None
    audit_syslog = actions.get("audit_syslog", False)
    if not isinstance(audit_syslog, bool):
        raise ConfigError(f"{where}: actions.audit_syslog must be true or false")
    return Config(
        readonly=readonly,
        audit_log=paths["audit_log"],
        tombstone_dir=paths["tombstone_dir"],
        audit_key=paths["audit_key"],
        audit_syslog=audit_syslog,
        where=where,
        tables=data,
    )
