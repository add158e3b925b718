"""A PostgreSQL history of schema version 1 (version 1's own DDL, with the rows
version 1's code wrote into tests/history/data/history-v1.sqlite3 copied in) is
migrated when a recorder opens it, and reads as version 1 read it, on the local
server (a private database, dropped at the end)."""

from __future__ import annotations

import json
import sqlite3

import psycopg
import pytest
from psycopg import conninfo

from lockwatch.history.api import SCHEMA_VERSION, open_history
from tests.conftest import LOCAL_HOST
from tests.history.schema_v1 import FILE, READINGS, V1_TABLES, normal, readings
from tests.postgres.test_history_pgstore import _url

pytestmark = pytest.mark.postgres

COPIED = ("meta", "sessions", "lockrefs", "spans", "waits", "actions", "outages")


def _write_v1(dsn: str) -> None:
    with psycopg.connect(dsn) as db, sqlite3.connect(FILE) as old:
        for statement in V1_TABLES:
            db.execute(
                statement.format(
                    serial="BIGSERIAL PRIMARY KEY", blob="BYTEA", view="OR REPLACE VIEW"
                )
            )
        for table in COPIED:
            cursor = old.execute(f"SELECT * FROM {table}")
            names = [column[0] for column in cursor.description]
            marks = ", ".join(["%s"] * len(names))
            for row in cursor:
                db.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", row)
            if "id" in names:
                db.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                    f" (SELECT max(id) FROM {table}))"
                )


def test_a_version_1_database_is_migrated_and_reads_the_same(pg_db: str) -> None:
    with psycopg.connect(pg_db, autocommit=True) as admin:
        admin.execute("CREATE SCHEMA history_v1")
    target = _url(pg_db) + "?options=-csearch_path%3Dhistory_v1"
    try:
        _write_v1(conninfo.make_conninfo(pg_db, options="-csearch_path=history_v1"))
        expected = json.loads(READINGS.read_text())
        store = open_history(target)
        assert store.version == 1  # type: ignore[attr-defined]
        assert normal(readings(store)) == normal(expected)
        store.close()
        open_history(target, host=LOCAL_HOST, write=True).close()
        store = open_history(target)
        assert store.version == SCHEMA_VERSION  # type: ignore[attr-defined]
        assert normal(readings(store)) == normal(expected)
        store.close()
    finally:
        with psycopg.connect(pg_db, autocommit=True) as admin:
            admin.execute("DROP SCHEMA history_v1 CASCADE")
