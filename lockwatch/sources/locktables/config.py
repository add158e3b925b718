"""Lock tables the config names ([[locktables]] in lockwatch.toml): a table whose
rows are locks, and which of its columns say held, by whom and since when.

    [[locktables]]
    table = "ops.deploy_lock"   # schema.table, or a table name in any schema
    locked = "held"             # held while true / non-zero
    holder = "owner"            # optional: who holds it, as the row records it
    since = "taken_at"          # optional: a timestamp column, when it was taken
    key = "name"                # optional: the column naming each row's lock
    unlocked = "false"          # optional: what a break writes to `locked` (and
                                # NULL to holder and since); without it, no break
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.slots import lean_dataclass

# A break writes only these (never text from the config into SQL otherwise).
UNLOCK_VALUES = ("false", "true", "0", "1")
_NAME = lazy_compile(r"[A-Za-z_][A-Za-z0-9_$]*")


@lean_dataclass(frozen=True, slots=True)
class TableSpec:
    table: str
    locked: str
    holder: str | None = None
    since: str | None = None
    key: str | None = None
    unlocked: str | None = None

    @property
    def name(self) -> str:
        """The table's own name, without its schema."""
        return self.table.rsplit(".", 1)[-1]

    def matches(self, schema: str, table: str) -> bool:
        # Compared part by part: "ops.deploy_lock" is no table named that in any
        # schema, nor a table "deploy_lock" in a schema "ops.x".
        return self.table.split(".") in ([table], [schema, table])


def read_specs(value: Any, where: str) -> tuple[TableSpec, ...]:
    from lockwatch.config import ConfigError

    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
        raise ConfigError(f"{where}: locktables must be [[locktables]] entries")
    specs: list[TableSpec] = []
    for number, entry in enumerate(value, 1):
        at = f"{where}: locktables entry {number}"
        unknown = set(entry) - {"table", "locked", "holder", "since", "key", "unlocked"}
        if unknown:
            raise ConfigError(f"{at}: unknown key {sorted(unknown)[0]!r}")
        names: dict[str, str | None] = {}
        for field in ("table", "locked", "holder", "since", "key"):
            text = entry.get(field)
            if text is None and field in ("table", "locked"):
                raise ConfigError(f"{at}: `{field}` is required")
            if text is not None and not _valid(text, dotted=field == "table"):
                raise ConfigError(f"{at}: {field} must be a plain SQL name, not {text!r}")
            names[field] = text
        unlocked = entry.get("unlocked")
        if isinstance(unlocked, bool):
            unlocked = "true" if unlocked else "false"
        elif isinstance(unlocked, int):
            unlocked = str(unlocked)
        if unlocked is not None and unlocked not in UNLOCK_VALUES:
            raise ConfigError(f"{at}: unlocked must be one of {', '.join(UNLOCK_VALUES)}")
        table, locked = names["table"], names["locked"]
        assert table is not None and locked is not None
        specs.append(
            TableSpec(table, locked, names["holder"], names["since"], names["key"], unlocked)
        )
    return tuple(specs)


def _valid(text: object, *, dotted: bool) -> bool:
    if not isinstance(text, str):
        return False
    parts = text.split(".") if dotted else [text]
    return 1 <= len(parts) <= 2 and all(_NAME.fullmatch(part) for part in parts)


def spec_for(specs: Sequence[TableSpec], schema: str, table: str) -> TableSpec | None:
    return next((spec for spec in specs if spec.matches(schema, table)), None)
