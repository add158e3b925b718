"""Lock tables on a PostgreSQL server: found by one catalog query per poll (an
index lookup in pg_class by name, sent with the poll's own statements), and only
the tables that exist are read (one more statement, all of them in it). Breaking
one is its tool's own unlock as a compare-and-swap: the UPDATE matches the whole
row the operator saw.

Flyway keeps no lock row on PostgreSQL (current releases take advisory locks:
they show as advisory locks), so there is none to find here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import field
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql

from lockwatch.model.lock import Lock
from lockwatch.model.slots import lean_dataclass
from lockwatch.sources.locktables.config import TableSpec, spec_for
from lockwatch.sources.locktables.facts import CONFIGURED, KNEX, TableLock
from lockwatch.sources.locktables.rows import (
    Found,
    jvms_for,
    qualified,
    to_locks,
    tool_of,
)
from lockwatch.sources.locktables.work import tool_statement
from lockwatch.sources.postgres import ids

# The tables looked for by name (knex's default, Liquibase's as it creates it on
# PostgreSQL, and quoted upper case).
KNOWN = ("knex_migrations_lock", "databasechangeloglock", "DATABASECHANGELOGLOCK")

_CATALOG = """
SELECT n.nspname AS schema_name, c.relname AS table_name,
       pg_catalog.current_database() AS database_name,
       ARRAY(SELECT a.attname::text FROM pg_catalog.pg_attribute AS a
             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
       -- Sessions holding the table or its tool's other table (knex_migrations,
       -- databasechangelog) open: the tool at work now.
       (SELECT json_agg(json_build_object('pid', l.pid, 'mode', l.mode,
                                          'own', l.relation = c.oid,
                                          'table', CASE WHEN l.relation = c.oid
                                                        THEN c.relname ELSE s.relname END))
        FROM pg_catalog.pg_locks AS l
        WHERE l.locktype = 'relation' AND l.granted
          AND l.pid <> pg_catalog.pg_backend_pid()
          AND l.database = (SELECT oid FROM pg_catalog.pg_database
                            WHERE datname = pg_catalog.current_database())
          AND l.relation IN (c.oid, s.oid)) AS lockers,
       s.relname AS other_table
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_class AS s
       ON s.relnamespace = c.relnamespace
      AND s.relname = CASE WHEN lower(c.relname) = 'databasechangeloglock'
                           THEN left(c.relname, -4)
                           WHEN right(c.relname, 5) = '_lock' THEN left(c.relname, -5) END
WHERE c.relname = ANY(%(names)s) AND c.relkind IN ('r', 'p')
  AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
