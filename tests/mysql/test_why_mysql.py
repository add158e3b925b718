"""`lockwatch why --mysql` on MariaDB's own errors (1205, 1213) and a GET_LOCK
name, made on a real server while the contention is still there; and on the
mariadb client's own output for a statement that timed out (its box of dashes)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any, TypeAlias

import pymysql
import pytest

from lockwatch.sources.mysql.queries import USER_LOCK_STATE
from tests.conftest import run_cli
from tests.formats.common import need_tools
from tests.mysql.conftest import GROUP, WAIT_S, MyHarness, tid

Session: TypeAlias = "pymysql.connections.Connection[Any]"

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
    # PyMySQL's message names no statement: the root blocker now is only possible.
    assert out.startswith("possible: mysql:") and f":innodb_row:{tid(holder)}:held:" in out
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
    assert out.startswith("certain: mysql:") and f":get_lock:{tid(holder)}:held:{name}" in out
    assert f"match:  named lock {name}, which the text names" in out
    assert "RELEASE_LOCK" in out


def test_get_lock_decoys_in_the_text_name_no_lock(my: MyHarness) -> None:
    """Issue 47 item 2 on why's path: a GET_LOCK in a comment or a string of the
    text is no call (it named the innocent holder `certain`), and a name's `\\n`
    is a newline, whose holder is found."""
    victim, real, newline = my.session(), my.session(), my.session()
    decoy, name, nl = (f"{my.prefix}-{n}" for n in ("victim", "real", "nl"))
    my.run(victim, f"SELECT GET_LOCK('{decoy}', 0)")
    my.run(real, f"SELECT GET_LOCK('{name}', 0)")
    my.run(newline, f"SELECT GET_LOCK('{nl}\\nx', 0)")
    for said in (
        f"SELECT /* GET_LOCK('{decoy}', 1) */ GET_LOCK('{name}', 5)",
        f"SELECT 'GET_LOCK(\"{decoy}\", 1)', GET_LOCK('{name}', 5)",
        f"SELECT -- GET_LOCK('{decoy}', 1)\n  GET_LOCK('{name}', 5)",
    ):
        code, out, err = run_cli("why", "--mysql", my.dsn, said)
        assert code == 0, err
        assert f":get_lock:{tid(real)}:held:{name}" in out, said
        assert f":get_lock:{tid(victim)}:" not in out, said
    code, out, err = run_cli("why", "--json", "--mysql", my.dsn, f"SELECT GET_LOCK('{nl}\\nx', 5)")
    assert code == 0, err
    (first, *_) = json.loads(out)["locks"]
    assert first["id"].startswith("mysql:") and f":get_lock:{tid(newline)}:held:" in first["id"]


def client_error(my: MyHarness, statement: str) -> str:
    """What the real mariadb client prints when `statement` times out on a row lock
    (innodb_lock_wait_timeout=1 in its session): the statement boxed in lines of
    dashes, then ERROR 1205."""
    need_tools("mariadb")
    endpoint = my.endpoint
    args = ["mariadb", "--user", endpoint.user]
    if endpoint.socket:
        args += ["--socket", endpoint.socket]
    else:
        args += ["--host", endpoint.host or "127.0.0.1", "--port", str(endpoint.port)]
    args += [endpoint.database or "test", "-e"]
    args.append(f"SET SESSION innodb_lock_wait_timeout = 1; {statement}")
    env = {**os.environ, "MYSQL_PWD": endpoint.password or ""}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=WAIT_S)
    assert done.returncode != 0, done.stdout
    return done.stderr


def row_and_named_lock(my: MyHarness) -> tuple[str, Session, Session]:
    """A table whose row 1 one session holds FOR UPDATE, and a GET_LOCK name another
    holds, each with a session waiting on it (both roots of the server's trees)."""
    table = my.table("rank")
    my.admin_rows(f"INSERT INTO {table} VALUES (1, 0), (2, 0)")
    row_holder, row_waiter, named_holder, named_waiter = (my.session() for _ in range(4))
    name = f"{my.prefix}-job"
    my.run(named_holder, f"SELECT GET_LOCK('{name}', 0)")
    my.background(named_waiter, f"SELECT GET_LOCK('{name}', {int(WAIT_S)})")
    my.waiting(named_waiter, USER_LOCK_STATE)
    my.run(row_holder, "BEGIN")
    my.run(row_holder, f"SELECT * FROM {table} WHERE id = 1 FOR UPDATE")
    my.background(row_waiter, f"SELECT * FROM {table} WHERE id = 1 FOR UPDATE")
    my.waiting(row_waiter)
    return table, row_holder, named_holder


def lockwatch(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """lockwatch as a shell runs it: its own process, its argv as given."""
    return subprocess.run(
        [sys.executable, "-m", "lockwatch", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )


def test_1205_ranks_the_row_the_statement_names_over_an_unrelated_named_lock(
    my: MyHarness,
) -> None:
    """Issue 46 item 3: the GET_LOCK holder was listed first as `likely`."""
    table, row_holder, named_holder = row_and_named_lock(my)
    said = client_error(my, f"SELECT * FROM {table} WHERE id=1 FOR UPDATE")
    assert "ERROR 1205 (HY000)" in said and f"FROM {table} WHERE id=1" in said, said
    done = lockwatch("why", "--mysql", my.dsn, "-", stdin=said)
    assert done.returncode == 0, done.stderr
    first, reason = done.stdout.splitlines()[:2]
    assert first.startswith("certain: mysql:"), done.stdout
    assert f":innodb_row:{tid(row_holder)}:held:" in first
    where = f"{my.endpoint.database}.{table}"
    assert reason == f"  match:  table {where}, row id=1, which the text names"
    # A named lock is no InnoDB row: it is left out, counted in a note.
    assert f":get_lock:{tid(named_holder)}:" not in done.stdout
    # (Other runs on the shared server may block too: counted, not named.)
    assert re.search(r"\d+ other blocking sessions? match(es)? nothing the text names", done.stdout)
    done = lockwatch("why", "--json", "--mysql", my.dsn, "-", stdin=said)
    (lock,) = json.loads(done.stdout)["locks"]
    assert lock["sure"] == "certain" and lock["likely"] is False
    assert lock["matched"].startswith(f"table {my.endpoint.database}.{table}, row id=1")
    # A statement that picks its rows by another column waited on the same row
    # lock, but the text cannot say which row: the table matches, likely.
    said = client_error(my, f"UPDATE {table} SET v = 5 WHERE v=0")
    assert "ERROR 1205 (HY000)" in said and f"UPDATE {table} SET" in said, said
    done = lockwatch("why", "--mysql", my.dsn, "-", stdin=said)
    first, reason = done.stdout.splitlines()[:2]
    assert first.startswith("likely: mysql:") and f":innodb_row:{tid(row_holder)}:held:" in first
    assert reason.endswith("which the text names; v=0 is not this lock's key (1)"), reason


def test_the_mariadb_clients_boxed_error_is_text_not_an_option(my: MyHarness) -> None:
    """Issue 46 item 4: `lockwatch why "$(cat error.txt)"` said `No such option
    '--------------…'` (exit 2): the client boxes the statement in dashes."""
    table, row_holder, _ = row_and_named_lock(my)
    said = client_error(my, f"SELECT * FROM {table} WHERE id=1 FOR UPDATE")
    assert said.startswith("--------------\n"), said
    for args in (("why", said), ("why", "--mysql", my.dsn, said)):
        done = lockwatch(*args)
        assert "No such option" not in done.stderr and done.returncode != 2, done.stderr
    assert f":innodb_row:{tid(row_holder)}:held:" in done.stdout
    # Without a server named, it says where it would look (exit 1), not a usage error.
    done = lockwatch("why", said)
    assert done.returncode == 1 and "--mysql DSN" in done.stderr
    # Only the options before the text are options: after it, they are text.
    code, out, err = run_cli("why", "--json", "--mysql", my.dsn, said, "--pg", "x")
    assert code == 0, err
    assert json.loads(out)["input"] == f"{said} --pg x"
