"""A lock's target (what its id names, and what actions re-check a holder with) is
put together by the poll from pg_locks' columns, not by the server: it must be
exactly what the server's own `format()` (query.TARGET) writes, for every kind
of row the real server has."""

from __future__ import annotations

import asyncio

import psycopg

from lockwatch.sources.postgres.query import TARGET, lock_query
from lockwatch.sources.postgres.source import PgSource, compact_rows
from tests.postgres.conftest import connect, poll_ok


def test_targets_put_together_here_are_the_servers(pg_dsn: str) -> None:
    holder = connect(pg_dsn, "lockwatch-test-target")
    pid = holder.info.backend_pid
    try:
        # The kinds of row a session shows: its vxid, an xid, relations, an
        # object's lock (its temp schema), and advisory keys of both forms,
        # negative halves and the extremes of the bigint form.
        # Fixed advisory keys (the extremes) may be held by another run on a shared
        # server: fail in a minute, saying so, rather than hang the suite.
        holder.execute("SET lock_timeout = '60s'")
        holder.execute("BEGIN")
        holder.execute("CREATE TEMP TABLE t (a int)")
        holder.execute("INSERT INTO t VALUES (1)")
        holder.execute("SELECT * FROM t FOR UPDATE")
        holder.execute("LOCK TABLE pg_catalog.pg_class IN ACCESS SHARE MODE")
        for key in (0, 1, -1, 2**63 - 1, -(2**63), 7_000_000_000_123):
            holder.execute("SELECT pg_advisory_xact_lock(%s::int8)", (key,))
        for key1, key2 in ((1, 2), (-1, -2), (2**31 - 1, -(2**31))):
            holder.execute("SELECT pg_advisory_xact_lock(%s::int4, %s::int4)", (key1, key2))
        holder.execute("SELECT txid_current()")

        async def poll() -> list[dict[str, object]]:
            # The poll itself, with the server's own target beside the one put together.
            version = holder.info.server_version
            query = lock_query(version, all_rows=True).replace(
                "SELECT l.locktype,", f"SELECT {TARGET} AS server_target, l.locktype,"
            )
            source = PgSource(pg_dsn, all_rows=True, client_finder=None)
            conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
            try:
                cursor = conn.cursor(row_factory=compact_rows)
                await cursor.execute(query)
                rows = await cursor.fetchall()  # the locks: the first result
            finally:
                await conn.close()
            # And through the source, as a poll has them.
            snapshot = await poll_ok(source)
            await source.close()
            assert all(isinstance(row["target"], str) for row in snapshot.rows)
            return [dict(row) for row in rows]

        rows = asyncio.run(poll())
    finally:
        holder.close()
    mine = [row for row in rows if row["pid"] == pid]
    kinds = {row["locktype"] for row in mine}
    assert {"virtualxid", "transactionid", "relation", "object", "advisory"} <= kinds, kinds
    assert len([row for row in mine if row["locktype"] == "advisory"]) == 9
    for row in rows:
        assert row["target"] == row["server_target"], row
