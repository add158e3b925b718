"""Lock tables on a MySQL or MariaDB server (knex's `knex_migrations_lock`,
Liquibase's `DATABASECHANGELOGLOCK`, in any database, and the tables the config
names in [[locktables]], its `schema` being the database): found by one
information_schema query per poll, and only the tables that exist are read.
Breaking one is its tool's own unlock (or the config's `unlocked`) as a
compare-and-swap: the UPDATE matches every column of the row as the operator saw it.

PROCESSLIST shows a statement only while it runs: an idle connection of a run
at work shows nothing, so a row with nothing visibly running is `unknown`.
Flyway keeps no lock row on MySQL (it takes GET_LOCK named locks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from lockwatch.model.action import ActionFailed, ActionRefused
from lockwatch.model.lock import Lock
from lockwatch.sources.locktables.config import TableSpec, spec_for
from lockwatch.sources.locktables.facts import CONFIGURED, TableLock
from lockwatch.sources.locktables.rows import (
    Found,
    jvms_for,
    qualified,
    to_locks,
    tool_of,
)
from lockwatch.sources.locktables.work import tool_statement

# Marks lockwatch's own statements: another lockwatch's read is no tool at work.
MARK = "/* lockwatch */"
# The tables looked for by name (MySQL 8's information_schema compares them as
# bytes on Linux: Liquibase's in both cases).
KNOWN = ("knex_migrations_lock", "DATABASECHANGELOGLOCK", "databasechangeloglock")
_KNOWN_LOWER = frozenset(name.lower() for name in KNOWN)
# UPDATE_TIME: InnoDB keeps no row version, so a lock row's version is its
# table's last change (to the second), read before the rows. MySQL 8 caches it
# unless told not to (the hint; MariaDB reads the hint as a comment).
_CATALOG = f"""{MARK}
SELECT /*+ SET_VAR(information_schema_stats_expiry = 0) */
       TABLE_SCHEMA, TABLE_NAME, @@lower_case_table_names, UPDATE_TIME, NOW()
FROM information_schema.TABLES
WHERE TABLE_NAME IN ({{names}}) AND TABLE_TYPE = 'BASE TABLE'
"""
_UPDATE_TIME = f"""{MARK}
SELECT /*+ SET_VAR(information_schema_stats_expiry = 0) */ UPDATE_TIME
FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s
"""
# Not there, not ours to read, or the statement's time ran out: left for the next poll.
_SKIP = (1142, 1143, 1146, 1205, 1969, 3024)
# Row locks of a run in one transaction keep a break waiting no longer than this.
LOCK_WAIT_S = 2


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def read_tables(
    cursor: Any,
    processes: Sequence[Sequence[Any]],
    *,
    server: str,
    polled_at: datetime,
    specs: Sequence[TableSpec] = (),
) -> list[Lock]:
    """The poll's lock rows. `processes`: PROCESSLIST rows (ID, USER, HOST, DB,
    COMMAND, TIME_MS, STATE, INFO, QUERY_ID); `specs`: the config's [[locktables]]."""
    import pymysql

    names = list(dict.fromkeys([*KNOWN, *(spec.name for spec in specs)]))
    cursor.execute(_CATALOG.format(names=", ".join(["%s"] * len(names))), names)
    answer = cursor.fetchall()
    catalog = [(str(row[0]), str(row[1]), _version(row[3], row[4])) for row in answer]
    if not catalog:
        return []
    # The catalog compares names without regard to case whatever the server does
    # (MariaDB's information_schema): a name differing in case is the table the
    # config named only where the server's table names fold case too.
    folds = bool(answer[0][2])
    found: list[Found] = []
    ages: dict[tuple[str, int], float | None] = {}
    for schema, table, version in catalog:
        spec = _spec(specs, schema, table, folds)
        # A name the config gave for another database's table is no lock table here.
        known = spec is None and table.lower() in _KNOWN_LOWER
        tool = CONFIGURED if spec is not None else tool_of(table) if known else None
        if tool is None:
            continue
        name = qualified(schema, table)
        try:
            cursor.execute(
                f"{MARK} SELECT t.*, NOW(6) AS lockwatch_now FROM"
                f" {_quoted(schema)}.{_quoted(table)} AS t"
            )
            columns = [column[0] for column in cursor.description or ()]
            rows = [dict(zip(columns, values, strict=True)) for values in cursor.fetchall()]
        except (pymysql.err.OperationalError, pymysql.err.ProgrammingError) as exc:
            if exc.args and exc.args[0] in _SKIP:
                continue
            raise
        if spec is not None:
            spec = _spelled(spec, columns)
            if spec is None:
                continue  # a configured column is not in this table: not the one meant
        since = spec.since if spec is not None else _column(columns, "lockgranted")
        kept: list[Mapping[str, Any]] = []
        for position, row in enumerate(rows):
            now = row.pop("lockwatch_now", None)
            granted = next((v for k, v in row.items() if since and k == since), None)
            age = None
            if isinstance(now, datetime) and isinstance(granted, datetime):
                age = (now - granted).total_seconds()
            ages[(name, position)] = age
            kept.append(row)
        at_work = _evidence(schema, table, processes, tool)
        versions = [version] * len(kept)
        found.append(Found(tool, schema, table, kept, at_work, spec=spec, versions=versions))
    if not found:
        return []
    jvms = jvms_for(found)
    return to_locks(
        found,
        engine="mysql",
        source="mysql",
        server=server,
        database="",
        polled_at=polled_at,
        ages=ages,
        jvms=jvms,
        make_id=lambda tool, table, key: f"mysql:{server}:lock_table:0:held:{table}/{key}",
    )


