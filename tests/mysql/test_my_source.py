"""The mysql source against a real MariaDB: named locks, a three-deep InnoDB chain
against the server's own view, a metadata-lock queue behind an ALTER TABLE,
client processes alive and killed, KILL with compare-and-swap, a monitor user
without PROCESS, and `ls --json --mysql` / `break` as an operator runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from lockwatch.clock import SystemClock
from lockwatch.model.action import ActionRefused, Asked, Doing, Kind
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.mysql.actions import ACTIONS
from lockwatch.sources.mysql.facts import MyLock
from lockwatch.sources.mysql.server import MyServer
from tests.conftest import run_cli
from tests.mysql.conftest import GROUP, MyHarness, connect, spawn_holder, tid, wait_until

pytestmark = [pytest.mark.mysql, GROUP]


def poll(
    my: MyHarness, *, idle_after: float = 60.0, names: tuple[str, ...] = (), find: bool = True
) -> dict[str, tuple[Lock, Verdict]]:
    """One poll's locks of this test's sessions, judged. `find` False: as if every
    client were on another host (not findable)."""
    if find:
        server = MyServer(my.endpoint, idle_after=idle_after, names=names)
    else:
        server = MyServer(my.endpoint, idle_after=idle_after, names=names, client_finder=None)
    try:
        polled = server.poll()
    finally:
        server.close()
    assert polled.locks is not None, polled.statuses
    mine = [lock for lock in polled.locks if my.prefix in lock.id or _ours(my, lock)]
    return {lock.id: (lock, evaluate(lock, StaticProcesses(), SystemClock(), "h")) for lock in mine}


def _ours(my: MyHarness, lock: Lock) -> bool:
    facts = lock.facts
    return isinstance(facts, MyLock) and facts.session.thread_id in {
        tid(conn) for conn in my.sessions
    }


def facts(lock: Lock) -> MyLock:
    assert isinstance(lock.facts, MyLock)
    return lock.facts


def one(found: dict[str, tuple[Lock, Verdict]], part: str) -> tuple[Lock, Verdict]:
    hits = [pair for lock_id, pair in found.items() if part in lock_id]
    assert len(hits) == 1, (part, list(found))
    return hits[0]


# --------------------------------------------------------------------------- named locks


@pytest.mark.parametrize("plugin", ["metadata_lock_info", "no_metadata_lock_info"])
def test_named_lock_holder_and_waiter(
    my: MyHarness, plugin: str, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue(plugin)
    holder, waiter = my.session(), my.session()
    name = f"{my.prefix}_named"
    my.run(holder, f"SELECT GET_LOCK('{name}', 0)")
    blocked = my.background(waiter, f"SELECT GET_LOCK('{name}', 20)")
    my.waiting(waiter, "User lock")
    found = poll(my)
    held, held_verdict = one(found, f":get_lock:{tid(holder)}:held:{name}")
    wait, wait_verdict = one(found, f":get_lock:{tid(waiter)}:wait:{name}")
    assert facts(held).blocking == (tid(waiter),)
    assert facts(wait).blocked_by == (tid(holder),)
    assert wait_verdict.state is State.WAITING and "waiting" in wait_verdict.codes
    assert held_verdict.state is State.ACTIVE and "blocking" in held_verdict.codes
    if plugin == "metadata_lock_info":
        assert facts(held).found_by == "metadata_lock_info"
        assert held.acquired_at is not None  # LOCK_TIME_MS: the server's own grant age
    else:
        assert facts(held).found_by == "is_used_lock"  # the waiter's statement named it
        assert held.acquired_at is None and facts(held).known_held_at is not None
    my.run(holder, f"SELECT RELEASE_LOCK('{name}')")
    blocked.wait()
    assert blocked.result == [((1,),)]


# --------------------------------------------------------------------------- InnoDB


def test_three_deep_innodb_chain_matches_the_servers_own_view(my: MyHarness) -> None:
    table = my.table("rows")
    my.admin_rows(f"INSERT INTO {table} VALUES (1, 0), (2, 0), (3, 0)")
    a, b, c = my.session(), my.session(), my.session()
    my.run(a, "BEGIN")
    my.run(a, f"UPDATE {table} SET v = v + 1 WHERE id = 1")
    my.run(b, "BEGIN")
    my.run(b, f"UPDATE {table} SET v = v + 1 WHERE id = 2")
    my.background(b, f"UPDATE {table} SET v = v + 1 WHERE id = 1")
    my.waiting(b)
    my.background(c, f"SELECT * FROM {table} WHERE id = 2 FOR UPDATE")
    my.waiting(c)
    found = poll(my, idle_after=3600)
    edges = {
        (facts(lock).session.thread_id, blocker)
        for lock, _ in found.values()
        if not facts(lock).granted and facts(lock).kind == "innodb_row"
        for blocker in facts(lock).blocked_by
    }
    reference = set(
        my.admin_rows(
            "SELECT waiting_pid, blocking_pid FROM sys.innodb_lock_waits"
            " WHERE locked_table LIKE %s",
            (f"%{table}%",),
        )
    )
    assert edges == reference == {(tid(b), tid(a)), (tid(c), tid(b))}
    # The tree: A is the one root, holding up B directly and C down the chain.
    from lockwatch.model.blocking import from_locks

    tree = from_locks(lock for lock, _ in found.values())
    (root,) = tree.roots
    assert root.id == f"thread {tid(a)}" and (root.direct, root.total) == (1, 2)
    held, verdict = one(found, f":innodb_row:{tid(a)}:held:")
    assert facts(held).session.idle_in_transaction
    assert held.acquired_at is None  # no grant time: bounds only
    assert facts(held).acquired_after is not None and facts(held).known_held_at is not None
    assert "blocking" in verdict.codes


def test_an_idle_holder_in_a_transaction_is_stale_only_by_inference(my: MyHarness) -> None:
    table = my.table("idle")
    my.admin_rows(f"INSERT INTO {table} VALUES (1, 0)")
    a, b = my.session(), my.session()
    my.run(a, "BEGIN")
    my.run(a, f"UPDATE {table} SET v = 1 WHERE id = 1")
    my.background(b, f"UPDATE {table} SET v = 2 WHERE id = 1")
    my.waiting(b)
    time.sleep(0.2)
    from lockwatch.sources.mysql.dsn import parse

    server = MyServer(parse(my.dsn, {}), idle_after=0.1, client_finder=None)
    try:
        polled = server.poll()
    finally:
        server.close()
    assert polled.locks is not None
    (held,) = [
        lock
        for lock in polled.locks
        if facts(lock).granted and facts(lock).session.thread_id == tid(a)
    ]
    verdict = evaluate(held, StaticProcesses(), SystemClock(), "h")
    assert verdict.state is State.STALE
    assert {"idle_in_transaction", "inferred"} <= set(verdict.codes)


# --------------------------------------------------------------------------- metadata locks


def test_metadata_lock_queue_behind_an_alter_table(my: MyHarness, metadata_lock_info: None) -> None:
    table = my.table("mdl", "(id INT) ENGINE=InnoDB")
    reader, ddl, queued = my.session(), my.session(), my.session()
    my.run(reader, "BEGIN")
    my.run(reader, f"SELECT * FROM {table}")
    alter = my.background(ddl, f"ALTER TABLE {table} ADD COLUMN c2 INT")
    my.waiting(ddl, "Waiting for table metadata lock")
    behind = my.background(queued, f"SELECT * FROM {table}")
    my.waiting(queued, "Waiting for table metadata lock")
    found = poll(my)
    held, _ = one(found, f":metadata_lock:{tid(reader)}:held:")
    head, head_verdict = one(found, f":metadata_lock:{tid(ddl)}:wait:")
    tail, _ = one(found, f":metadata_lock:{tid(queued)}:wait:")
    assert facts(held).found_by == "metadata_lock_info" and held.acquired_at is not None
    assert facts(head).blocked_by == (tid(reader),) and facts(head).queued_behind == 1
    assert "ddl_queue" in head_verdict.codes and head_verdict.state is State.WAITING
    assert facts(tail).blocked_by == (tid(ddl),) and facts(tail).queue_head == tid(ddl)
    # The low-risk way out: cancel the DDL; the statements queued behind it run.
    plan = ACTIONS.plan(Kind.CANCEL, head, head_verdict, Asked(peers=[])).effect
    assert "KILL QUERY" in plan
    ACTIONS.run(
        ACTIONS.plan(Kind.CANCEL, head, head_verdict, Asked()),
        Doing("a1", "s", reach={"mysql_endpoint": lambda server: my.endpoint}),
    )
    behind.wait()
    alter.wait()
    assert alter.error and alter.error[0].args[0] == 1317


# --------------------------------------------------------------------------- clients


HOLDER = """
import sys, pymysql
conn = pymysql.connect(host="127.0.0.1", port=int(sys.argv[1]), user="root", autocommit=True)
cursor = conn.cursor()
cursor.execute("SELECT GET_LOCK(%s, 0)", (sys.argv[2],))
print(conn.thread_id(), flush=True)
if sys.argv[3] == "busy":
    cursor.execute("SELECT SLEEP(30)")
