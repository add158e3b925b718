"""MySQL benchmark: one poll of the mysql source at ~5,000 InnoDB lock-wait rows,
against a minimal PyMySQL poller running the same lock queries innotop and
dolphie run on MariaDB, alternating in one run.

The load: HOLDERS sessions hold a shared lock on one row (SELECT … LOCK IN SHARE
MODE, transaction left open) and WAITERS sessions each want it exclusively
(UPDATE): each waiter waits on every holder (and on the waiters queued ahead),
so INNODB_LOCK_WAITS has thousands of rows, which innotop's blocked/blocker
query joins and returns whole.

- lockwatch: `MyServer.poll()` on its kept connection: PROCESSLIST, INNODB_TRX, the
  wait graph, the metadata-lock plugin check, and this host's client processes of
  the holders; every row made a lock with its session, then judged (the verdicts).
- baseline: on a kept connection, innotop's PROCESSLIST and INNODB_BLOCKED_BLOCKER
  (its MariaDB / 5.5-5.7 branch) and dolphie's processlist query (pl_query), every
  row fetched, nothing more.

The target (issue 34) is a median ratio of at most 1.5. Needs the MariaDB at
127.0.0.1:3306 (root, no password) and max_connections > HOLDERS + WAITERS + 5.

    python benchmarks/bench_mysql.py [--dsn DSN] [--rounds 15]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pymysql

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lockwatch.clock import SystemClock
from lockwatch.model.changes import judge
from lockwatch.model.process import StaticProcesses
from lockwatch.sources.mysql.dsn import parse
from lockwatch.sources.mysql.server import MyServer

RATIO_TARGET = 1.5
HOLDERS = 25
WAITERS = 80

INNOTOP_PROCESSLIST = (
    "SELECT /*innotop*/ ID, USER, HOST, DB, COMMAND, CASE WHEN TIME_MS/1000 > 365*86400"
    " THEN TIME ELSE TIME_MS/1000 END AS TIME, STATE, INFO FROM INFORMATION_SCHEMA.PROCESSLIST"
)
INNOTOP_BLOCKED_BLOCKER = """
SELECT /*innotop*/
   r.trx_mysql_thread_id                            AS waiting_thread,
   r.trx_query                                      AS waiting_query,
   r.trx_rows_modified                              AS waiting_rows_modified,
   TIMESTAMPDIFF(SECOND, r.trx_started, NOW())      AS waiting_age,
   TIMESTAMPDIFF(SECOND, r.trx_wait_started, NOW()) AS waiting_wait_secs,
   rp.user                                          AS waiting_user,
   rp.host                                          AS waiting_host,
   rp.db                                            AS waiting_db,
   b.trx_mysql_thread_id                            AS blocking_thread,
   b.trx_query                                      AS blocking_query,
   b.trx_rows_modified                              AS blocking_rows_modified,
   TIMESTAMPDIFF(SECOND, b.trx_started, NOW())      AS blocking_age,
   TIMESTAMPDIFF(SECOND, b.trx_wait_started, NOW()) AS blocking_wait_secs,
   bp.user                                          AS blocking_user,
   bp.host                                          AS blocking_host,
   bp.db                                            AS blocking_db,
   CONCAT(bp.command, IF(bp.command = 'Sleep', CONCAT(' ', bp.time),   '')) AS blocking_status,
   CONCAT(lock_mode, ' ', lock_type, ' ', lock_table, '(', lock_index, ')') AS lock_info
FROM INFORMATION_SCHEMA.INNODB_LOCK_WAITS w
   JOIN INFORMATION_SCHEMA.INNODB_TRX b   ON  b.trx_id  = w.blocking_trx_id
   JOIN INFORMATION_SCHEMA.INNODB_TRX r   ON  r.trx_id  = w.requesting_trx_id
   JOIN INFORMATION_SCHEMA.INNODB_LOCKS l ON  l.lock_id = w.requested_lock_id
   LEFT JOIN INFORMATION_SCHEMA.PROCESSLIST bp ON bp.id = b.trx_mysql_thread_id
   LEFT JOIN INFORMATION_SCHEMA.PROCESSLIST rp ON rp.id = r.trx_mysql_thread_id
"""
DOLPHIE_PL_QUERY = """
SELECT id, User AS user, Host AS host, db AS db, Command AS command, Time AS time,
       Info AS query, State AS state, trx_query AS trx_query, trx_state AS trx_state,
       trx_operation_state AS trx_operation_state, trx_rows_locked AS trx_rows_locked,
       trx_rows_modified AS trx_rows_modified,
       trx_concurrency_tickets AS trx_concurrency_tickets, "" AS connection_type,
       TIMESTAMPDIFF(SECOND, trx_started, NOW()) AS trx_time