def _version(update_time: object, now: object) -> str | None:
    """The version of a table's rows: its last change (UPDATE_TIME, or none since
    the server started), or None where a later change could not be told from it
    (a change within the second of the look: UPDATE_TIME has whole seconds)."""
    if update_time is None:
        return "update_time none"
    if not isinstance(update_time, datetime):
        return None
    if isinstance(now, datetime) and update_time >= now.replace(microsecond=0):
        return None
    return f"update_time {update_time.isoformat()}"


def _spec(
    specs: Sequence[TableSpec], schema: str, table: str, folds: bool = True
) -> TableSpec | None:
    """The config's entry for `schema.table`. Where the server compares table
    names without regard to case (`folds`: lower_case_table_names > 0), an entry
    matching only that way is still the table."""
    exact = spec_for(specs, schema, table)
    if exact is not None or not folds:
        return exact
    return spec_for(
        [replace(spec, table=spec.table.lower()) for spec in specs], schema.lower(), table.lower()
    )


def _spelled(spec: TableSpec, columns: Sequence[str]) -> TableSpec | None:
    """`spec` with its columns spelled as the table spells them (MySQL's column
    names are not case-sensitive); None when one of them is not there."""
    locked = _column(columns, spec.locked)
    named = {field: _column(columns, getattr(spec, field)) for field in ("holder", "since", "key")}
    if locked is None or any(
        getattr(spec, field) is not None and named[field] is None for field in named
    ):
        return None
    return replace(
        spec, locked=locked, holder=named["holder"], since=named["since"], key=named["key"]
    )


def _column(columns: Sequence[str], name: str | None) -> str | None:
    """`name` as the table spells it, or None."""
    wanted = None if name is None else name.lower()
    return next((column for column in columns if column.lower() == wanted), None)


def _evidence(
    schema: str, table: str, processes: Sequence[Sequence[Any]], tool: str
) -> tuple[str, ...]:
    """Threads running the tool's own work on its tables now (work.tool_statement:
    a reader's select, however long it runs, is none)."""
    configured = tool == CONFIGURED
    names = [table.lower()]
    # knex's and Liquibase's other table (the migrations they record) shows them at
    # work too; a configured table has no other that lockwatch knows.
    if not configured and table.lower().endswith("_lock"):
        names.append(table.lower()[: -len("_lock")])
    elif not configured and table.lower() == "databasechangeloglock":
        names.append("databasechangelog")
    lines: list[str] = []
    for row in processes:
        statement = str(row[7] or "")
        if not statement or MARK in statement:
            continue
        if (
            any(name in statement.lower() for name in names)
            and (row[3] == schema or schema.lower() in statement.lower())
            and tool_statement(statement, tool)
        ):
            lines.append(f"thread {row[0]} ({row[4]}) runs a statement on {table}")
    return tuple(lines)


def unlock_row(endpoint: Any, facts: TableLock) -> int:
    """Its tool's unlock where the row is still every value the operator saw: the
    rows changed (0: it changed since they looked)."""
    import pymysql

    schema, table = facts.names
    sets = ", ".join(f"{_quoted(column)} = {_literal(value)}" for column, value in facts.unlock)
    seen = facts.seen
    where = " AND ".join(f"{_quoted(column)} <=> %s" for column in seen)
    statement = f"UPDATE {_quoted(schema)}.{_quoted(table)} SET {sets} WHERE {where}"
    try:
        conn = pymysql.connect(**endpoint.connect_args(5.0))
    except pymysql.Error as exc:
        raise ActionFailed("connect_failed", f"cannot connect: {_first(exc)}") from exc
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_S}")
            values = [_value(v) for v in seen.values()]
            # The row locked first: from then on no run can take it again unseen,
            # and the table's last change says whether one did since the look.
            if not cursor.execute(
                f"SELECT 1 FROM {_quoted(schema)}.{_quoted(table)} WHERE {where} FOR UPDATE", values
            ):
                return 0
            cursor.execute(_UPDATE_TIME, (schema, table))
            now = cursor.fetchone()
            if now is None or _version(now[0], None) != facts.version:
                return 0
            changed = int(cursor.execute(statement, values))
        conn.commit()
    except pymysql.err.OperationalError as exc:
        if exc.args and exc.args[0] == 1205:
            raise ActionRefused(
                "in_use",
                f"{facts.table}'s row is held by an open transaction (a run at work): nothing done",
            ) from exc
        raise ActionFailed("server_error", _first(exc)) from exc
    except pymysql.Error as exc:
        raise ActionFailed("server_error", _first(exc)) from exc
    finally:
        conn.close()
    return changed


def _value(value: object) -> object:
    # The row's times were read as datetimes and kept as ISO text: the server's form.
    if isinstance(value, str) and len(value) >= 19 and value[10:11] == "T":
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return value
    return value


def _literal(value: str) -> str:
    # The unlocks are lockwatch's own constants (facts.UNLOCKS, config's checked
    # values), never a row's text.
    if value not in ("0", "1", "true", "false", "null"):
        raise ValueError(f"not an unlock value: {value!r}")
    return value.upper()


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
