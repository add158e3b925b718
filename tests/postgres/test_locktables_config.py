"""Lock tables the config names ([[locktables]]), on a real PostgreSQL: read,
judged, broken as configured; and the config's mistakes refused in one line."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from psycopg import conninfo, sql

from lockwatch.config import ConfigError
from lockwatch.sources.locktables.config import TableSpec, read_specs
from tests.conftest import run_cli
from tests.postgres.conftest import connect

pytestmark = pytest.mark.postgres

CLEAN_ENV = {
    name: None for name in ("LOCKWATCH_PG", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGSERVICE")
}
CONFIG = """
[[locktables]]
table = "ops.deploy_lock"
locked = "held"
holder = "owner"
since = "taken_at"
key = "name"
unlocked = false
"""


@pytest.fixture
def scratch(pg_dsn: str) -> Iterator[str]:
    name = f"lw_cfg_{uuid.uuid4().hex[:10]}"
    with connect(pg_dsn, "lw-test-setup") as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = conninfo.make_conninfo(pg_dsn, dbname=name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE SCHEMA ops; CREATE TABLE ops.deploy_lock (name text PRIMARY KEY,"
            " held boolean NOT NULL, owner text, taken_at timestamptz);"
            " INSERT INTO ops.deploy_lock VALUES"
            " ('prod', true, 'alice@ci-7', now() - interval '90 seconds'),"
            " ('staging', false, NULL, NULL)"
        )
    try:
        yield dsn
    finally:
        with connect(pg_dsn, "lw-test-setup") as admin:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            admin.execute(drop.format(sql.Identifier(name)))


def _lw(*args: str, dsn: str, config: Path) -> tuple[int, str, str]:
    env = cast(dict[str, str], dict(CLEAN_ENV))  # CliRunner unsets a variable given as None
    return run_cli(*args, "--config", str(config), "--pg", dsn, env=env)


def test_a_configured_table_is_listed_and_broken_as_configured(
    scratch: str, tmp_path: Path
) -> None:
    config = tmp_path / "lockwatch.toml"
    config.write_text(CONFIG)
    code, out, err = _lw("ls", "--json", dsn=scratch, config=config)
    assert code in (0, 3), err
    (lock,) = [lock for lock in json.loads(out)["locks"] if lock["format"] == "lock-table"]
    assert lock["state"] == "unknown" and lock["holder"]["actor"] == "alice@ci-7"
    assert lock["lock_table"]["key"] == "prod" and lock["lock_table"]["table"] == "ops.deploy_lock"
    assert 85 <= lock["age_seconds"] < 200, lock
    log = tmp_path / "audit.jsonl"
    code, _, err = _lw(
        "break", lock["id"], "--yes", "--force", "--audit-log", str(log), "--reason", "x",
        dsn=scratch, config=config,
    )  # fmt: skip
    assert code == 0, err
    with psycopg.connect(scratch, autocommit=True) as conn:
        rows = conn.execute("SELECT name, held, owner, taken_at FROM ops.deploy_lock").fetchall()
    assert sorted(rows) == [("prod", False, None, None), ("staging", False, None, None)]


def test_without_a_config_the_table_is_not_a_lock_table(scratch: str, tmp_path: Path) -> None:
    config = tmp_path / "lockwatch.toml"
    config.write_text("")
    code, out, err = _lw("ls", "--json", dsn=scratch, config=config)
    assert code in (0, 3), err
    assert [lock for lock in json.loads(out)["locks"] if lock["format"] == "lock-table"] == []


def test_a_configured_table_without_unlocked_cannot_be_broken(scratch: str, tmp_path: Path) -> None:
    config = tmp_path / "lockwatch.toml"
    config.write_text(CONFIG.replace("unlocked = false\n", ""))
    code, out, _ = _lw("ls", "--json", dsn=scratch, config=config)
    (lock,) = [lock for lock in json.loads(out)["locks"] if lock["format"] == "lock-table"]
    code, _, err = _lw(
        "break", lock["id"], "--yes", "--force", "--audit-log", str(tmp_path / "a.jsonl"),
        "--reason", "x", dsn=scratch, config=config,
    )  # fmt: skip
    assert code != 0 and "unlocked" in err, err


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"locked": "held"}, "`table` is required"),
        ({"table": "t"}, "`locked` is required"),
        ({"table": "t; DROP TABLE x", "locked": "held"}, "plain SQL name"),
        ({"table": "t", "locked": "held", "unlocked": "NULL); --"}, "unlocked must be one of"),
        ({"table": "t", "locked": "held", "colour": "red"}, "unknown key 'colour'"),
    ],
)
def test_config_mistakes_are_refused_naming_them(entry: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(")", r"\)")):
        read_specs([entry], "lockwatch.toml")


def test_config_entries_are_read() -> None:
    specs = read_specs(
        [{"table": "ops.deploy_lock", "locked": "held", "unlocked": 0}], "lockwatch.toml"
    )
    assert specs == (TableSpec("ops.deploy_lock", "held", unlocked="0"),)
