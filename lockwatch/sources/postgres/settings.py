"""The postgres source's settings: its [postgres] and [advisory] tables of
lockwatch.toml (documented in plugin.py), read and checked."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from lockwatch.model.slots import lean_dataclass
from lockwatch.sources.locktables.config import TableSpec, read_specs

# Seconds a session may sit idle in a transaction holding locks before it is
# suspect (facts.py names it too): declared.py's, which the CLI's options name.
from lockwatch.sources.postgres.declared import DEFAULT_IDLE_AFTER as DEFAULT_IDLE_AFTER
from lockwatch.sources.servers import config_seconds

if TYPE_CHECKING:
    from lockwatch.sources.postgres.facts import AdvisoryNames


@lean_dataclass(frozen=True)
class PgSettings:
    dsns: tuple[str, ...] = ()
    idle_after: float = DEFAULT_IDLE_AFTER
    all_rows: bool = False
    # None: the config names no advisory keys (nothing to load for that).
    advisory: AdvisoryNames | None = None
    password_file: str | None = None
    locktables: tuple[TableSpec, ...] = ()  # [[locktables]]: lock tables the config names


@lru_cache(maxsize=1)
def defaults() -> PgSettings:
    """The settings without a config (made when first asked, not at import)."""
    return PgSettings()


def _error(message: str) -> Exception:
    from lockwatch.config import ConfigError

    return ConfigError(message)


def _table(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise _error(f"{where}: [{key}] must be a table")
    return value


def _int_key(text: str, where: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _error(f"{where}: {text!r} is not an integer key") from None


def _int32_key(text: str, where: str) -> int:
    """A pair's first key: an int4."""
    key = _int_key(text, where)
    if not -(2**31) <= key < 2**31:
        raise _error(f"{where}: {text!r} is not a 32-bit key (the pair form's keys are int4)")
    return key


def read_settings(data: Mapping[str, Any], where: str) -> PgSettings:
    postgres = _table(data, "postgres", where)
    dsn = postgres.get("dsn", [])
    dsns = [dsn] if isinstance(dsn, str) else dsn
    if not isinstance(dsns, list) or not all(isinstance(d, str) for d in dsns):
        raise _error(f"{where}: postgres.dsn must be a string or a list of strings")
    idle_after = config_seconds(
        postgres, "idle_after", DEFAULT_IDLE_AFTER, "postgres.idle_after", where
    )
    pg_all = postgres.get("all", False)
    if not isinstance(pg_all, bool):
        raise _error(f"{where}: postgres.all must be true or false")
    password_file = postgres.get("password_file")
    if password_file is not None and (not isinstance(password_file, str) or not password_file):
        raise _error(f"{where}: postgres.password_file must be a path")

    advisory = _table(data, "advisory", where)
    namespaces = _table(advisory, "namespaces", f"{where}: advisory")
    keys = _table(advisory, "keys", f"{where}: advisory")
    strings = advisory.get("strings", [])
    if not isinstance(strings, list) or not all(isinstance(s, str) for s in strings):
        raise _error(f"{where}: advisory.strings must be a list of strings")
    pair_strings = _table(advisory, "pair_strings", f"{where}: advisory")
    for texts in pair_strings.values():
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise _error(f"{where}: advisory.pair_strings maps a first key to a list of strings")
    for table in (namespaces, keys):
        if not all(isinstance(v, str) for v in table.values()):
            raise _error(f"{where}: advisory names must be strings")
    names: AdvisoryNames | None = None
    if namespaces or keys or strings or pair_strings:
        from lockwatch.sources.postgres.facts import AdvisoryNames

        names = AdvisoryNames.build(
            namespaces={_int32_key(k, where): v for k, v in namespaces.items()},
            keys={_int_key(k, where): v for k, v in keys.items()},
            strings=strings,
            pair_strings={_int32_key(k, where): v for k, v in pair_strings.items()},
        )
    return PgSettings(
        tuple(dsns),
        idle_after,
        pg_all,
        names,
        os.path.expanduser(password_file) if password_file else None,
        read_specs(data.get("locktables"), where),
    )
