"""knex's migration lock (`knex_migrations_lock.is_locked`) on a real PostgreSQL,
with the real knex CLI from npm: a run at work, a run SIGKILLed mid-way, and the
break that does what `knex migrate:unlock` does, each checked against knex's own
answer (a second `knex migrate:latest` refused, then let through).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from psycopg import conninfo, sql

from tests.conftest import run_cli
from tests.npm import npm_packages
from tests.postgres.conftest import WAIT_S, connect, wait_until

pytestmark = pytest.mark.postgres

KNEXFILE = """
module.exports = {
  client: 'pg',
  connection: process.env.KNEX_URL,
  migrations: { directory: __dirname + '/migrations' },
};
"""
# A migration outside a transaction (knex then commits is_locked = 1 before it
# runs, as in knex issues #1217 and #5086) that works until told to stop.
NO_TRANSACTION = """
exports.config = { transaction: false };
exports.up = async () => {
  process.stdout.write('migrating\\n');
  await new Promise((resolve) => setTimeout(resolve, Number(process.env.SLEEP_MS)));
};
exports.down = async () => {};
"""
# A migration in knex's default transaction: the lock row is updated in it, so
# is_locked = 1 is never committed while it runs.
IN_TRANSACTION = """
exports.up = async (knex) => {
  process.stdout.write('migrating\\n');
  await knex.raw('SELECT pg_sleep(' + Number(process.env.SLEEP_MS) / 1000 + ')');
};
exports.down = async () => {};
"""
CLEAN_ENV = {
    name: None for name in ("LOCKWATCH_PG", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGSERVICE")
}


@pytest.fixture(scope="module")
def knex_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return npm_packages(tmp_path_factory, "knex@3", "pg@8")


@pytest.fixture
def scratch(pg_dsn: str) -> Iterator[str]:
    """A database of this test's own (knex's tables live in its public schema)."""
    name = f"lw_knex_{uuid.uuid4().hex[:10]}"
    with connect(pg_dsn, "lw-test-setup") as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield conninfo.make_conninfo(pg_dsn, dbname=name)
    finally:
        with connect(pg_dsn, "lw-test-setup") as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


class Project:
    """A knex project (knexfile and one migration) against one database."""

    def __init__(self, root: Path, knex_dir: Path, dsn: str, migration: str) -> None:
        self.root = root
        self.dsn = dsn
        (root / "migrations").mkdir()
        (root / "knexfile.js").write_text(KNEXFILE)
        (root / "migrations" / "001_work.js").write_text(migration)
        (root / "node_modules").symlink_to(knex_dir / "node_modules")
        self.cli = str(knex_dir / "node_modules" / "knex" / "bin" / "cli.js")
        self.started: list[subprocess.Popen[str]] = []

    def _env(self, sleep_ms: int) -> dict[str, str]:
        url = conninfo.make_conninfo(self.dsn)
        # knex's pg client takes a URL or a libpq keyword string alike.
        return {**os.environ, "KNEX_URL": _url(url), "SLEEP_MS": str(sleep_ms)}

    def start(self, sleep_ms: int = 600_000) -> subprocess.Popen[str]:
        """`knex migrate:latest`, running until its migration has begun."""
        proc = subprocess.Popen(
            ["node", self.cli, "migrate:latest", "--knexfile", "knexfile.js"],
            cwd=self.root,
            env=self._env(sleep_ms),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # bounded: the run is killed at teardown
        assert line.strip() == "migrating", line
        return proc

    def latest(self) -> subprocess.CompletedProcess[str]:
        """knex's own answer: `knex migrate:latest` run to its end."""
        return self.run("migrate:latest")

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        """`knex COMMAND` (migrate:latest, migrate:unlock, …) run to its end."""
        return subprocess.run(
            ["node", self.cli, command, "--knexfile", "knexfile.js"],
            cwd=self.root,
            env=self._env(0),
            capture_output=True,
            text=True,
            timeout=WAIT_S * 6,
            check=False,
        )

    def stop(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            proc.wait(WAIT_S)


def _url(keywords: str) -> str:
    parts = conninfo.conninfo_to_dict(keywords)
    user = parts.get("user") or "postgres"
    password = f":{parts['password']}" if parts.get("password") else ""
    host = parts.get("host") or "127.0.0.1"
    return f"postgresql://{user}{password}@{host}:{parts.get('port') or 5432}/{parts['dbname']}"


@pytest.fixture
def project(tmp_path: Path, knex_dir: Path, scratch: str) -> Iterator[Any]:
    made: list[Project] = []

    def make(migration: str) -> Project:
        root = tmp_path / f"p{len(made)}"
        root.mkdir()
        made.append(Project(root, knex_dir, scratch, migration))
        return made[-1]

    try:
        yield make
    finally:
        for one in made:
            one.stop()


def _lw(*args: str, dsn: str) -> tuple[int, str, str]:
    # CliRunner unsets a variable given as None.
    return run_cli(*args, "--pg", dsn, env=cast(dict[str, str], dict(CLEAN_ENV)))


def table_locks(dsn: str) -> list[dict[str, Any]]:
    code, out, err = _lw("ls", "--json", dsn=dsn)
    assert code in (0, 3), err
    return [lock for lock in json.loads(out)["locks"] if lock["format"] == "lock-table"]


def others_in(dsn: str) -> list[int]:
    """Backends of the database other than the caller's."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        ).fetchall()
    return [row[0] for row in rows]


def is_locked(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT is_locked FROM knex_migrations_lock").fetchone()
    assert row is not None
    return int(row[0])


def test_a_run_at_work_is_active_then_killed_it_is_unknown_and_a_break_lets_knex_run(
    project: Any, tmp_path: Path
) -> None:
    knex = project(NO_TRANSACTION)
    runner = knex.start()
    assert is_locked(knex.dsn) == 1
    # While it runs: knex refuses a second runner, and lockwatch sees it at work.
    second = knex.latest()
    assert second.returncode != 0 and "Migration table is already locked" in second.stderr
    (running,) = table_locks(knex.dsn)
    assert running["state"] == "active", running
    codes = [reason["code"] for reason in running["reasons"]]
    assert codes == ["tool_running", "no_holder_recorded"], running
    assert running["lock_table"]["at_work"], running

    # SIGKILLed mid-way: knex's row stays, and knex refuses every run.
    runner.send_signal(signal.SIGKILL)
    runner.wait(WAIT_S)
    wait_until(lambda: not others_in(knex.dsn), "the killed runner's sessions to end")
    assert is_locked(knex.dsn) == 1
    refused = knex.latest()
    assert refused.returncode != 0 and "Migration table is already locked" in refused.stderr

    (left,) = table_locks(knex.dsn)
    assert left["state"] == "unknown", left  # never a confident stale: no holder is recorded
    assert [reason["code"] for reason in left["reasons"]] == [
        "nothing_running",
        "no_holder_recorded",
    ]
    assert "knex migrate:unlock" in left["reasons"][0]["message"]
    assert left["holder"]["pid"] is None and left["lock_table"]["row"]["is_locked"] == 1
    assert left["id"] == running["id"]  # the same lock across polls

    log = tmp_path / "audit.jsonl"
    base = ("break", left["id"], "--yes", "--audit-log", str(log), "--reason", "killed deploy")
    code, _, err = _lw(*base, dsn=knex.dsn)
    assert code != 0 and "--force" in err  # unknown: the operator must mean it
    assert is_locked(knex.dsn) == 1
    code, _, err = _lw(*base, "--force", dsn=knex.dsn)
    assert code == 0, err
    assert is_locked(knex.dsn) == 0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    broken = [r for r in records if r["event"] == "lock_broken"]
    assert len(broken) == 1 and broken[0]["reason"] == "killed deploy"
    assert broken[0]["target"]["table"] == "public.knex_migrations_lock"

    # knex's own answer: the next run goes through.
    done = knex.latest()
    assert done.returncode == 0, done.stderr
    assert table_locks(knex.dsn) == []


def test_a_reader_of_a_killed_runs_lock_table_is_no_tool_at_work(project: Any) -> None:
    """Anyone reads knex's tables: `knex migrate:status`, an operator's select left
    idle, another's in an open transaction. None of them is the run at work."""
    knex = project(NO_TRANSACTION)
    runner = knex.start()
    runner.kill()
    runner.wait(WAIT_S)
    wait_until(lambda: not others_in(knex.dsn), "the killed runner's sessions to end")
    knex.run("migrate:status")  # knex's own reader, run to its end
    with (
        psycopg.connect(knex.dsn, autocommit=True) as idle,
        psycopg.connect(knex.dsn) as in_transaction,
    ):
        idle.execute("select * from knex_migrations_lock").fetchall()
        idle.execute('select * from "knex_migrations" order by "id"').fetchall()
        in_transaction.execute("SELECT * FROM knex_migrations_lock").fetchall()
        (lock,) = table_locks(knex.dsn)
    assert lock["state"] == "unknown", lock
    assert [r["code"] for r in lock["reasons"]] == ["nothing_running", "no_holder_recorded"]
    assert lock["lock_table"]["at_work"] == []


def test_a_break_of_a_row_that_changed_since_it_was_listed_is_refused(
    project: Any, tmp_path: Path
) -> None:
    knex = project(NO_TRANSACTION)
    runner = knex.start()
    runner.kill()
    runner.wait(WAIT_S)
    wait_until(lambda: not others_in(knex.dsn), "the killed runner's sessions to end")
    (listed,) = table_locks(knex.dsn)
    # Someone ran knex migrate:unlock, and a new run took the lock (in another row
    # shape: knex's own unlock then a lock by hand, index changed).
    with psycopg.connect(knex.dsn, autocommit=True) as conn:
        conn.execute('UPDATE knex_migrations_lock SET "index" = 2')
    log = tmp_path / "audit.jsonl"
    code, _, _ = _lw(
        "break", listed["id"], "--yes", "--force", "--audit-log", str(log), "--reason", "x",
        dsn=knex.dsn,
    )  # fmt: skip
    assert code != 0
    assert is_locked(knex.dsn) == 1  # nothing touched
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records[-1]["event"] == "action_refused", records[-1]


def test_a_run_in_one_transaction_is_held_by_its_session_and_a_break_waits_for_nobody(
    project: Any, tmp_path: Path
) -> None:
    knex = project(IN_TRANSACTION)
    knex.start()
    # knex's lock is the row's update in the run's open transaction: others read 0.
    wait_until(lambda: bool(table_locks(knex.dsn)), "lockwatch to see the run's row lock")
    (held,) = table_locks(knex.dsn)
    assert held["state"] == "active", held
    assert held["lock_table"]["row"]["is_locked"] == 0
    pid = held["lock_table"]["in_transaction"]
    assert pid in others_in(knex.dsn)
    # knex's own answer: a second runner cannot take it (it waits on the row).
    log = tmp_path / "audit.jsonl"
    code, _, err = _lw(
        "break", held["id"], "--yes", "--force", "--audit-log", str(log), "--reason", "x",
        dsn=knex.dsn,
    )  # fmt: skip
    assert code != 0 and "open transaction" in err, err
