"""Liquibase's DATABASECHANGELOGLOCK on a real PostgreSQL.

Liquibase needs a JVM, which this test run does not have: the table is IMITATED
from Liquibase's documented layout (ID, LOCKED, LOCKGRANTED, LOCKEDBY as
`<host> (<ip>)`, created unquoted, so lower case on PostgreSQL), the lock taken
with the UPDATE its LockService runs, and a running Liquibase by a process whose
command line is `java … liquibase …` (what lockwatch looks for). The break is
checked against what `liquibase releaseLocks` leaves: LOCKED = FALSE,
LOCKGRANTED = NULL, LOCKEDBY = NULL.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from psycopg import conninfo, sql

from tests.conftest import run_cli
from tests.postgres.conftest import WAIT_S, connect, write_and_leave

pytestmark = pytest.mark.postgres

# Liquibase's own DDL for PostgreSQL (LockServiceImpl / CreateDatabaseChangeLogLockTable).
DDL = """
CREATE TABLE public.databasechangeloglock (
    ID INTEGER NOT NULL, LOCKED BOOLEAN NOT NULL, LOCKGRANTED TIMESTAMP WITHOUT TIME ZONE,
    LOCKEDBY VARCHAR(255), CONSTRAINT databasechangeloglock_pkey PRIMARY KEY (ID));
INSERT INTO public.databasechangeloglock (ID, LOCKED) VALUES (1, FALSE);
"""
# Its acquireLock: LOCKED = TRUE where it was FALSE, stamped with the JVM's local time.
ACQUIRE = (
    "UPDATE public.databasechangeloglock SET LOCKED = TRUE, LOCKEDBY = %s,"
    " LOCKGRANTED = LOCALTIMESTAMP - make_interval(secs => %s) WHERE ID = 1 AND LOCKED = FALSE"
)
CLEAN_ENV = {
    name: None for name in ("LOCKWATCH_PG", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGSERVICE")
}


@pytest.fixture
def scratch(pg_dsn: str) -> Iterator[str]:
    name = f"lw_lqb_{uuid.uuid4().hex[:10]}"
    with connect(pg_dsn, "lw-test-setup") as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = conninfo.make_conninfo(pg_dsn, dbname=name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(DDL)
    try:
        yield dsn
    finally:
        with connect(pg_dsn, "lw-test-setup") as admin:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            admin.execute(drop.format(sql.Identifier(name)))


def acquire(dsn: str, lockedby: str, ago: float) -> None:
    assert write_and_leave(dsn, ACQUIRE, (lockedby, ago)) == 1


def row(dsn: str) -> tuple[Any, ...]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT locked, lockgranted, lockedby FROM databasechangeloglock WHERE id = 1"
        ).fetchone()
    assert found is not None
    return tuple(found)


def _lw(*args: str, dsn: str) -> tuple[int, str, str]:
    # CliRunner unsets a variable given as None.
    return run_cli(*args, "--pg", dsn, env=cast(dict[str, str], dict(CLEAN_ENV)))


def table_locks(dsn: str) -> list[dict[str, Any]]:
    code, out, err = _lw("ls", "--json", dsn=dsn)
    assert code in (0, 3), err
    return [lock for lock in json.loads(out)["locks"] if lock["format"] == "lock-table"]


def here() -> str:
    return f"{socket.gethostname()} (127.0.1.1)"


def test_an_unlocked_table_lists_nothing(scratch: str) -> None:
    assert table_locks(scratch) == []


def test_a_holder_on_this_host_with_no_liquibase_jvm_is_stale_and_a_break_releases_it(
    scratch: str, tmp_path: Path
) -> None:
    acquire(scratch, here(), 300)
    (lock,) = table_locks(scratch)
    assert lock["state"] == "stale", lock
    assert [reason["code"] for reason in lock["reasons"]] == ["holder_jvm_gone"]
    assert "liquibase releaseLocks" in lock["reasons"][0]["message"]
    table = lock["lock_table"]
    assert table["tool"] == "liquibase" and table["table"] == "public.databasechangeloglock"
    assert table["holder_host"] == socket.gethostname() and table["holder_ip"] == "127.0.1.1"
    assert lock["holder"]["actor"] == here()
    assert 295 <= lock["age_seconds"] <= 300 + WAIT_S * 3, lock

    log = tmp_path / "audit.jsonl"
    code, _, err = _lw(
        "break", lock["id"], "--yes", "--audit-log", str(log), "--reason", "dead JVM",
        dsn=scratch,
    )  # fmt: skip
    assert code == 0, err
    # What `liquibase releaseLocks` leaves.
    assert row(scratch) == (False, None, None)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["event"] for r in records][-1] == "lock_broken"
    assert table_locks(scratch) == []


def test_a_holder_on_this_host_with_a_liquibase_jvm_running_is_active(scratch: str) -> None:
    # An imitation of a running Liquibase: a process whose command line is java's.
    jvm = subprocess.Popen(
        ["bash", "-c", f'exec -a java {sys.executable} -c "import time; time.sleep(600)" '
         "liquibase.integration.commandline.LiquibaseCommandLine update"],
    )  # fmt: skip
    try:
        acquire(scratch, here(), 5)
        deadline_polls = int(WAIT_S / 0.5)
        for _ in range(deadline_polls):  # bounded: bash has exec'd by then
            (lock,) = table_locks(scratch)
            if lock["state"] == "active":
                break
        assert lock["state"] == "active", lock
        assert [reason["code"] for reason in lock["reasons"]] == ["holder_jvm_running"]
        assert str(jvm.pid) in lock["reasons"][0]["message"]
    finally:
        jvm.kill()
        jvm.wait(WAIT_S)


def test_a_holder_on_another_host_is_unknown_with_its_age(scratch: str, tmp_path: Path) -> None:
    acquire(scratch, "build-agent-7.example.com (10.1.2.3)", 7200)
    (lock,) = table_locks(scratch)
    assert lock["state"] == "unknown", lock
    assert [reason["code"] for reason in lock["reasons"]] == ["other_host"]
    assert "build-agent-7.example.com (10.1.2.3)" in lock["reasons"][0]["message"]
    assert "since 720" in lock["reasons"][0]["message"]  # 7200 s and the test's own seconds
    assert lock["lock_table"]["holder_ip"] == "10.1.2.3"
    # Not stale: breaking it needs the operator to mean it.
    log = tmp_path / "audit.jsonl"
    code, _, err = _lw(
        "break", lock["id"], "--yes", "--audit-log", str(log), "--reason", "x", dsn=scratch
    )
    assert code != 0 and "--force" in err
    assert row(scratch)[0] is True
