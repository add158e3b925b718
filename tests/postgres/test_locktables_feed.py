"""The dashboard's PostgreSQL feed shows lock rows: one appears, stays quiet while
unchanged, and goes when its row is unlocked.

The row is knex's table as knex creates it, written here by SQL (an imitation:
the real knex CLI is tests/postgres/test_locktables_knex.py's).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import conninfo, sql

from lockwatch.model.verdict import State
from lockwatch.sources.locktables.facts import TableLock
from lockwatch.sources.postgres.feed import PgFeed
from lockwatch.sources.postgres.source import PgSource
from tests.postgres.conftest import connect, write_and_leave
from tests.postgres.test_pg_feed import HOST, INTERVAL, running, until

pytestmark = pytest.mark.postgres


@pytest.fixture
def scratch(pg_dsn: str) -> Iterator[str]:
    name = f"lw_feed_{uuid.uuid4().hex[:10]}"
    with connect(pg_dsn, "lw-test-setup") as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = conninfo.make_conninfo(pg_dsn, dbname=name)
    write_and_leave(
        dsn,
        'CREATE TABLE knex_migrations_lock ("index" serial PRIMARY KEY, is_locked integer);'
        " INSERT INTO knex_migrations_lock (is_locked) VALUES (1)",
    )
    try:
        yield dsn
    finally:
        with connect(pg_dsn, "lw-test-setup") as admin:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            admin.execute(drop.format(sql.Identifier(name)))


async def test_a_lock_row_appears_stays_quiet_and_goes(scratch: str) -> None:
    feed = PgFeed(PgSource(scratch), host=HOST, interval=INTERVAL)
    async with running(feed) as (seen, _):

        def rows() -> list[str]:
            return [i for i, e in seen.current.items() if isinstance(e.lock.facts, TableLock)]

        await until(rows, "the knex lock row")
        (row_id,) = rows()
        assert seen.current[row_id].verdict.state is State.UNKNOWN
        mark = seen.polls()
        await until(lambda: seen.polls() >= mark + 5, "five more polls")
        again = [e for c in seen.changes[mark:] for e in c.upserts if e.lock.id == row_id]
        assert again == []  # the same row, seen again, is the same lock
        with psycopg.connect(scratch, autocommit=True) as conn:
            conn.execute("UPDATE knex_migrations_lock SET is_locked = 0")
        await until(lambda: not rows(), "the unlocked row to go")
