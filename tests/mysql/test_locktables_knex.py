"""knex's migration lock on a real MySQL/MariaDB, with the real knex CLI and the
mysql2 driver from npm: a run SIGKILLed mid-way leaves `is_locked = 1`, knex
refuses every run, lockwatch lists it (unknown, no holder recorded), and its
break (what `knex migrate:unlock` does) lets the next `knex migrate:latest` through.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import pymysql
import pytest

from tests.conftest import run_cli
from tests.mysql.conftest import (
    GROUP,
    WAIT_S,
    connect,
    endpoint_of,
    past_last_change,
    tid,
    wait_until,
)
from tests.npm import npm_packages
from tests.postgres.test_locktables_knex import Project

pytestmark = [pytest.mark.mysql, GROUP]

KNEXFILE = """
module.exports = {
  client: 'mysql2',
  connection: process.env.KNEX_URL,
  migrations: { directory: __dirname + '/migrations' },
};
"""
# Outside a transaction: knex commits is_locked = 1 before the migration runs.
MIGRATION = """
exports.config = { transaction: false };
exports.up = async () => {
  process.stdout.write('migrating\\n');
  await new Promise((resolve) => setTimeout(resolve, Number(process.env.SLEEP_MS)));
};
exports.down = async () => {};
"""


@pytest.fixture(scope="module")
def knex_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return npm_packages(tmp_path_factory, "knex@3", "mysql2@3")


@pytest.fixture
def scratch(my_dsn: str) -> Iterator[str]:
    """A database of this test's own: knex's tables live in it."""
    name = f"lw_knex_{uuid.uuid4().hex[:10]}"
    endpoint = endpoint_of(my_dsn)
    with connect(endpoint) as conn, conn.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{name}`")
    parts = urlsplit(my_dsn)
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with connect(endpoint) as conn, conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")


def _lw(*args: str, dsn: str) -> tuple[int, str, str]:
    env = cast(dict[str, str], {"MYSQL_PWD": "", "LOCKWATCH_READONLY": "", "LOCKWATCH_MYSQL": None})
    return run_cli(*args, "--mysql", dsn, env=env)


def table_locks(dsn: str) -> list[dict[str, Any]]:
    code, out, err = _lw("ls", "--json", dsn=dsn)
    assert code in (0, 3), err
    return [lock for lock in json.loads(out)["locks"] if lock["format"] == "lock-table"]


def is_locked(dsn: str) -> int:
    with connect(endpoint_of(dsn)) as conn, conn.cursor() as cursor:
        cursor.execute(f"SELECT is_locked FROM `{urlsplit(dsn).path[1:]}`.knex_migrations_lock")
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def others_in(dsn: str) -> list[int]:
    with connect(endpoint_of(dsn)) as conn, conn.cursor() as cursor:
        cursor.execute(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s AND ID <> CONNECTION_ID()",
            (urlsplit(dsn).path[1:],),
        )
        return [int(row[0]) for row in cursor.fetchall()]


def test_a_killed_knex_run_is_unknown_and_a_break_lets_knex_run(
    knex_dir: Path, scratch: str, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    (root / "migrations").mkdir(parents=True)
    (root / "knexfile.js").write_text(KNEXFILE)
    (root / "migrations" / "001_work.js").write_text(MIGRATION)
    (root / "node_modules").symlink_to(knex_dir / "node_modules")
    cli = str(knex_dir / "node_modules" / "knex" / "bin" / "cli.js")

    def knex(sleep_ms: int) -> subprocess.Popen[str]:
        env = {**os.environ, "KNEX_URL": scratch, "SLEEP_MS": str(sleep_ms)}
        return subprocess.Popen(
            ["node", cli, "migrate:latest", "--knexfile", "knexfile.js"],
            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    runner = knex(600_000)
    try:
        assert runner.stdout is not None
        assert runner.stdout.readline().strip() == "migrating"
        assert is_locked(scratch) == 1
    finally:
        runner.kill()
        runner.wait(WAIT_S)
    wait_until(lambda: not others_in(scratch), "the killed runner's connections to end")

    def latest() -> tuple[int, str]:
        proc = knex(0)
        _, err = proc.communicate(timeout=WAIT_S * 6)
        return proc.returncode, err

    code, err = latest()
    assert code != 0 and "Migration table is already locked" in err  # knex's own answer

    past_last_change(endpoint_of(scratch), urlsplit(scratch).path[1:], "knex_migrations_lock")
    (lock,) = table_locks(scratch)
    assert lock["state"] == "unknown", lock
    assert [r["code"] for r in lock["reasons"]] == ["nothing_running", "no_holder_recorded"]
    assert lock["lock_table"]["row"] == {"index": 1, "is_locked": 1}
    log = tmp_path / "audit.jsonl"
    code, _, err = _lw(
        "break", lock["id"], "--yes", "--force", "--audit-log", str(log), "--reason", "killed",
        dsn=scratch,
    )  # fmt: skip
    assert code == 0, err
    assert is_locked(scratch) == 0
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert events[-1] == "lock_broken"

    code, err = latest()
    assert code == 0, err  # knex's own answer: unlocked
    assert table_locks(scratch) == []


class MyProject(Project):
    """tests/postgres' knex project, with knex's mysql2 client."""

    def __init__(self, root: Path, modules: Path, dsn: str, migration: str) -> None:
        super().__init__(root, modules, dsn, migration)
        (root / "knexfile.js").write_text(KNEXFILE)

    def _env(self, sleep_ms: int) -> dict[str, str]:
        return {**os.environ, "KNEX_URL": self.dsn, "SLEEP_MS": str(sleep_ms)}


def test_a_reader_of_a_killed_runs_lock_table_is_no_tool_at_work(
    knex_dir: Path, scratch: str, tmp_path: Path
) -> None:
    """`knex migrate:status`, and an operator's select of knex's table still
    running (PROCESSLIST shows a statement while it runs): neither is the run."""
    (tmp_path / "project").mkdir()
    knex = MyProject(tmp_path / "project", knex_dir, scratch, MIGRATION)
    endpoint = endpoint_of(scratch)
    # On no database of its own (the killed run's connections are waited out by theirs).
    reader = connect(endpoint, database=None)
    database = urlsplit(scratch).path[1:]
    reading = threading.Thread(target=_read_slowly, args=(reader, database))
    try:
        runner = knex.start()
        runner.kill()
        runner.wait(WAIT_S)
        wait_until(lambda: not others_in(scratch), "the killed runner's connections to end")
        knex.run("migrate:status")  # knex's own reader, run to its end
        reading.start()
        wait_until(lambda: _running(endpoint, tid(reader)), "the reader's select to run")
        (lock,) = table_locks(scratch)
    finally:
        with connect(endpoint) as admin, admin.cursor() as cursor:
            cursor.execute(f"KILL QUERY {tid(reader)}")
        if reading.ident is not None:
            reading.join(WAIT_S)
        reader.close()
        knex.stop()
    assert lock["state"] == "unknown", lock
    assert [r["code"] for r in lock["reasons"]] == ["nothing_running", "no_holder_recorded"]
    assert lock["lock_table"]["at_work"] == []


def _read_slowly(reader: Any, database: str) -> None:
    with contextlib.suppress(pymysql.Error), reader.cursor() as cursor:
        cursor.execute(f"SELECT t.*, SLEEP(120) FROM `{database}`.knex_migrations_lock AS t")


def _running(endpoint: Any, thread: int) -> bool:
    with connect(endpoint) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT INFO FROM information_schema.PROCESSLIST WHERE ID = %s", (thread,))
        row = cursor.fetchone()
    return bool(row and row[0] and "knex_migrations_lock" in str(row[0]))
