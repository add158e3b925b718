"""A lock table whose schema (database) name holds a dot, beside a lookalike: the
real `"a.b".knex_migrations_lock` and `a."b.knex_migrations_lock"`, both locked,
on a real PostgreSQL and a real MariaDB. Its id names the schema and the table
unambiguously, and a break unlocks it and never the lookalike (issue 47, item 4).

The tables are knex's lock table as knex creates it, made by SQL: knex cannot
be told a schema whose name holds a dot as its own (the real knex CLI is
tests/postgres/test_locktables_knex.py's and tests/mysql/'s).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from psycopg import conninfo, sql

from tests.conftest import run_cli
from tests.mysql.conftest import (  # noqa: F401 - my_dsn: a fixture, used by name
    GROUP,
    connect,
    endpoint_of,
    my_dsn,
    past_last_change,
)
from tests.postgres.conftest import connect as pg_connect
from tests.postgres.conftest import pg_dsn  # noqa: F401 - a fixture, used by name

KNEX_TABLE = '("index" serial PRIMARY KEY, is_locked integer)'
PG_ENV = {name: None for name in ("LOCKWATCH_PG", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE")}
MY_ENV = {"MYSQL_PWD": "", "LOCKWATCH_READONLY": "", "LOCKWATCH_MYSQL": None}


def lock_tables(*args: str, env: dict[str, Any]) -> list[dict[str, Any]]:
    code, out, err = run_cli("ls", "--json", *args, env=cast(dict[str, str], env))
    assert code in (0, 3), err
    return [lock for lock in json.loads(out)["locks"] if lock["format"] == "lock-table"]


def broken(log: Path) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return [r for r in records if r["event"] == "lock_broken"]


# ------------------------------------------------------------------ PostgreSQL


@pytest.fixture
def pg_scratch(pg_dsn: str) -> Iterator[str]:  # noqa: F811 - the fixture imported above
    """A database of this test's own, holding both tables, both locked."""
    name = f"lw_dots_{uuid.uuid4().hex[:10]}"
    with pg_connect(pg_dsn, "lw-test-setup") as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = conninfo.make_conninfo(pg_dsn, dbname=name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema, table in (("a.b", "knex_migrations_lock"), ("a", "b.knex_migrations_lock")):
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
            named = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(table))
            conn.execute(sql.SQL("CREATE TABLE {} " + KNEX_TABLE).format(named))
            conn.execute(sql.SQL("INSERT INTO {} (is_locked) VALUES (1)").format(named))
    try:
        yield dsn
    finally:
        with pg_connect(pg_dsn, "lw-test-setup") as admin:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            admin.execute(drop.format(sql.Identifier(name)))


def pg_locked(dsn: str, qualified: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(f"SELECT is_locked FROM {qualified}").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.postgres
def test_postgres_a_dotted_schema_names_its_own_table_and_its_break_unlocks_only_it(
    pg_scratch: str, tmp_path: Path
) -> None:
    (lock,) = lock_tables("--pg", pg_scratch, env=PG_ENV)
    assert lock["lock_table"]["table"] == '"a.b".knex_migrations_lock'
    assert ':knex:"a.b".knex_migrations_lock/1:row:held' in lock["id"]
    log = tmp_path / "audit.jsonl"
    base = ("--yes", "--force", "--audit-log", str(log), "--reason", "dots", "--pg", pg_scratch)
    # The id as it read before: ambiguous, it names neither table now.
    old = lock["id"].replace('"a.b".knex', "a.b.knex")
    code, _, err = run_cli("break", old, *base, env=cast(dict[str, str], PG_ENV))
    assert code != 0, err
    assert pg_locked(pg_scratch, '"a.b".knex_migrations_lock') == 1
    assert pg_locked(pg_scratch, 'a."b.knex_migrations_lock"') == 1

    code, out, err = run_cli("break", lock["id"], *base, env=cast(dict[str, str], PG_ENV))
    assert code == 0, err
    assert '"a.b".knex_migrations_lock' in out
    assert pg_locked(pg_scratch, '"a.b".knex_migrations_lock') == 0
    assert pg_locked(pg_scratch, 'a."b.knex_migrations_lock"') == 1  # the lookalike untouched
    (record,) = broken(log)
    assert record["target"]["table"] == '"a.b".knex_migrations_lock'


# ------------------------------------------------------------------- MariaDB


@pytest.fixture
def my_scratch(my_dsn: str) -> Iterator[tuple[str, str]]:  # noqa: F811 - imported fixture
    """Databases `<x>.y` (knex's table) and `<x>` (the lookalike `y.knex_migrations_lock`),
    both locked; the server's DSN, and `<x>`."""
    x = f"lw_dots_{uuid.uuid4().hex[:10]}"
    endpoint = endpoint_of(my_dsn)
    made = ((f"{x}.y", "knex_migrations_lock"), (x, "y.knex_migrations_lock"))
    with connect(endpoint) as conn, conn.cursor() as cursor:
        for database, table in made:
            cursor.execute(f"CREATE DATABASE `{database}`")
            cursor.execute(
                f"CREATE TABLE `{database}`.`{table}` (`index` int unsigned AUTO_INCREMENT"
                " PRIMARY KEY, is_locked int)"
            )
            cursor.execute(f"INSERT INTO `{database}`.`{table}` (is_locked) VALUES (1)")
        conn.commit()
    try:
        past_last_change(endpoint, f"{x}.y", "knex_migrations_lock")
        yield my_dsn, x
    finally:
        with connect(endpoint) as conn, conn.cursor() as cursor:
            for database, _ in made:
                cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")


def my_locked(dsn: str, qualified: str) -> int:
    with connect(endpoint_of(dsn)) as conn, conn.cursor() as cursor:
        cursor.execute(f"SELECT is_locked FROM {qualified}")
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.mysql
@GROUP
def test_mariadb_a_dotted_database_names_its_own_table_and_its_break_unlocks_only_it(
    my_scratch: tuple[str, str], tmp_path: Path
) -> None:
    dsn, x = my_scratch
    real, lookalike = f"`{x}.y`.knex_migrations_lock", f"`{x}`.`y.knex_migrations_lock`"
    (lock,) = [
        one
        for one in lock_tables("--mysql", dsn, env=MY_ENV)
        if one["lock_table"]["table"].startswith(f'"{x}')
    ]
    assert lock["lock_table"]["table"] == f'"{x}.y".knex_migrations_lock'
    log = tmp_path / "audit.jsonl"
    base = ("--yes", "--force", "--audit-log", str(log), "--reason", "dots", "--mysql", dsn)
    old = lock["id"].replace(f'"{x}.y".', f"{x}.y.")
    code, _, err = run_cli("break", old, *base, env=cast(dict[str, str], MY_ENV))
    assert code != 0, err
    assert my_locked(dsn, real) == 1 and my_locked(dsn, lookalike) == 1

    code, _, err = run_cli("break", lock["id"], *base, env=cast(dict[str, str], MY_ENV))
    assert code == 0, err
    assert my_locked(dsn, real) == 0
    assert my_locked(dsn, lookalike) == 1  # the lookalike untouched
    (record,) = broken(log)
    assert record["target"]["table"] == f'"{x}.y".knex_migrations_lock'