FROM information_schema.PROCESSLIST pl
LEFT JOIN information_schema.innodb_trx ON trx_mysql_thread_id = pl.Id
WHERE command != 'Daemon'
"""


def connect(args: dict[str, Any], **extra: Any) -> pymysql.connections.Connection[Any]:
    conn: pymysql.connections.Connection[Any] = pymysql.connect(**{**args, **extra})
    return conn


class Load:
    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args
        self.table = f"lwb_{uuid.uuid4().hex[:8]}"
        self.sessions: list[pymysql.connections.Connection[Any]] = []
        self.threads: list[threading.Thread] = []
        self.admin = connect(args)

    def run(self, sql: str) -> list[Any]:
        with self.admin.cursor() as cursor:
            cursor.execute(sql)
            return list(cursor.fetchall())

    def start(self) -> int:
        self.run(f"CREATE TABLE {self.table} (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
        self.run(f"INSERT INTO {self.table} VALUES (1, 0)")
        for _ in range(HOLDERS):
            conn = connect(self.args)
            self.sessions.append(conn)
            with conn.cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute(f"SELECT * FROM {self.table} WHERE id = 1 LOCK IN SHARE MODE")
        for _ in range(WAITERS):
            conn = connect(self.args, read_timeout=900)
            self.sessions.append(conn)
            with conn.cursor() as cursor:
                cursor.execute("SET SESSION innodb_lock_wait_timeout = 600")

            def wait(conn: pymysql.connections.Connection[Any] = conn) -> None:
                try:
                    with conn.cursor() as cursor:
                        cursor.execute(f"UPDATE {self.table} SET v = v + 1 WHERE id = 1")
                except pymysql.Error:
                    pass  # killed at the end

            thread = threading.Thread(target=wait, daemon=True)
            thread.start()
            self.threads.append(thread)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(0.3)
            waiting = self.run(
                "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"
            )[0][0]
            if waiting >= WAITERS:
                break
        time.sleep(0.3)
        return int(self.run("SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS")[0][0])

    def stop(self) -> None:
        for conn in self.sessions:
            with contextlib.suppress(pymysql.Error):
                self.run(f"KILL {int(conn.thread_id())}")  # type: ignore[no-untyped-call]
        for thread in self.threads:
            thread.join(10)
        self.run(f"DROP TABLE IF EXISTS {self.table}")
        self.admin.close()


def baseline_poll(conn: pymysql.connections.Connection[Any]) -> int:
    rows = 0
    with conn.cursor() as cursor:
        for sql in (INNOTOP_PROCESSLIST, INNOTOP_BLOCKED_BLOCKER, DOLPHIE_PL_QUERY):
            cursor.execute(sql)
            rows += len(cursor.fetchall())
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--rounds", type=int, default=15)
    options = parser.parse_args()
    endpoint = parse(options.dsn, {})
    args = endpoint.connect_args(10)
    load = Load(args)
    try:
        edges = load.start()
        print(f"load: {HOLDERS} shared holders, {WAITERS} waiters, {edges} INNODB_LOCK_WAITS rows")
        server = MyServer(endpoint, idle_after=3600)
        baseline = connect(args)
        # Both warm: connected, first poll done (InnoDB's cache is refreshed between rounds).
        polled = server.poll()
        assert polled.locks is not None, polled.statuses
        baseline_rows = baseline_poll(baseline)
        ours: list[float] = []
        theirs: list[float] = []
        locks = 0
        for _ in range(options.rounds):
            time.sleep(0.15)
            started = time.perf_counter()
            polled = server.poll()
            assert polled.locks is not None
            judge(polled.locks, StaticProcesses(), SystemClock().now(), "bench")
            ours.append(time.perf_counter() - started)
            locks = len(polled.locks)
            time.sleep(0.15)
            started = time.perf_counter()
            baseline_rows = baseline_poll(baseline)
            theirs.append(time.perf_counter() - started)
        server.close()
        baseline.close()
    finally:
        load.stop()
    ours_ms = statistics.median(ours) * 1000
    theirs_ms = statistics.median(theirs) * 1000
    ratio = statistics.median(o / t for o, t in zip(ours, theirs, strict=True))
    print(f"lockwatch poll (rows -> {locks} judged locks): median {ours_ms:.1f} ms")
    print(f"baseline (innotop + dolphie queries, {baseline_rows} rows): median {theirs_ms:.1f} ms")
    verdict = "ok" if ratio <= RATIO_TARGET else "OVER TARGET"
    print(f"median ratio {ratio:.2f} (target <= {RATIO_TARGET}): {verdict}")
    return 0 if ratio <= RATIO_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