"""
# Row locks an UPDATE or SELECT … FOR UPDATE of the lock row takes on its table.
_ROW_MODES = ("RowShareLock", "RowExclusiveLock")
# What a plain SELECT takes: anyone's read, held to its transaction's end.
_READ_MODE = "AccessShareLock"


@lean_dataclass(frozen=True)
class TablesRead:
    database: str = ""
    found: Sequence[Found] = ()
    ages: Mapping[tuple[str, int], float | None] = field(default_factory=dict)
    jvms: tuple[int, ...] | None = None


NOTHING = TablesRead()


def catalog_statement(specs: Sequence[TableSpec] = ()) -> str:
    """The catalog query for the known tables and `specs`', its names written in:
    it is sent with the poll's own statements (source.py), one round trip for
    all, where no parameter can go."""
    names = sql.Literal([*KNOWN, *(spec.name for spec in specs)]).as_string(None)
    return _CATALOG.replace("%(names)s", names).rstrip() + ";\n"


async def read_tables(
    conn: psycopg.AsyncConnection[Any],
    sessions: Sequence[Mapping[str, Any]],
    specs: Sequence[TableSpec] = (),
    catalog: Sequence[Mapping[str, Any]] | None = None,
) -> TablesRead:
    """The lock tables of the connection's database, read. A table that cannot be
    read now (locked by DDL past lock_timeout) is left for the next poll.
    `catalog`: catalog_statement's rows, when the poll read them already."""
    cursor = conn.cursor(row_factory=psycopg.rows.dict_row)
    if catalog is None:
        await cursor.execute(catalog_statement(specs))
        catalog = await cursor.fetchall()
    if not catalog:
        return NOTHING
    database = str(catalog[0]["database_name"])
    parts: list[sql.Composable] = []
    tables: list[tuple[str, str, Any, TableSpec | None]] = []
    for index, entry in enumerate(catalog):
        spec = spec_for(specs, entry["schema_name"], entry["table_name"])
        tool = CONFIGURED if spec is not None else tool_of(entry["table_name"])
        if tool is None:
            continue
        name = qualified(entry["schema_name"], entry["table_name"])
        tables.append((tool, name, entry, spec))
        columns = {str(c).lower(): str(c) for c in entry["columns"] or ()}
        since = spec.since if spec is not None else columns.get("lockgranted")
        age: sql.Composable = (
            sql.SQL("EXTRACT(epoch FROM now() - t.{})::float8").format(sql.Identifier(since))
            if since
            else sql.SQL("NULL::float8")
        )
        parts.append(
            # xmin: the row's version, new on every write (a break compares it).
            sql.SQL(
                "SELECT {} AS n, to_jsonb(t) AS row, t.xmin::text AS xmin, {} AS age"
                " FROM {}.{} AS t"
            ).format(
                sql.Literal(index),
                age,
                sql.Identifier(entry["schema_name"]),
                sql.Identifier(entry["table_name"]),
            )
        )
    if not parts:
        return NOTHING
    try:
        await cursor.execute(sql.SQL(" UNION ALL ").join(parts))
        rows = await cursor.fetchall()
    except (
        psycopg.errors.LockNotAvailable,
        psycopg.errors.QueryCanceled,
        # A configured column that is not there, or `since` not a time.
        psycopg.errors.UndefinedColumn,
        psycopg.errors.UndefinedFunction,
        psycopg.errors.DatatypeMismatch,
    ):
        return NOTHING
    by_table, versions, ages = _by_table(rows, catalog)
    found: list[Found] = []
    for tool, _, entry, spec in tables:
        index = catalog.index(entry)
        at_work, in_transaction = _evidence(tool, entry, sessions, database)
        found.append(
            Found(
                tool,
                entry["schema_name"],
                entry["table_name"],
                by_table.get(index, []),
                at_work,
                in_transaction,
                spec,
                versions.get(index, []),
            )
        )
    jvms = await asyncio.to_thread(jvms_for, found)
    return TablesRead(database, found, ages, jvms)


def _by_table(
    rows: Sequence[Mapping[str, Any]], catalog: Sequence[Mapping[str, Any]]
) -> tuple[
    dict[int, list[Mapping[str, Any]]],
    dict[int, list[str | None]],
    dict[tuple[str, int], float | None],
]:
    """The rows read, by their table's place in the catalog: each row, its version
    (xmin) and its age, by (table, position)."""
    by_table: dict[int, list[Mapping[str, Any]]] = {}
    versions: dict[int, list[str | None]] = {}
    ages: dict[tuple[str, int], float | None] = {}
    for row in rows:
        n = int(row["n"])
        kept = by_table.setdefault(n, [])
        entry = catalog[n]
        ages[(qualified(entry["schema_name"], entry["table_name"]), len(kept))] = row["age"]
        kept.append(row["row"] if isinstance(row["row"], dict) else {})
        versions.setdefault(n, []).append(f"xmin {row['xmin']}" if row["xmin"] else None)
    return by_table, versions, ages


def _evidence(
    tool: str, entry: Mapping[str, Any], sessions: Sequence[Mapping[str, Any]], database: str
) -> tuple[tuple[str, ...], int | None]:
    """What shows the tool at work: sessions holding its tables open other than to
    read them, and sessions of this database whose current (or last) statement is
    the tool's own work on them (work.tool_statement: no read)."""
    lines: list[str] = []
    in_transaction = None
    seen: set[int] = set()
    for locker in entry["lockers"] or ():
        if locker["mode"] == _READ_MODE:
            continue  # a reader's open transaction (its select), no run at work
        pid = int(locker["pid"])
        lines.append(f"pid {pid} holds {locker['mode']} on {locker['table']}")
        seen.add(pid)
        if tool == KNEX and locker["own"] and locker["mode"] in _ROW_MODES:
            in_transaction = pid
    names = [str(entry["table_name"]).lower()]
    if entry["other_table"]:
        names.append(str(entry["other_table"]).lower())
    for session in sessions:
        pid = session["pid"]
        if pid in seen or session.get("datname") != database:
            continue
        # lockwatch's own sessions read and break these tables: no tool at work.
        if str(session.get("application_name") or "").startswith("lockwatch"):
            continue
        query = str(session.get("query") or "").lower()
        if any(name in query for name in names) and tool_statement(query, tool):
            state = session.get("state") or "unknown"
            lines.append(f"pid {pid} ({state}) ran a statement on {names[0]}")
            seen.add(pid)
    return tuple(lines), in_transaction


