"""`lockwatch ls --pg`: the whole command against a real server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.postgres.conftest import PgHarness

pytestmark = pytest.mark.postgres


run = run_cli


def mine(doc: dict[str, Any], pg: PgHarness) -> list[dict[str, Any]]:
    """This test's locks: the shared server may hold others'."""
    tag = pg.tag
    return [lock for lock in doc["locks"] if tag in (lock["holder"].get("application") or "")]


def test_json_has_pg_locks_sources_and_the_blocking_tree(pg: PgHarness) -> None:
    holder, waiter, second = pg.sessions("holder", "waiter", "second")
    holder.execute("SELECT pg_advisory_lock(1, 42)")
    holder.execute("SELECT pg_advisory_lock(-5)")
    pg.block(waiter, "SELECT pg_advisory_lock(1, 42)")
    pg.block(second, "SELECT pg_advisory_lock(-5)")
    code, out, _ = run("ls", "--json", "--pg", pg.dsn)
    assert code == 0
    doc = json.loads(out)
    (source,) = doc["sources"]  # --pg without PATH: no files
    assert source["kind"] == "postgres" and source["status"] == "connected"
    locks = mine(doc, pg)
    held = {lock["name"]: lock for lock in locks if lock["granted"]}
    waiting = [lock for lock in locks if not lock["granted"]]
    assert set(held) == {"1:42", "-5"}
    assert held["1:42"]["advisory_key"] == {"form": "pair", "key1": 1, "key2": 42}
    assert held["-5"]["advisory_key"] == {"form": "bigint", "key": -5}
    hpid = holder.info.backend_pid
    assert {lock["state"] for lock in waiting} == {"waiting"}
    assert all(lock["blocked_by"] == [hpid] for lock in waiting)
    assert sorted(held["1:42"]["blocking"]) == sorted(
        [waiter.info.backend_pid, second.info.backend_pid]
    )
    for lock in locks:
        assert lock["source"] == "postgres" and lock["format"] == "pg_locks"
        assert lock["path"] is None and lock["id"].startswith("pg:")
        for key in ("user", "application", "client", "state", "query", "backend_type"):
            assert key in lock["holder"]
    (tree,) = doc["blocking"]
    root = next(r for r in tree["roots"] if r["id"] == hpid)
    assert (root["blocks_directly"], root["blocks_in_total"]) == (2, 2)
    assert tree["cycles"] == []


def test_named_advisory_keys_from_the_config(pg: PgHarness, tmp_path: Path) -> None:
    from lockwatch.sources.postgres.facts import string_key, string_key_int32

    holder = pg.session("holder")
    holder.execute("SELECT pg_advisory_lock(1, 77)")
    # Seed 003's design: a bigint hashed from a string; its shipped code: the
    # second int of a pair, hashed to an int32.
    holder.execute("SELECT pg_advisory_lock(%s)", (string_key("billing-sync"),))
    holder.execute("SELECT pg_advisory_lock(2, %s)", (string_key_int32("channel:ops"),))
    holder.execute("SELECT pg_advisory_lock(1, %s)", (string_key_int32("agent-sync"),))
    config = tmp_path / "lockwatch.toml"
    config.write_text(
        '[advisory.namespaces]\n1 = "agent"\n'
        '[advisory]\nstrings = ["billing-sync"]\n'
        '[advisory.pair_strings]\n1 = ["agent-sync"]\n2 = ["channel:ops"]\n'
    )
    _, out, _ = run("ls", "--json", "--config", str(config), "--pg", pg.dsn)
    names = {lock["name"] for lock in mine(json.loads(out), pg)}
    assert names == {"agent:77", "billing-sync", "2:channel:ops", "agent:agent-sync"}


def test_a_holder_whose_client_is_gone_fails_on_stale(pg: PgHarness) -> None:
    client = pg.client_process(
        ("holder", ["SELECT pg_advisory_lock(9, 9)"]), then=(0, "SELECT pg_sleep(600)")
    )
    client.kill()
    code, out, _ = run("ls", "--json", "--fail-on-stale", "--pg", pg.dsn)
    assert code == 3
    (lock,) = mine(json.loads(out), pg)
    assert lock["state"] == "stale"
    assert [r["code"] for r in lock["reasons"]] == ["client_dead"]
    assert lock["holder"]["client_process"]["alive"] is False


def test_an_idle_holder_whose_client_lives_is_not_stale(pg: PgHarness) -> None:
    holder = pg.session("holder")
    holder.execute("SELECT pg_advisory_lock(9, 10)")
    pg.wait_state(holder.info.backend_pid, "idle", longer_than=0.3)
    code, out, _ = run("ls", "--json", "--fail-on-stale", "--pg-idle-after", "0.2", "--pg", pg.dsn)
    assert code == 0
    (lock,) = mine(json.loads(out), pg)
    assert lock["state"] == "active"
    assert [r["code"] for r in lock["reasons"]] == ["idle_holder", "client_alive"]


def test_table_shows_pg_locks(pg: PgHarness) -> None:
    holder = pg.session("holder")
    holder.execute("SELECT pg_advisory_lock(3, 4)")
    code, out, _ = run("ls", "-l", "--pg", pg.dsn)
    assert code == 0
    row = next(line for line in out.splitlines() if " 3:4 " in line)
    assert row.split()[:2] == ["active", "pg_locks"]
    # The session by name, as the dashboard says it (issue 46, item 5), not pid@host.
    assert f" {pg.application('holder')} idle" in row, row
    # PostgreSQL keeps no grant time: the AGE column gives a bound, never an age.
    assert re.search(r" [≥≤] \d+(\.\d)?[smhd]", row), row


def test_server_down_is_reported_and_never_shows_the_password(tmp_path: Path) -> None:
    dsn = "postgresql://postgres:hunter2-secret@127.0.0.1:1/postgres"
    (tmp_path / "a.lock").write_text("")
    code, out, err = run("ls", "--json", "--pg", dsn, str(tmp_path))
    assert code == 1  # the files were listed; the server could not be polled
    doc = json.loads(out)
    assert len(doc["locks"]) == 1
    pg_source = next(s for s in doc["sources"] if s["kind"] == "postgres")
    assert pg_source["status"] in ("disconnected", "error")
    assert pg_source["reason"]
    assert "hunter2" not in out + err
    _, table, table_err = run("ls", "--pg", dsn, str(tmp_path))
    assert "hunter2" not in table + table_err


def test_dsn_from_lockwatch_pg(pg: PgHarness, tmp_path: Path) -> None:
    holder = pg.session("holder")
    holder.execute("SELECT pg_advisory_lock(5, 6)")
    code, out, _ = run("ls", "--json", str(tmp_path), env={"LOCKWATCH_PG": pg.dsn})
    assert code == 0
    assert [lock["name"] for lock in mine(json.loads(out), pg)] == ["5:6"]


async def test_rendering_shared_among_processes_matches_one_process(
    pg: PgHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockwatch.sources.postgres import listing as cli_pg
    from lockwatch.sources.postgres.source import PgSource

    holders = pg.sessions("a", "b", "c")
    for n, conn in enumerate(holders):
        for key in range(20):
            conn.execute("SELECT pg_advisory_lock(%s, %s)", (n, key))
    pg.block(pg.session("waiter"), "SELECT pg_advisory_lock(0, 3)")
    source = PgSource(pg.dsn)
    try:
        snapshot = await source.poll()
    finally:
        await source.close()
    assert snapshot is not None
    monkeypatch.setattr(cli_pg, "MIN_ROWS_PER_JOB", 1)
    now = snapshot.polled_at
    one = cli_pg.render(snapshot, now, "host", 1)
    for jobs in (2, 3, 7):
        many = cli_pg.render(snapshot, now, "host", jobs)
        assert many.array == one.array
        assert many.stale == one.stale
        assert [lock.id for lock in many.waiting] == [lock.id for lock in one.waiting]
    assert len(json.loads(one.array)) >= 61
