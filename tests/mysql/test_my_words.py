"""What lockwatch says of MariaDB holders, on real sessions (issue 46, items 1
and 10): one waiting thread is "thread N", not "threads N"; a thread idle in a
transaction is said to be idle (for how long, against the limit), never "at
work"."""

from __future__ import annotations

import json

import pytest

from lockwatch.clock import SystemClock
from lockwatch.model.action import Asked, Kind
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import evaluate
from lockwatch.sources.mysql.actions import ACTIONS
from lockwatch.sources.mysql.dsn import parse
from lockwatch.sources.mysql.server import MyServer
from tests.conftest import run_cli
from tests.mysql.conftest import GROUP, MyHarness, tid, wait_until

pytestmark = [pytest.mark.mysql, GROUP]


def test_one_waiting_thread_is_said_in_the_singular(my: MyHarness) -> None:
    holder, waiter = my.session(), my.session()
    name = f"{my.prefix}_one"
    my.run(holder, f"SELECT GET_LOCK('{name}', 0)")
    my.background(waiter, f"SELECT GET_LOCK('{name}', 20)")
    my.waiting(waiter, "User lock")
    server = MyServer(parse(my.dsn, {}))
    try:
        locks = server.poll().locks
    finally:
        server.close()
    assert locks is not None
    (held,) = [lock for lock in locks if f":get_lock:{tid(holder)}:held:{name}" in lock.id]
    verdict = evaluate(held, StaticProcesses(), SystemClock(), "h")
    plan = ACTIONS.plan(Kind.BREAK, held, verdict, Asked(peers=list(locks)))
    assert f"thread {tid(waiter)} waiting on it may go ahead" in plan.effect, plan.effect
    assert "threads" not in plan.effect
    blocking = [r.message for r in verdict.reasons if r.code == "blocking"]
    assert blocking == [f"blocks 1 waiting session: thread {tid(waiter)}"]


def test_why_says_a_thread_idle_in_transaction_is_idle_not_at_work(my: MyHarness) -> None:
    table = my.table("idle")
    my.admin_rows(f"INSERT INTO {table} VALUES (1, 0)")
    holder, waiter = my.session(), my.session()
    my.run(holder, "BEGIN")
    my.run(holder, f"UPDATE {table} SET v = 1 WHERE id = 1")
    my.background(waiter, f"UPDATE {table} SET v = 2 WHERE id = 1")
    my.waiting(waiter)

    def idle() -> bool:
        rows = my.admin_rows(
            "SELECT TIME_MS FROM information_schema.PROCESSLIST WHERE ID = %s", (tid(holder),)
        )
        return bool(rows) and float(rows[0][0]) >= 1000

    wait_until(idle, "the holder to idle a second")
    said = "ERROR 1205 (HY000): Lock wait timeout exceeded; try restarting transaction"
    code, out, err = run_cli("why", "--json", "--mysql", my.dsn, "--mysql-idle-after", "3600", said)
    assert code == 0, err
    doc = json.loads(out)
    (record,) = [lock for lock in doc["locks"] if f":innodb_row:{tid(holder)}:held:" in lock["id"]]
    text = record["next_step"]["text"]
    assert record["state"] == "active" and record["next_step"]["action"] == "wait"
    assert "at work" not in text
    assert f"thread {tid(holder)} (root) is idle in transaction for " in text, text
    assert "(limit 1h00m), running nothing" in text, text
    # Its client (this test) is alive: it may still end its transaction.
    code, out, err = run_cli("why", "--mysql", my.dsn, "--mysql-idle-after", "0.5", said)
    assert code == 0, err
    (next_line,) = [line for line in out.splitlines() if line.startswith("  next:")]
    assert next_line.startswith(f"  next:   ask who runs it: thread {tid(holder)} (root) is idle")
    assert "is alive and may still end its transaction" in next_line
    state_line = next(line for line in out.splitlines() if line.startswith("  state:"))
    # Said once: the state's reasons are not said again under next.
    assert "not stale: its client process is alive" in state_line
    assert "not stale" not in next_line and "dedicated connection" not in next_line
