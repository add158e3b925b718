"""Liquibase's DATABASECHANGELOGLOCK on a real MySQL/MariaDB.

Liquibase needs a JVM, which this test run does not have: the table is IMITATED
from Liquibase's documented layout for MySQL (ID, LOCKED as BIT(1), LOCKGRANTED,
LOCKEDBY as `<host> (<ip>)`) and the lock taken as its LockService's UPDATE does.
The break is checked against what `liquibase releaseLocks` leaves: LOCKED = 0,
LOCKGRANTED = NULL, LOCKEDBY = NULL.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.conftest import run_cli
from tests.mysql.conftest import GROUP, connect, endpoint_of, past_last_change

pytestmark = [pytest.mark.mysql, GROUP]

DDL = (
    "CREATE TABLE {db}.DATABASECHANGELOGLOCK (ID INT NOT NULL, `LOCKED` BIT(1) NOT NULL,"
    " LOCKGRANTED datetime NULL, LOCKEDBY VARCHAR(255) NULL,"
    " CONSTRAINT PK_DATABASECHANGELOGLOCK PRIMARY KEY (ID))"
)


@pytest.fixture
def scratch(my_dsn: str) -> Iterator[str]:
    name = f"lw_lqb_{uuid.uuid4().hex[:10]}"
    endpoint = endpoint_of(my_dsn)
    with connect(endpoint) as conn, conn.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{name}`")
        cursor.execute(DDL.format(db=f"`{name}`"))
        cursor.execute(
            f"INSERT INTO `{name}`.DATABASECHANGELOGLOCK VALUES"
            " (1, 1, NOW() - INTERVAL 300 SECOND, %s)",
            (f"{socket.gethostname()} (127.0.1.1)",),
        )
        conn.commit()
    try:
        yield urlunsplit(urlsplit(my_dsn)._replace(path=f"/{name}"))
    finally:
        with connect(endpoint) as conn, conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")


def _lw(*args: str, dsn: str) -> tuple[int, str, str]:
    env = cast(dict[str, str], {"MYSQL_PWD": "", "LOCKWATCH_READONLY": "", "LOCKWATCH_MYSQL": None})
    return run_cli(*args, "--mysql", dsn, env=env)


def lock_rows(dsn: str) -> list[dict[str, Any]]:
    code, out, err = _lw("ls", "--json", dsn=dsn)
    assert code in (0, 3), err
    database = urlsplit(dsn).path[1:]
    return [
        lock
        for lock in json.loads(out)["locks"]
        if lock["format"] == "lock-table" and lock["lock_table"]["table"].startswith(database)
    ]


def test_a_holder_on_this_host_with_no_jvm_is_stale_and_a_break_releases_it(
    scratch: str, tmp_path: Path
) -> None:
    # A look within the second of the row's writing keeps no row version (MySQL's is
    # the table's UPDATE_TIME, whole seconds), and its break is rightly refused.
    past_last_change(endpoint_of(scratch), urlsplit(scratch).path[1:], "DATABASECHANGELOGLOCK")
    (lock,) = lock_rows(scratch)
    assert lock["state"] == "stale" and lock["reasons"][0]["code"] == "holder_jvm_gone", lock
    assert lock["lock_table"]["holder_host"] == socket.gethostname()
    assert 295 <= lock["age_seconds"] < 400, lock
    code, _, err = _lw(
        "break", lock["id"], "--yes", "--audit-log", str(tmp_path / "audit.jsonl"),
        "--reason", "dead JVM", dsn=scratch,
    )  # fmt: skip
    assert code == 0, err
    database = urlsplit(scratch).path[1:]
    with connect(endpoint_of(scratch)) as conn, conn.cursor() as cursor:
        cursor.execute(
            f"SELECT LOCKED + 0, LOCKGRANTED, LOCKEDBY FROM `{database}`.DATABASECHANGELOGLOCK"
        )
        assert cursor.fetchall() == ((0, None, None),)  # what `liquibase releaseLocks` leaves
    assert lock_rows(scratch) == []
