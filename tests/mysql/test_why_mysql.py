"""`lockwatch why --mysql` on MariaDB's own errors (1205, 1213) and a GET_LOCK
name, made on a real server while the contention is still there."""

from __future__ import annotations

import json

import pymysql
import pytest

from tests.conftest import run_cli
from tests.mysql.conftest import GROUP, MyHarness, tid

pytestmark = [pytest.mark.mysql, GROUP]


def test_lock_wait_timeout_names_the_likely_blocker(my: MyHarness) -> None:
    table = my.table("why")
    my.admin_rows(f"INSERT INTO {table} VALUES (1, 0), (2, 0)")
    holder, victim, waiter = my.session(), my.session(), my.session()
    my.run(holder, "BEGIN")
    my.run(holder, f"UPDATE {table} SET v = 1 WHERE id = 1")
    my.run(victim, "SET SESSION innodb_lock_wait_timeout = 1")
    with pytest.raises(pymysql.err.OperationalError) as caught:
        my.run(victim, f"UPDATE {table} SET v = 2 WHERE id = 1")
    said = str(caught.value)
    assert said.startswith("(1205, 'Lock wait timeout exceeded")
    my.background(waiter, f"UPDATE {table} SET v = 3 WHERE id = 1")
    my.waiting(waiter)
    code, out, err = run_cli("why", "--mysql", my.dsn, said)
    assert code == 0, err
    assert out.startswith("likely: mysql:") and f":innodb_row:{tid(holder)}:held:" in out
    assert f"thread {tid(waiter)}" in out
    code, out, _ = run_cli("why", "--json", "--mysql", my.dsn, said)
    doc = json.loads(out)
    assert doc["locks"][0]["likely"] is True
    assert doc["locks"][0]["next_step"]["action"] == "wait"


def test_deadlock_names_the_survivor_that_now_blocks(my: MyHarness) -> None:
    table = my.table("whydl")
    my.admin_rows(f"INSERT INTO {table} VALUES (1, 0), (2, 0)")
    first, second, waiter = my.session(), my.session(), my.session()
    for conn, row in ((first, 1), (second, 2)):
        my.run(conn, "BEGIN")
        my.run(conn, f"UPDATE {table} SET v = 1 WHERE id = {row}")
    behind = my.background(first, f"UPDATE {table} SET v = 2 WHERE id = 2")
    my.waiting(first)
    try:
        my.run(second, f"UPDATE {table} SET v = 2 WHERE id = 1")
        errors: list[BaseException] = []
    except pymysql.err.OperationalError as exc:
        errors = [exc]
    behind.thread.join(10)
    errors += behind.error
    (error,) = errors
    assert isinstance(error, pymysql.err.OperationalError)
    said = f"ERROR 1213 (40001): {error.args[1]}"
    assert "Deadlock found when trying to get lock" in said
    # InnoDB rolls back one of the two: the other holds both rows now.
    survivor = second if behind.error else first
    my.background(waiter, f"UPDATE {table} SET v = 3 WHERE id = 1")
    my.waiting(waiter)
    code, out, err = run_cli("why", "--mysql", my.dsn, said)
    assert code == 0, err
    assert f":innodb_row:{tid(survivor)}:held:" in out
    assert "already broke the deadlock" in out


def test_get_lock_name(my: MyHarness) -> None:
    holder = my.session()
    name = f"{my.prefix}-sync"
    my.run(holder, f"SELECT GET_LOCK('{name}', 0)")
    code, out, err = run_cli("why", "--mysql", my.dsn, f"SELECT GET_LOCK('{name}', 5)")
    assert code == 0, err
    assert out.startswith("mysql:") and f":get_lock:{tid(holder)}:held:{name}" in out
    assert "RELEASE_LOCK" in out
