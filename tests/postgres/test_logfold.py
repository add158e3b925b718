"""PostgreSQL's log fold (issue 44, item 7) on lines the server really wrote: a
private cluster with `log_lock_waits = on` and `deadlock_timeout = 100ms`, a
row-lock wait that is granted, one that ends in `lock_timeout`, and a real
deadlock; the log it wrote is folded into wait spans and each is checked
(waiter, blocker, outcome, times)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lockwatch.model.history import ACQUIRED, DEADLOCK, ORIGIN_LOG, TIMEOUT
from lockwatch.sources.postgres.logfold import fold, parse_line, read_lines
from tests.postgres.conftest import Cluster

WAIT_S = 60.0  # a bound under a loaded machine, never a timing assertion


def _until(predicate: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def logging_cluster(throwaway_cluster: Cluster) -> Iterator[Cluster]:
    """The private cluster logging its lock waits; its settings put back after."""
    with psycopg.connect(throwaway_cluster.dsn, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET log_lock_waits = on")
        conn.execute("ALTER SYSTEM SET deadlock_timeout = '100ms'")
        conn.execute("SELECT pg_reload_conf()")
        conn.execute("DROP TABLE IF EXISTS lw_logfold")
        conn.execute("CREATE TABLE lw_logfold (id int PRIMARY KEY, v int)")
        conn.execute("INSERT INTO lw_logfold VALUES (1, 0), (2, 0)")
    try:
        yield throwaway_cluster
    finally:
        with psycopg.connect(throwaway_cluster.dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS lw_logfold")
            conn.execute("ALTER SYSTEM RESET log_lock_waits")
            conn.execute("ALTER SYSTEM RESET deadlock_timeout")
            conn.execute("SELECT pg_reload_conf()")


def _logged(cluster: Cluster, text: str) -> bool:
    return text in cluster.logfile.read_text(errors="replace")


def _in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def _pid(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def test_the_log_folds_into_waits(logging_cluster: Cluster, tmp_path: Path) -> None:
    cluster = logging_cluster
    began = datetime.now(UTC)
    holder = psycopg.connect(cluster.dsn)
    waiter = psycopg.connect(cluster.dsn)
    holder_pid, waiter_pid = _pid(holder), _pid(waiter)
    holder.commit()
    waiter.commit()
    # 1. granted: the holder commits once the server logged the wait.
    holder.execute("UPDATE lw_logfold SET v = 1 WHERE id = 1")
    thread, errors = _in_thread(lambda: waiter.execute("UPDATE lw_logfold SET v = 2 WHERE id = 1"))
    _until(lambda: _logged(cluster, f"process {waiter_pid} still waiting"), "the logged wait")
    holder.commit()
    thread.join(WAIT_S)
    assert not errors, errors
    waiter.commit()
    _until(lambda: _logged(cluster, f"process {waiter_pid} acquired"), "the logged grant")
    # 2. a lock_timeout.
    holder.execute("UPDATE lw_logfold SET v = 3 WHERE id = 1")
    waiter.execute("SET lock_timeout = '400ms'")
    with pytest.raises(psycopg.errors.LockNotAvailable):
        waiter.execute("UPDATE lw_logfold SET v = 4 WHERE id = 1")
    waiter.rollback()
    holder.commit()
    # 3. a deadlock: each holds one row and wants the other's.
    holder.execute("UPDATE lw_logfold SET v = 5 WHERE id = 1")
    waiter.execute("UPDATE lw_logfold SET v = 5 WHERE id = 2")
    thread, errors = _in_thread(lambda: holder.execute("UPDATE lw_logfold SET v = 6 WHERE id = 2"))
    _until(lambda: _logged(cluster, f"process {holder_pid} still waiting"), "the first wait")
    try:
        waiter.execute("UPDATE lw_logfold SET v = 6 WHERE id = 1")
    except psycopg.errors.DeadlockDetected:
        waiter.rollback()
    thread.join(WAIT_S)
    holder.rollback()
    holder.close()
    waiter.close()
    _until(lambda: _logged(cluster, "deadlock detected"), "the logged deadlock")
    ended = datetime.now(UTC)

    lines = list(read_lines(cluster.logfile))
    assert any(parse_line(line) for line in lines)
    spans = [
        s for s in fold(lines, host="h", server="db") if began - timedelta(seconds=1) <= s.start
    ]
    assert spans and all(s.origin == ORIGIN_LOG and s.server == "db" for s in spans)
    assert all(s.end is not None and s.start <= s.end <= ended for s in spans)
    granted, timed_out = [s for s in spans if s.waiter.pid == waiter_pid][:2]
    assert granted.blocker.pid == holder_pid and granted.outcome == ACQUIRED
    assert granted.mode == "ShareLock" and granted.resource.startswith("transaction ")
    assert timed_out.blocker.pid == holder_pid and timed_out.outcome == TIMEOUT
    assert timed_out.end is not None
    assert timedelta(milliseconds=300) <= timed_out.end - timed_out.start < timedelta(seconds=30)
    deadlocked = [s for s in spans if s.outcome == DEADLOCK]
    assert [(s.waiter.pid, s.blocker.pid) for s in deadlocked] in (
        [(waiter_pid, holder_pid)],
        [(holder_pid, waiter_pid)],
    )
    assert deadlocked[0].cycle
    _history_folds_the_log(cluster, tmp_path, holder_pid, waiter_pid)


def _history_folds_the_log(cluster: Cluster, tmp_path: Path, holder: int, waiter: int) -> None:
    """`lockwatch history --pg-log` folds the same real log into a history
    file: the episodes say they are from the log; a second fold adds nothing."""
    import orjson

    from tests.conftest import run_cli

    history = tmp_path / "history.sqlite3"
    args = ["history", "--history", str(history), "--pg-log", str(cluster.logfile)]
    code, out, err = run_cli(*args, "--pg-server", "db", "--since", "-1h", "--json")
    assert code == 0, err
    episodes = orjson.loads(out)["episodes"]
    ours = [e for e in episodes if e["blocker"]["pid"] in (holder, waiter)]
    assert ours and all(e["origins"] == ["log"] and e["server"] == "db" for e in ours)
    outcomes = {w["outcome"] for e in ours for w in e["waiters"]}
    assert {"acquired", "timeout", "deadlock"} <= outcomes
    code, again, err = run_cli(*args, "--pg-server", "db", "--since", "-1h", "--json")
    assert code == 0 and orjson.loads(again) == orjson.loads(out), err
    code, _, err = run_cli(*args[:3], "--pg-log", str(tmp_path / "missing.log"))
    assert code == 2 and "--pg-log" in err and "Traceback" not in err
