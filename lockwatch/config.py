"""`lockwatch.toml`: servers, thresholds and advisory key names.

Looked for in the current directory, then in the user config directory
(platformdirs), unless `--config` names a file. Flags override it.

    [postgres]
    dsn = ["postgresql://monitor@db1/app", "postgresql://monitor@db2/app"]
    idle_after = 60        # seconds idle (in a transaction) before holders are stale
    all = false            # true: every pg_locks row, not only the interesting ones

    [advisory.namespaces]  # pg_advisory_lock(int4, int4): name the first int
    1 = "agent"            # (1, 42) shows as agent:42

    [advisory.keys]        # pg_advisory_lock(bigint): name single keys
    "8121971372" = "nightly-reindex"

    [advisory]
    strings = ["billing-sync"]  # keys hashed from strings (BLAKE2b-8, as seed 003 does)

    readonly = true        # (top level) no break, steal, release or cancel, anywhere

    [actions]
    audit_log = "/var/log/lockwatch/audit.jsonl"  # default: the user state dir
    tombstone_dir = ".lockwatch-broken"           # relative: beside each lock
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lockwatch.model.pg import DEFAULT_IDLE_AFTER, AdvisoryNames

FILE_NAME = "lockwatch.toml"


class ConfigError(ValueError):
    """The config file exists but cannot be used; the message says where and why."""


@dataclass(frozen=True)
class Config:
    pg_dsns: tuple[str, ...] = ()
    pg_idle_after: float = DEFAULT_IDLE_AFTER
    pg_all: bool = False
    advisory: AdvisoryNames = field(default_factory=lambda: AdvisoryNames.build())
    readonly: bool = False
    audit_log: str | None = None
    tombstone_dir: str | None = None


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


def _int_key(text: str, where: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{where}: {text!r} is not an integer key") from None


def from_mapping(data: dict[str, Any], where: str = "config") -> Config:
    postgres = _table(data, "postgres", where)
    dsn = postgres.get("dsn", [])
    dsns = [dsn] if isinstance(dsn, str) else dsn
    if not isinstance(dsns, list) or not all(isinstance(d, str) for d in dsns):
        raise ConfigError(f"{where}: postgres.dsn must be a string or a list of strings")
    idle_after = postgres.get("idle_after", DEFAULT_IDLE_AFTER)
    if (
        isinstance(idle_after, bool)
        or not isinstance(idle_after, int | float)
        or not math.isfinite(idle_after)
        or idle_after < 0
    ):
        raise ConfigError(f"{where}: postgres.idle_after must be a number of seconds >= 0")
    pg_all = postgres.get("all", False)
    if not isinstance(pg_all, bool):
        raise ConfigError(f"{where}: postgres.all must be true or false")

    advisory = _table(data, "advisory", where)
    namespaces = _table(advisory, "namespaces", f"{where}: advisory")
    keys = _table(advisory, "keys", f"{where}: advisory")
    strings = advisory.get("strings", [])
    if not isinstance(strings, list) or not all(isinstance(s, str) for s in strings):
        raise ConfigError(f"{where}: advisory.strings must be a list of strings")
    for table in (namespaces, keys):
        if not all(isinstance(v, str) for v in table.values()):
            raise ConfigError(f"{where}: advisory names must be strings")
    names = AdvisoryNames.build(
        namespaces={_int_key(k, where): v for k, v in namespaces.items()},
        keys={_int_key(k, where): v for k, v in keys.items()},
        strings=strings,
    )
    readonly = data.get("readonly", False)
    if not isinstance(readonly, bool):
        raise ConfigError(f"{where}: readonly must be true or false")
    actions = _table(data, "actions", where)
    paths: dict[str, str | None] = {}
    for key in ("audit_log", "tombstone_dir"):
        value = actions.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{where}: actions.{key} must be a path")
        paths[key] = os.path.expanduser(value) if value else None
    return Config(
        readonly=readonly,
        audit_log=paths["audit_log"],
        tombstone_dir=paths["tombstone_dir"],
        pg_dsns=tuple(dsns),
        pg_idle_after=float(idle_after),
        pg_all=pg_all,
        advisory=names,
    )
