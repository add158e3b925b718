"""Lock tables the config names ([[locktables]]) on a real MariaDB (or MySQL): a
configured table in a database of the test's own is listed, judged, broken as
configured by a compare-and-swap UPDATE that is refused when the row changed
after the operator saw it, and audited. A name the config gives for another
database's table is no lock table here."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import pytest

from lockwatch.actions.audit import AuditLog, Operator
from lockwatch.actions.plan import Kind
from lockwatch.actions.run import Executor
from lockwatch.actions.targets import find, prepare
from lockwatch.clock import SystemClock
from lockwatch.sources.contract import Wanted
from lockwatch.sources.mysql.tableactions import ACTIONS
from lockwatch.sources.registry import load_config
from tests.conftest import run_cli
from tests.mysql.conftest import GROUP, connect, endpoint_of, past_last_change

pytestmark = [pytest.mark.mysql, GROUP]

CONFIG = """
[[locktables]]
table = "{database}.deploy_lock"
locked = "HELD"   # MySQL's column names are not case-sensitive: spelled as the table does
holder = "owner"
since = "taken_at"
key = "name"
unlocked = false
"""


@pytest.fixture
def scratch(my_dsn: str) -> Iterator[tuple[str, str]]:
    """A database of this test's own with a deploy-lock table: (DSN, database)."""
    name = f"lw_cfg_{uuid.uuid4().hex[:10]}"
    endpoint = endpoint_of(my_dsn)
    with connect(endpoint, autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{name}`")
        cursor.execute(
            f"CREATE TABLE `{name}`.deploy_lock (name VARCHAR(40) PRIMARY KEY,"
            " held BOOLEAN NOT NULL, owner VARCHAR(80) NULL, taken_at DATETIME(6) NULL)"
        )
        cursor.execute(
            f"INSERT INTO `{name}`.deploy_lock VALUES"
            " ('prod', TRUE, 'alice@ci-7', NOW(6) - INTERVAL 90 SECOND),"
            " ('staging', FALSE, NULL, NULL)"
        )
    past_last_change(endpoint, name, "deploy_lock")  # its break can tell a later change
    try:
        yield urlunsplit(urlsplit(my_dsn)._replace(path=f"/{name}")), name
    finally:
        with connect(endpoint) as conn, conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")


def _lw(*args: str, dsn: str, config: Path) -> tuple[int, str, str]:
    env = cast(dict[str, str], {"MYSQL_PWD": "", "LOCKWATCH_READONLY": "", "LOCKWATCH_MYSQL": None})
    return run_cli(*args, "--config", str(config), "--mysql", dsn, env=env)


def table_locks(dsn: str, config: Path, database: str) -> list[dict[str, Any]]:
    code, out, err = _lw("ls", "--json", dsn=dsn, config=config)
    assert code in (0, 3), err
    return [
        lock
        for lock in json.loads(out)["locks"]
        if lock["format"] == "lock-table" and lock["lock_table"]["table"].startswith(database)
    ]


def rows(dsn: str, database: str) -> list[tuple[Any, ...]]:
    with connect(endpoint_of(dsn)) as conn, conn.cursor() as cursor:
        cursor.execute(f"SELECT name, held, owner, taken_at FROM `{database}`.deploy_lock")
        return sorted(cursor.fetchall())


def test_a_configured_table_is_listed_judged_broken_by_cas_and_audited(
    scratch: tuple[str, str], tmp_path: Path
) -> None:
    dsn, database = scratch
    config = tmp_path / "lockwatch.toml"
    config.write_text(CONFIG.format(database=database))

    (lock,) = table_locks(dsn, config, database)
    assert lock["state"] == "unknown", lock
    assert [r["code"] for r in lock["reasons"]] == ["nothing_running"]
    assert lock["holder"]["actor"] == "alice@ci-7"
    assert lock["lock_table"]["tool"] == "table" and lock["lock_table"]["key"] == "prod"
    assert lock["lock_table"]["table"] == f"{database}.deploy_lock"
    assert lock["lock_table"]["row"]["owner"] == "alice@ci-7"
    assert 85 <= lock["age_seconds"] < 200, lock

    # The operator saw alice's row; bob took the lock again before the break ran:
    # the UPDATE matches no row, and nothing changes.
    wanted = Wanted((), {"mysql_dsns": (dsn,)}, load_config(config), {"MYSQL_PWD": ""})
    found = find(lock["id"], wanted, "host")
    assert not isinstance(found, str), found
    seen, verdict, peers = found
    plan = prepare(Kind.BREAK, seen, verdict, peers=peers)
    assert plan.refusal is None, plan.refusal
    sets = "SET held = FALSE, owner = NULL, taken_at = NULL"  # `HELD` as the table spells it
    assert plan.effect.startswith(f"UPDATE {database}.deploy_lock {sets} on ")
    assert "only where the row is still exactly as seen" in plan.effect
    with connect(endpoint_of(dsn), autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(
            f"UPDATE `{database}`.deploy_lock SET owner = 'bob@ci-8', taken_at = NOW(6)"
            " WHERE name = 'prod'"
        )
    before = rows(dsn, database)
    log = tmp_path / "audit.jsonl"
    operator = Operator("op", "op", None)
    audit = AuditLog(log, clock=SystemClock(), host="h", operator=operator)
    reach = ACTIONS.reach(wanted)  # how the CLI's break reaches the server
    outcome = Executor(audit, **reach).run(plan, "stuck deploy, INC-9", force=True)
    assert not outcome.ok and outcome.code == "changed", outcome.message
    assert "changed since you looked" in outcome.message
    assert rows(dsn, database) == before

    # Listed again (bob's row), and broken: what the config's `unlocked` says.
    past_last_change(endpoint_of(dsn), database, "deploy_lock")
    (lock,) = table_locks(dsn, config, database)
    assert lock["holder"]["actor"] == "bob@ci-8"
    code, out, err = _lw(
        "break", lock["id"], "--yes", "--force", "--audit-log", str(log), "--reason", "INC-9",
        dsn=dsn, config=config,
    )  # fmt: skip
    assert code == 0, err
    assert f"unlocked {database}.deploy_lock" in out
    assert rows(dsn, database) == [("prod", 0, None, None), ("staging", 0, None, None)]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["event"] for r in records] == [
        "action_intent",
        "action_refused",
        "action_intent",
        "lock_broken",
    ]
    done = records[-1]
    assert done["target"]["table"] == f"{database}.deploy_lock"
    assert done["target"]["row"]["owner"] == "bob@ci-8"
    assert done["rows"] == 1 and done["unlock"] == {
        "held": "false",
        "owner": "null",
        "taken_at": "null",
    }
    assert table_locks(dsn, config, database) == []


def test_an_entry_for_another_database_or_without_unlocked(
    scratch: tuple[str, str], tmp_path: Path
) -> None:
    dsn, database = scratch
    config = tmp_path / "lockwatch.toml"
    # Another database's deploy_lock: this one is not it (and not knex's either,
    # for all its name ends in _lock).
    config.write_text(CONFIG.format(database="elsewhere"))
    assert table_locks(dsn, config, database) == []
    config.write_text("")
    assert table_locks(dsn, config, database) == []
    # A configured column the table does not have: not the table meant.
    config.write_text(CONFIG.format(database=database).replace('"owner"', '"holder_name"'))
    assert table_locks(dsn, config, database) == []

    config.write_text(CONFIG.format(database=database).replace("unlocked = false\n", ""))
    past_last_change(endpoint_of(dsn), database, "deploy_lock")
    (lock,) = table_locks(dsn, config, database)
    code, _, err = _lw(
        "break", lock["id"], "--yes", "--force", "--audit-log", str(tmp_path / "a.jsonl"),
        "--reason", "x", dsn=dsn, config=config,
    )  # fmt: skip
    assert code != 0 and "unlocked" in err, err
    assert rows(dsn, database)[0][1] == 1


def test_a_table_named_like_the_entry_but_for_case_is_not_it(
    scratch: tuple[str, str], tmp_path: Path
) -> None:
    """The catalog compares names without regard to case (MariaDB's
    information_schema); a server whose table names keep their case
    (lower_case_table_names = 0) has `Deploy_Lock` beside `deploy_lock`, and the
    entry names the second alone: the first is never listed nor broken as it."""
    dsn, database = scratch
    with connect(endpoint_of(dsn), autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT @@lower_case_table_names")
        (folds,) = cursor.fetchone()
        if folds:
            pytest.skip("this server folds table names' case: no two such tables can exist")
        cursor.execute(f"CREATE TABLE `{database}`.Deploy_Lock LIKE `{database}`.deploy_lock")
        cursor.execute(
            f"INSERT INTO `{database}`.Deploy_Lock VALUES ('other', TRUE, 'bob@ci-9', NOW(6))"
        )
    config = tmp_path / "lockwatch.toml"
    config.write_text(CONFIG.format(database=database))
    listed = table_locks(dsn, config, database)
    assert {lock["lock_table"]["table"] for lock in listed} == {f"{database}.deploy_lock"}, listed
