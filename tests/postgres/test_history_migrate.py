"""A PostgreSQL history of schema version 1 (version 1's own DDL, with the rows
version 1's code wrote into tests/history/data/history-v1.sqlite3 copied in) is
migrated when a recorder opens it, and reads as version 1 read it, on the local
server (a private database, dropped at the end); versions 2 and 3 the same way."""

from __future__ import annotations

import json
import sqlite3

import psycopg
import pytest
from psycopg import conninfo

from lockwatch.history.api import SCHEMA_VERSION, open_history
from tests.conftest import LOCAL_HOST
from tests.history.schema_v1 import (
    FILE,
    FILE_V2,
    FILE_V3,
    READINGS,
    READINGS_V2,
    READINGS_V3,
    V1_TABLES,
    V2_TABLES,
    V3_TABLES,
    normal,
    readings,
)
from tests.postgres.test_history_pgstore import _url

pytestmark = pytest.mark.postgres

COPIED = ("meta", "sessions", "lockrefs", "spans", "waits", "actions", "outages")
# Each older version: its file, what its readers read, its DDL, its tables.
OLDER = {
    1: (FILE, READINGS, V1_TABLES, COPIED),
    2: (FILE_V2, READINGS_V2, V2_TABLES, (*COPIED, "kinds", "open_spans")),
    3: (FILE_V3, READINGS_V3, V3_TABLES, (*COPIED, "kinds", "open_spans")),
}


def _write_old(dsn: str, version: int) -> None:
    file, _, tables, copied = OLDER[version]
    # Read-only and immutable: the checked-in file is never opened for writing
    # (a WAL file's reader would make and remove -wal and -shm files beside it).
    uri = f"file:{file}?mode=ro&immutable=1"
    with psycopg.connect(dsn) as db, sqlite3.connect(uri, uri=True) as old:
        for statement in tables:
            db.execute(
                statement.format(
                    serial="BIGSERIAL PRIMARY KEY",
                    blob="BYTEA",
                    view="OR REPLACE VIEW",
                    clustered="",
                )
            )
        for table in copied:
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


@pytest.mark.parametrize("version", [1, 2, 3])
def test_an_older_database_is_migrated_and_reads_the_same(pg_db: str, version: int) -> None:
    schema = f"history_v{version}"
    with psycopg.connect(pg_db, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    target = _url(pg_db) + f"?options=-csearch_path%3D{schema}"
    try:
        _write_old(conninfo.make_conninfo(pg_db, options=f"-csearch_path={schema}"), version)
        expected = json.loads(OLDER[version][1].read_text())
        store = open_history(target)
        assert store.version == version  # type: ignore[attr-defined]
        assert normal(readings(store)) == normal(expected)
        store.close()
        open_history(target, host=LOCAL_HOST, write=True).close()
        store = open_history(target)
        assert store.version == SCHEMA_VERSION  # type: ignore[attr-defined]
        assert normal(readings(store)) == normal(expected)
        store.close()
    finally:
        with psycopg.connect(pg_db, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