else:
    sys.stdin.read()
"""


@pytest.fixture
def holder_process(my: MyHarness) -> Iterator[Any]:
    started: list[subprocess.Popen[str]] = []

    def start(name: str, how: str) -> tuple[subprocess.Popen[str], int]:
        return spawn_holder(started, HOLDER, str(my.endpoint.port), name, how)

    yield start
    for process in started:
        process.kill()
        process.wait()


def test_client_alive_then_killed(my: MyHarness, holder_process: Any) -> None:
    name = f"{my.prefix}_client"
    idle, idle_thread = holder_process(name, "idle")
    time.sleep(0.3)
    found = poll(my, idle_after=0.1, names=(name,))
    lock, verdict = one(found, f":get_lock:{idle_thread}:held:")
    client = facts(lock).session.client_process
    assert client is not None and client.alive and client.pid == idle.pid
    # Idle past the limit, but its program lives: not stale on idle time alone.
    assert verdict.state is State.ACTIVE and "client_alive" in verdict.codes
    idle.kill()
    idle.wait()
    busy_name = f"{my.prefix}_busy"
    busy, busy_thread = holder_process(busy_name, "busy")
    time.sleep(0.2)
    os.kill(busy.pid, signal.SIGKILL)
    busy.wait()
    found = poll(my, idle_after=60, names=(busy_name,))
    lock, verdict = one(found, f":get_lock:{busy_thread}:held:")
    assert verdict.state is State.STALE and "client_dead" in verdict.codes
    my.admin_rows(f"KILL {busy_thread}")


# --------------------------------------------------------------------------- actions


def test_kill_refuses_a_changed_thread_then_breaks_the_holder(my: MyHarness) -> None:
    table = my.table("cas")
    my.admin_rows(f"INSERT INTO {table} VALUES (1, 0)")
    a, b = my.session(), my.session()
    my.run(a, "BEGIN")
    my.run(a, f"UPDATE {table} SET v = 1 WHERE id = 1")
    waiter = my.background(b, f"UPDATE {table} SET v = 2 WHERE id = 1")
    my.waiting(b)
    time.sleep(0.2)
    found = poll(my, idle_after=0.1, find=False)
    lock, verdict = one(found, f":innodb_row:{tid(a)}:held:")
    assert verdict.state is State.STALE
    plan = ACTIONS.plan(Kind.BREAK, lock, verdict, Asked(peers=[x for x, _ in found.values()]))
    assert "KILL CONNECTION" in plan.effect and plan.needs_name  # stale only by inference
    doing = Doing("a1", "s", force=True, reach={"mysql_endpoint": lambda server: my.endpoint})
    # The holder runs a statement after it was seen: not the idle thread judged.
    my.run(a, "SELECT 1")
    with pytest.raises(ActionRefused) as refused:
        ACTIONS.run(plan, doing)
    assert refused.value.code == "changed"
    assert tid(a) in {row[0] for row in my.admin_rows("SHOW PROCESSLIST")}
    # Seen again, it is broken: its transaction rolls back and the waiter goes ahead.
    found = poll(my, idle_after=3600)
    lock, verdict = one(found, f":innodb_row:{tid(a)}:held:")
    plan = ACTIONS.plan(Kind.BREAK, lock, verdict, Asked())
    done = ACTIONS.run(plan, doing)
    assert done.details["thread_id"] == tid(a) and done.details["user"] == "root"
    waiter.wait()
    assert not waiter.error


def test_monitor_without_process_sees_unknown_with_the_grant(my: MyHarness) -> None:
    user = f"{my.prefix}_mon"
    my.admin_rows(f"CREATE USER '{user}'@'127.0.0.1'")
    try:
        holder = my.session()
        name = f"{my.prefix}_priv"
        my.run(holder, f"SELECT GET_LOCK('{name}', 0)")
        from lockwatch.sources.mysql.dsn import parse

        server = MyServer(parse(f"mysql://{user}@127.0.0.1:{my.endpoint.port}/", {}), names=(name,))
        try:
            polled = server.poll()
        finally:
            server.close()
        (status,) = polled.statuses
        assert status.state == "connected" and "GRANT PROCESS ON *.*" in (status.reason or "")
        assert polled.locks is not None
        (lock,) = [x for x in polled.locks if x.name == name]
        verdict = evaluate(lock, StaticProcesses(), SystemClock(), "h")
        assert verdict.state is State.UNKNOWN
        assert verdict.codes[0] == "insufficient_privilege"
        assert f"GRANT PROCESS ON *.* TO '{user}'" in verdict.reasons[0].message
    finally:
        my.admin_rows(f"DROP USER '{user}'@'127.0.0.1'")


# --------------------------------------------------------------------------- the CLI


def test_ls_json_and_break_as_an_operator_runs_them(my: MyHarness, tmp_path: Path) -> None:
    table = my.table("cli")
    my.admin_rows(f"INSERT INTO {table} VALUES (1, 0)")
    a, b = my.session(), my.session()
    my.run(a, "BEGIN")
    my.run(a, f"UPDATE {table} SET v = 1 WHERE id = 1")
    waiter = my.background(b, f"UPDATE {table} SET v = 2 WHERE id = 1")
    my.waiting(b)
    config = tmp_path / "lockwatch.toml"
    config.write_text("[mysql]\nidle_after = 3600\n")
    env = {"MYSQL_PWD": "", "LOCKWATCH_READONLY": ""}
    code, out, err = run_cli("ls", "--json", "--config", str(config), "--mysql", my.dsn, env=env)
    assert code == 0, err
    document = json.loads(out)
    locks = {lock["id"]: lock for lock in document["locks"]}
    (held_id,) = [i for i in locks if f":innodb_row:{tid(a)}:held:" in i]
    held = locks[held_id]
    assert held["blocking"] == [tid(b)] and held["state"] == "active"
    assert held["held_at_most_seconds"] is not None and held["age_seconds"] is None
    # A waiter's age is its wait, from the server's own start of it (as PostgreSQL's).
    (waiting,) = [lock for i, lock in locks.items() if f":innodb_row:{tid(b)}:wait:" in i]
    assert waiting["age_seconds"] is not None
    # (the verdict and the record may date it a poll's moment apart)
    assert waiting["age_seconds"] == pytest.approx(waiting["holder"]["wait_seconds"], abs=1.0)
    (tree,) = [t for t in document["blocking"] if t["server"] == f"mysql:{my.endpoint.name}"]
    # Its root is ours (other sessions on a shared server may have trees of their own).
    roots = {root["id"]: root for root in tree["roots"]}
    assert f"thread {tid(a)}" in roots and f"thread {tid(b)}" not in roots
    assert [w["id"] for w in roots[f"thread {tid(a)}"]["waiters"]] == [f"thread {tid(b)}"]
    log = tmp_path / "audit.jsonl"
    args = ("--config", str(config), "--mysql", my.dsn, "--audit-log", str(log), "--yes")
    code, out, err = run_cli("break", held_id, "--reason", "test", *args, env=env)
    assert code != 0 and "force" in (out + err).lower()  # active: needs --force
    code, out, err = run_cli("break", held_id, "--reason", "test", "--force", *args, env=env)
    assert code == 0, err
    waiter.wait()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    result = records[-1]
    assert result["event"] == "connection_killed"
    assert result["target"]["thread_id"] == tid(a)
    assert result["target"]["user"] == "root"
    with pytest.raises(pymysql.err.OperationalError):
        my.run(a, "SELECT 1")


def test_a_server_that_is_away_is_a_status_not_a_crash(my: MyHarness) -> None:
    from lockwatch.sources.mysql.dsn import parse

    server = MyServer(parse("mysql://nobody:s3cr3t@127.0.0.1:1/", {}), timeout=1)
    polled = server.poll()
    (status,) = polled.statuses
    assert polled.locks is None and status.state == "disconnected"
    assert "s3cr3t" not in (status.reason or "")
    wait_until(lambda: True, "nothing")
    with connect(my.endpoint) as conn:
        assert conn.open
