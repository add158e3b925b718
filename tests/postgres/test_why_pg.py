"""`lockwatch why --pg` on PostgreSQL's own errors, made on a real server, while
the contention behind them is still there: it names the blocker."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest

from tests.conftest import run_cli
from tests.formats.common import need_tools
from tests.postgres.conftest import WAIT_S, PgHarness

pytestmark = pytest.mark.postgres


def test_lock_timeout_names_the_blocker_and_who_waits(pg: PgHarness) -> None:
    table = pg.table(2)
    holder, victim, waiter = pg.sessions("holder", "victim", "waiter")
    holder.execute("BEGIN")
    holder.execute(f"UPDATE {table} SET v = 1 WHERE id = 1")
    victim.execute("SET lock_timeout = '100ms'")
    with pytest.raises(psycopg.errors.LockNotAvailable) as caught:
        victim.execute(f"UPDATE {table} SET v = 2 WHERE id = 1")
    said = f"ERROR:  {caught.value}"
    assert "canceling statement due to lock timeout" in said and table in said
    pg.block(waiter, f"UPDATE {table} SET v = 3 WHERE id = 1")
    code, out, err = run_cli("why", "--pg", pg.dsn, said)
    assert code == 0, err
    holder_pid, waiter_pid = holder.info.backend_pid, waiter.info.backend_pid
    assert f":{holder_pid}:transactionid/" in out.splitlines()[0]
    assert f"{waiter_pid} waits on its holder" in out
    assert "next:   wait: " in out and "lock_timeout" in out
    code, out, _ = run_cli("why", "--json", "--pg", pg.dsn, said)
    doc = json.loads(out)
    first = doc["locks"][0]
    assert first["holder"]["pid"] == holder_pid and first["state"] == "active"
    assert first["waiting_on_holder"] == [waiter_pid]
    assert [clue["kind"] for clue in doc["clues"]] == ["name", "hint"]
    # Without a server to ask, it says where it would have looked.
    code, _, err = run_cli("why", said, env={"LOCKWATCH_PG": "", "PGHOST": "", "PGDATABASE": ""})
    assert code == 1 and "--pg DSN" in err


def test_deadlock_pids_name_the_survivor_that_now_blocks(pg: PgHarness) -> None:
    table = pg.table(2)
    first, second, waiter = pg.sessions("first", "second", "waiter")
    for conn, row in ((first, 1), (second, 2)):
        conn.execute("BEGIN")
        conn.execute(f"UPDATE {table} SET v = 1 WHERE id = {row}")
    # The second checks for a deadlock first, so it is the one aborted.
    second.execute("SET deadlock_timeout = '50ms'")
    survivor = pg.block(first, f"UPDATE {table} SET v = 2 WHERE id = 2")
    with pytest.raises(psycopg.errors.DeadlockDetected) as caught:
        second.execute(f"UPDATE {table} SET v = 2 WHERE id = 1")
    survivor.wait_done()
    said = f"ERROR:  {caught.value}"
    assert f"Process {first.info.backend_pid} waits for" in said
    pg.block(waiter, f"UPDATE {table} SET v = 3 WHERE id = 2")
    code, out, err = run_cli("why", "--pg", pg.dsn, said)
    assert code == 0, err
    assert f":{first.info.backend_pid}:transactionid/" in out.splitlines()[0]
    assert f"{waiter.info.backend_pid} waits on its holder" in out
    assert "already broke the deadlock" in out


def test_an_idle_in_transaction_holder_is_said_idle_against_its_limit(pg: PgHarness) -> None:
    """Issue 46 item 1: the session an ALTER queues behind is idle in its
    transaction; `next` says so, for how long against the limit, and that its
    client (this test) is alive, never "is at work"."""
    table = pg.table(1)
    holder, alter, victim = pg.sessions("billing-worker", "migrate", "victim")
    holder.execute("BEGIN")
    holder.execute(f"SELECT * FROM {table}")
    pg.block(alter, f"ALTER TABLE {table} ADD COLUMN x int")
    pg.wait_state(holder.info.backend_pid, "idle in transaction", longer_than=1.0)
    victim.execute("SET lock_timeout = '100ms'")
    with pytest.raises(psycopg.errors.LockNotAvailable) as caught:
        victim.execute(f"SELECT * FROM {table}")
    said = f"ERROR:  {caught.value}"
    code, out, err = run_cli("why", "--pg", pg.dsn, "--pg-idle-after", "0.5", said)
    assert code == 0, err
    pid = holder.info.backend_pid
    (next_line,) = [line for line in out.splitlines() if line.startswith("  next:")]
    assert next_line.startswith(
        f"  next:   ask who runs it: {pg.application('billing-worker')} (pid {pid},"
    ), out
    assert (
        " is idle in transaction for " in next_line and "(limit 0.5s), running nothing" in next_line
    )
    assert "is alive and may still end its transaction" in next_line
    assert "at work" not in next_line and "not stale" not in next_line


def test_lock_timeout_ranks_the_table_it_names_over_an_unrelated_advisory_lock(
    pg: PgHarness,
) -> None:
    """Issue 46 item 3, on PostgreSQL: psql's own lock_timeout error names the
    table; an advisory lock others wait on is no lock on it."""
    need_tools("psql")
    table = pg.table(2)
    holder, waiter, advisory, advisory_waiter = pg.sessions(
        "holder", "waiter", "advisory", "advisory-waiter"
    )
    advisory.execute("SELECT pg_advisory_lock(4646)")
    pg.block(advisory_waiter, "SELECT pg_advisory_lock(4646)")
    holder.execute("BEGIN")
    holder.execute(f"UPDATE {table} SET v = 1 WHERE id = 1")
    pg.block(waiter, f"UPDATE {table} SET v = 3 WHERE id = 1")
    statement = f"UPDATE {table} SET v = 2 WHERE id = 1"
    # Queued behind the waiter, it times out on the row's tuple lock: psql's error
    # has no CONTEXT then; -b (--echo-errors) adds the statement, as the log has it.
    psql = subprocess.run(
        ["psql", pg.dsn, "-X", "-b", "-c", "SET lock_timeout = '100ms'", "-c", statement],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    said = psql.stderr
    assert "canceling statement due to lock timeout" in said, said
    assert f"STATEMENT:  UPDATE {table} SET" in said, said
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "why", "--pg", pg.dsn, "-"],
        input=said,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert done.returncode == 0, done.stderr
    first, match = done.stdout.splitlines()[:2]
    # The text names the table, not which session's lock on it: likely, not certain.
    assert first.startswith("likely: pg:") and f":{holder.info.backend_pid}:" in first
    assert match == f"  match:  a lock on {table}, which the text names"
    assert f":{advisory.info.backend_pid}:" not in done.stdout
    assert "other blocking session" in done.stdout
    # With the table's name gone from the text, the advisory holder is only possible.
    _, out, _ = run_cli("why", "--json", "--pg", pg.dsn, said.replace(table, "elsewhere"))
    sure = {lock["holder"]["pid"]: lock["sure"] for lock in json.loads(out)["locks"]}
    assert sure.get(advisory.info.backend_pid) == "possible", out