def table_locks(read: TablesRead, server: str, polled_at: datetime) -> list[Lock]:
    if not read.found:
        return []
    return to_locks(
        read.found,
        engine="postgres",
        source="postgres",
        server=server,
        database=read.database,
        polled_at=polled_at,
        ages=read.ages,
        jvms=read.jvms,
        make_id=lambda tool, table, key: ids.pg_id(server, tool, f"{table}/{key}", "row", "held"),
    )


def unlock_row(dsn: str, facts: TableLock, *, lock_timeout_ms: int = 2000) -> int:
    """Its tool's unlock, only where the row is still what the operator saw: the
    rows changed (0: nothing, it changed since they looked)."""
    from psycopg import conninfo

    from lockwatch.model.action import ActionFailed, ActionRefused
    from lockwatch.sources.postgres.actor import ACTION_APPLICATION
    from lockwatch.sources.postgres.dsn import scrub

    schema, table = facts.names
    assignments = sql.SQL(", ").join(
        sql.SQL("{} = {}").format(sql.Identifier(column), sql.SQL(_literal(value)))
        for column, value in facts.unlock
    )
    # The row's values and its version: the same values written again by a new
    # run (is_locked 1 -> 0 -> 1) are another row version, another holder's lock.
    statement = sql.SQL(
        "UPDATE {}.{} AS t SET {} WHERE to_jsonb(t) = %s::jsonb AND t.xmin = %s::xid"
    ).format(sql.Identifier(schema), sql.Identifier(table), assignments)
    xmin = _xmin(facts.version)
    try:
        with psycopg.connect(
            conninfo.make_conninfo(dsn, dbname=facts.database),
            application_name=ACTION_APPLICATION,
            connect_timeout=5,
        ) as conn:
            # A runner's open transaction holds the row: waiting on it would be to
            # take the lock after the migration, not to free a stuck one.
            conn.execute(f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}")
            changed = conn.execute(statement, (json.dumps(facts.seen), xmin)).rowcount
    except psycopg.errors.LockNotAvailable as exc:
        raise ActionRefused(
            "in_use",
            f"{facts.table}'s row is held by an open transaction (a run at work): nothing done",
        ) from exc
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ActionFailed("server_error", scrub(first, dsn)) from exc
    return changed


def _xmin(version: str | None) -> str:
    from lockwatch.model.action import ActionRefused

    prefix = "xmin "
    if version is None or not version.startswith(prefix) or not version[5:].isdigit():
        # The plan refuses a row without its version; never compare values alone.
        raise ActionRefused("unversioned", f"no row version (xmin) was read: {version!r}")
    return version[len(prefix) :]


def _literal(value: str) -> str:
    # The unlocks are lockwatch's own constants (facts.UNLOCKS), never a row's text.
    if value not in ("0", "1", "true", "false", "null"):
        raise ValueError(f"not an unlock value: {value!r}")
    return value.upper()


def render_tables(locks: Sequence[Lock], now: datetime, host: str) -> tuple[bytes, int]:
    """`ls --json`'s records of a poll's lock rows (a JSON array), and how many are stale."""
    from lockwatch.clock import FrozenClock
    from lockwatch.model.process import StaticProcesses
    from lockwatch.model.report import lock_record, records_json_array
    from lockwatch.model.verdict import State, evaluate_all

    verdicts = evaluate_all(list(locks), StaticProcesses(), FrozenClock(now), host)
    memo: dict[int, dict[str, Any]] = {}
    records = [lock_record(lock, v, now, memo) for lock, v in zip(locks, verdicts, strict=True)]
    stale = sum(v.state is State.STALE for v in verdicts)
    return records_json_array(records), stale
