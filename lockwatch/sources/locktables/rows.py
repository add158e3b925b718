"""From a lock table's rows as a server gave them to `Lock`s, whatever the server:
which rows are locks, who their tool says holds them, since when. Also the
Liquibase JVMs on this host (the one thing looked up outside the server).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import NO_HOLDER, Holder, Lock
from lockwatch.model.slots import lean_dataclass
from lockwatch.sources.locktables.config import TableSpec
from lockwatch.sources.locktables.facts import KNEX, LIQUIBASE, UNLOCKS, TableLock

FORMAT = "lock-table"
# Liquibase's LOCKEDBY: `<host name> (<address>)`, as InetAddress gives them.
_LOCKEDBY = lazy_compile(r"\s*(?P<host>[^\s()]+)\s*\((?P<ip>[^()]*)\)\s*")


@lean_dataclass(frozen=True, slots=True)
class Found:
    """One lock table on a server, and the sessions that touch it now."""

    tool: str
    schema: str  # the schema (PostgreSQL) or database (MySQL) it is in
    relation: str  # its own name
    rows: Sequence[Mapping[str, Any]]  # the whole rows, as read
    # Sessions at work on the table or its tool's other table (evidence the tool runs).
    at_work: tuple[str, ...] = ()
    # A session holding the lock row itself in an open transaction (row locks).
    in_transaction: int | None = None
    # The config's word on a table of its naming ([[locktables]]).
    spec: TableSpec | None = None
    # Each row's version, by position, as the server keeps one (facts.TableLock.version).
    versions: Sequence[str | None] = ()

    @property
    def table(self) -> str:
        """schema.table, as ids and messages name it (`qualified`)."""
        return qualified(self.schema, self.relation)


# A name part written as is in ids and messages; any other is quoted.
_PLAIN_PART = lazy_compile(r"[\w$]+")


def qualified(schema: str, relation: str) -> str:
    """`schema.table`, each part that is not a plain name double-quoted (a quote in
    it doubled), as SQL quotes it: `"a.b".knex_migrations_lock` and
    `a."b.knex_migrations_lock"` are two tables, and an ordinary name's text (and
    so its lock's id) is what it always was."""
    return ".".join(_quoted_part(part) for part in (schema, relation))


def _quoted_part(part: str) -> str:
    if _PLAIN_PART.fullmatch(part):
        return part
    return '"' + part.replace('"', '""') + '"'


def tool_of(table_name: str) -> str | None:
    """The tool whose lock table this is by its default name. Only those: a table
    the config names (deploy_lock, say) found in another schema is no knex table."""
    name = table_name.lower()
    if name == "databasechangeloglock":
        return LIQUIBASE
    if name == "knex_migrations_lock":
        return KNEX
    return None


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "t", "true", "y", "yes")
    if isinstance(value, bytes):
        return any(value)  # MySQL's BIT(1)
    return bool(value)


def _get(row: Mapping[str, Any], column: str) -> Any:
    for name, value in row.items():
        if name.lower() == column:
            return value
    return None


def _canonical(row: Mapping[str, Any]) -> str:
    def plain(value: object) -> object:
        if isinstance(value, datetime):
            return value.isoformat()
        if isinstance(value, bytes):
            return int.from_bytes(value, "big")
        return value

    return json.dumps({k: plain(v) for k, v in row.items()}, sort_keys=True, default=str)


def _unlock(
    tool: str, row: Mapping[str, Any], spec: TableSpec | None
) -> tuple[tuple[str, str], ...]:
    """The tool's unlock, with the columns spelled as the table spells them."""
    if spec is not None:
        if spec.unlocked is None:
            return ()
        cleared = tuple((column, "null") for column in (spec.holder, spec.since) if column)
        return ((spec.locked, spec.unlocked), *cleared)
    spelled = {name.lower(): name for name in row}
    return tuple((spelled.get(col, col), value) for col, value in UNLOCKS.get(tool, ()))


