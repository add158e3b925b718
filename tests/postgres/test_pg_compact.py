"""A poll's rows are made a column at a time (`compact`) from psycopg's tuples: they
must be the rows the row-at-a-time factory (`compact_rows`) makes, on a real
server's answer, with repeating values shared the same way."""

from __future__ import annotations

import psycopg
from psycopg.rows import tuple_row

from lockwatch.sources.postgres.query import lock_query
from lockwatch.sources.postgres.source import compact, compact_rows
from tests.postgres.conftest import connect


def test_rows_made_a_column_at_a_time_are_the_factorys(pg_dsn: str) -> None:
    holder = connect(pg_dsn, "lockwatch-test-compact")
    try:
        holder.execute("BEGIN")
        holder.execute("CREATE TEMP TABLE t (a int)")
        holder.execute("LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
        # Keys no other test (or bench_postgres's load) takes: an xact lock waits.
        for key in range(5):
            holder.execute("SELECT pg_advisory_xact_lock(%s::int8)", (-734_118_000 - key,))
        holder.execute("SELECT pg_advisory_xact_lock(-7341, 7341)")
        holder.execute("SELECT txid_current()")  # a transactionid lock
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            cursor = conn.cursor(row_factory=tuple_row)
            cursor.execute(lock_query(conn.info.server_version, all_rows=True))
            # The locks, then (past pg_stat_clear_snapshot()'s row) the sessions.
            results = [(cursor.description, cursor.fetchall(), compact_rows(cursor))]
            assert cursor.nextset() and cursor.nextset()
            results.append((cursor.description, cursor.fetchall(), compact_rows(cursor)))
    finally:
        holder.close()
    for description, tuples, factory in results:
        rows = compact(description, tuples)
        made = [factory(values) for values in tuples]
        assert [row.as_dict() for row in rows] == [row.as_dict() for row in made]
        if "locktype" in rows[0]:  # every kind of target, as target_of writes it
            kinds = {row["locktype"] for row in rows}
            assert {"relation", "object", "advisory", "transactionid", "virtualxid"} <= kinds
        assert rows
        # A repeating column's equal values are one object (the holder's pid,
        # lock types, modes); a result's rows share their columns.
        for name in ("pid", "locktype", "mode", "datname"):
            if name in rows[0]:
                by_value: dict[object, int] = {}
                for row in rows:
                    value = row[name]
                    if value is not None:
                        assert by_value.setdefault(value, id(value)) == id(value), name
        assert len({id(row._columns) for row in rows}) == 1
    assert compact(None, []) == []