def _locked_and_key(
    tool: str, row: Mapping[str, Any], spec: TableSpec | None
) -> tuple[bool, object]:
    """Whether the row holds its tool's lock, and the row's key, as its tool reads them."""
    if spec is not None:
        return _truthy(row.get(spec.locked)), row.get(spec.key) if spec.key else None
    if tool == KNEX:
        return _truthy(_get(row, "is_locked")), _get(row, "index")
    return _truthy(_get(row, "locked")), _get(row, "id")


def to_locks(
    found: Sequence[Found],
    *,
    engine: str,
    source: str,
    server: str,
    database: str,
    polled_at: datetime,
    ages: Mapping[tuple[str, int], float | None],
    jvms: tuple[int, ...] | None,
    make_id: Any,
) -> list[Lock]:
    """The rows of `found` that hold their tool's lock. `ages`: by (table, row's
    position), seconds since the row's own time; `make_id(tool, table, key)`."""
    locks: list[Lock] = []
    for table in found:
        for position, row in enumerate(table.rows):
            tool = table.tool
            spec = table.spec
            locked, key = _locked_and_key(tool, row, spec)
            in_transaction = table.in_transaction if tool == KNEX else None
            if not locked and in_transaction is None:
                continue
            holder_text = holder_host = holder_ip = None
            holder = NO_HOLDER
            if spec is not None and spec.holder and row.get(spec.holder) is not None:
                holder_text = str(row.get(spec.holder))
                holder = Holder(actor=holder_text)
            elif tool == LIQUIBASE:
                lockedby = _get(row, "lockedby")
                holder_text = None if lockedby is None else str(lockedby)
                match = _LOCKEDBY.fullmatch(holder_text or "")
                if match is not None:
                    holder_host, holder_ip = match["host"], match["ip"].strip() or None
                elif holder_text:
                    holder_host = holder_text.strip()
                holder = Holder(host=holder_host, actor=holder_text)
            elif in_transaction is not None:
                holder = Holder(session=f"pid {in_transaction}")
            key_text = "" if key is None else str(key)
            version = table.versions[position] if position < len(table.versions) else None
            facts = TableLock(
                engine=engine,
                server=server,
                database=database,
                tool=tool,
                table=table.table,
                key=key_text,
                row=_canonical(row),
                polled_at=polled_at,
                unlock=_unlock(tool, row, spec),
                holder=holder_text,
                holder_host=holder_host,
                holder_ip=holder_ip,
                age=ages.get((table.table, position)),
                at_work=table.at_work,
                in_transaction=in_transaction,
                jvms=jvms if tool == LIQUIBASE else None,
                schema=table.schema,
                relation=table.relation,
                version=version,
            )
            locks.append(
                Lock(
                    id=make_id(tool, table.table, key_text),
                    source=source,
                    format=FORMAT,
                    name=f"{tool} lock {table.table}" + (f" #{key_text}" if key_text else ""),
                    path=None,
                    holder=holder,
                    acquired_at=facts.since_at(),
                    content=json.loads(facts.row),
                    facts=facts,
                )
            )
    return locks


def liquibase_jvms() -> tuple[int, ...] | None:
    """Java processes on this host with Liquibase in their command line (None: the
    process table could not be read)."""
    import psutil

    found: list[int] = []
    try:
        for process in psutil.process_iter(["pid", "name", "cmdline"]):
            info = process.info
            cmdline = info.get("cmdline") or []
            first = (cmdline[0] if cmdline else info.get("name") or "").rsplit("/", 1)[-1]
            if first.startswith("java") and any("liquibase" in arg.lower() for arg in cmdline):
                found.append(int(info["pid"]))
    except (psutil.Error, OSError):
        return None
    return tuple(found)


def _wants_jvms(found: Sequence[Found]) -> bool:
    return any(
        table.tool == LIQUIBASE and any(_truthy(_get(row, "locked")) for row in table.rows)
        for table in found
    )


def jvms_for(found: Sequence[Found]) -> tuple[int, ...] | None:
    """`liquibase_jvms()` where a Liquibase table among `found` is locked (the
    process walk costs: no other row reads it); None elsewhere."""
    return liquibase_jvms() if _wants_jvms(found) else None
