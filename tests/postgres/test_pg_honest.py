"""PostgreSQL, honestly (issue 13), against a real server and real client programs:
a dedicated lock connection idle while its program works is not a leak; a pooled
connection that keeps working holds its lock for ever longer, and no age is made up;
a monitor that may not see a session says `unknown` and the grant; a forgotten
prepared transaction goes stale and says how to end it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from lockwatch.actions.audit import read_records
from lockwatch.model import codec
from lockwatch.model.changes import Entry, judge
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.report import lock_record, records_json_array
from lockwatch.model.verdict import State
from lockwatch.sources.postgres.facts import AdvisoryKey
from lockwatch.sources.postgres.feed import PgFeed
from lockwatch.sources.postgres.held import held_bounds
from tests.conftest import run_cli
from tests.facts_of import PgLock, pg_of
from tests.postgres.conftest import Cluster, PgHarness, connect, monitor, poll_ok

pytestmark = pytest.mark.postgres

HOST = "testhost"


def mine(doc: dict[str, Any], pg: PgHarness) -> list[dict[str, Any]]:
    """This test's locks (by application name): the server may hold others'."""
    return [lock for lock in doc["locks"] if pg.tag in (lock["holder"].get("application") or "")]


def ls(pg: PgHarness, *args: str, dsn: str | None = None) -> tuple[int, list[dict[str, Any]]]:
    code, out, err = run_cli("ls", "--json", *args, "--pg", dsn or pg.dsn)
    assert code in (0, 3), err
    return code, mine(json.loads(out), pg)


def codes(lock: dict[str, Any]) -> list[str]:
    return [reason["code"] for reason in lock["reasons"]]


def held_row(pg: PgHarness, pid: int) -> bool:
    return bool(
        pg.admin.execute(
            "SELECT 1 FROM pg_locks WHERE pid = %s AND locktype = 'advisory' AND granted", (pid,)
        ).fetchone()
    )


# --------------------------------------------------------------------------- a live client


def test_a_dedicated_lock_connection_is_not_a_leak_while_its_program_lives(
    pg: PgHarness, tmp_path: Path
) -> None:
    """Seed 003's pattern (and SQLAlchemy's autobegin): the lock is taken on a connection
    of its own, left idle in a transaction, while the program works on another."""
    client = pg.client_process(
        ("lock", ["BEGIN", "SELECT pg_advisory_lock(1, 4711)"]),
        ("work", []),
        then=(1, "SELECT pg_sleep(600)"),
    )
    lock_pid, _ = client.backends
    waiter = pg.session("waiter")
    w = waiter.info.backend_pid
    blocked = pg.block(waiter, "SELECT pg_advisory_lock(1, 4711)")
    pg.wait_state(lock_pid, "idle in transaction", longer_than=0.3)

    code, locks = ls(pg, "--fail-on-stale", "--pg-idle-after", "0.2")

    assert code == 0  # nothing stale
    (held,) = [lock for lock in locks if lock["holder"]["pid"] == lock_pid]
    assert held["state"] == "active"
    assert codes(held) == ["idle_in_transaction", "client_alive", "blocking"]
    process = held["holder"]["client_process"]
    assert process["pid"] == client.pid and process["alive"] is True
    assert "-c" in process["cmdline"]  # the client program, as it was started
    # PostgreSQL keeps no grant time: bounds, never an age.
    assert held["age_seconds"] is None and held["acquired_at"] is None
    assert held["held_at_least_seconds"] >= 0.3
    assert held["held_at_most_seconds"] >= held["held_at_least_seconds"]

    # `lockwatch break` without --force leaves it alone; the confirmation counts
    # every lock the backend holds and says who would go ahead.
    log = tmp_path / "audit.jsonl"
    code, out, err = run_cli(
        "break", held["id"], "--reason", "looks leaked", "--yes",
        "--audit-log", str(log), "--pg", pg.dsn,
    )  # fmt: skip
    assert code == 1, (out, err)
    assert "refused" in err and "--force" in err
    ((_, refused, _),) = list(read_records(log))
    assert refused is not None and refused["code"] == "not_stale"
    assert "releases all 2 locks it holds (1 advisory, 1 virtualxid)" in refused["effect"]
    assert f"waiter {w} ({pg.application('waiter')}) proceeds" in refused["effect"]
    assert held_row(pg, lock_pid) and not blocked.done.is_set()

    # The program dies: its idle lock connection notices at once and lets go.
    client.kill()
    blocked.wait_done()
    assert blocked.error is None
    code, locks = ls(pg, "--fail-on-stale", "--pg-idle-after", "0.2")
    assert code == 0
    assert [lock["holder"]["pid"] for lock in locks] == [w]
    assert locks[0]["state"] == "active" and locks[0]["granted"] is True


def test_a_holder_whose_program_died_mid_query_is_stale_and_breaks_without_force(
    pg: PgHarness, tmp_path: Path
) -> None:
    """Killed while its backend was busy: the server does not notice the client is gone
    until it next reads from it, and the lock stays held. That is proof of a leak."""
    client = pg.client_process(
        ("lock", ["SELECT pg_advisory_lock(1, 4712)"]), then=(0, "SELECT pg_sleep(600)")
    )
    (h,) = client.backends
    code, locks = ls(pg, "--fail-on-stale")
    assert code == 0
    (held,) = locks
    assert held["holder"]["client_process"]["pid"] == client.pid
    assert held["state"] == "active"

    client.kill()
    code, locks = ls(pg, "--fail-on-stale")

    assert code == 3
    (held,) = locks
    assert held["state"] == "stale" and codes(held) == ["client_dead"]
    process = held["holder"]["client_process"]
    assert process["alive"] is False
    log = tmp_path / "audit.jsonl"
    code, out, err = run_cli(
        "break", held["id"], "--reason", "client died", "--yes",
        "--audit-log", str(log), "--pg", pg.dsn,
    )  # fmt: skip
    assert code == 0, (out, err)
    assert not held_row(pg, h)


# --------------------------------------------------------------------------- bounds, not ages


async def test_a_pooled_connection_that_keeps_working_holds_longer_and_longer(
    pg: PgHarness,
) -> None:
    """A leader guard or a pooled connection: a session lock taken once, then the
    connection runs `SELECT 1` again and again. Its state changes all the time, so
    the session's times say nothing about the lock: what lockwatch saw does."""
    pool = pg.session("pooled")
    pool.execute("SELECT pg_advisory_lock(4713)")
    key = AdvisoryKey("bigint", key=4713)

    def find(locks: list[Lock]) -> Lock:
        (found,) = [lock for lock in locks if pg_of(lock) and pg_of(lock).advisory_key == key]
        return found

    async with monitor(pg.dsn, idle_after=60.0) as source:
        # As the dashboard's feed does: judge each poll, and the source remembers.
        feed = PgFeed(source, host=HOST)
        polled = await poll_ok(source)
        feed._judge(polled)
        first = find(polled.locks)
        started = time.monotonic()
        for _ in range(6):  # keeps working: never idle for long
            pool.execute("SELECT 1")
            await asyncio.sleep(0.1)
        pool.execute("SELECT 1")
        # Taken before the second poll starts: what that poll then takes (slow
        # under load) is in neither bound.
        elapsed = time.monotonic() - started
        snapshot = await poll_ok(source)
        second = find(snapshot.locks)

    for lock in (first, second):
        assert isinstance(lock.facts, PgLock)
        assert lock.acquired_at is None  # no grant time: never an exact age
        assert pg_of(lock).level == "session"  # held with no transaction open
    assert isinstance(first.facts, PgLock) and isinstance(second.facts, PgLock)
    now = snapshot.polled_at
    least, most = held_bounds(pg_of(second), now)
    assert least is not None and most is not None
    # Held since at least the first poll, kept across polls...
    assert pg_of(second).known_held_at == pg_of(first).known_held_at
    assert least >= elapsed - 0.05
    # ...though the session itself went idle only a moment ago.
    assert isinstance(second.facts, PgLock) and second.facts.backend.state_since is not None
    assert (now - second.facts.backend.state_since).total_seconds() < least
    assert most >= least
    (entry,) = judge([second], StaticProcesses(), now, HOST)
    assert entry.verdict.state is State.ACTIVE and entry.verdict.age_seconds is None
    record = orjson_record(second, entry, now)
    assert record["age_seconds"] is None
    assert record["held_at_least_seconds"] == round(least, 3)
    assert record["held_at_most_seconds"] == round(most, 3)
    assert record["level"] == "session"

    # A recording keeps the bound: replayed, the lock was held as long as seen live.
    import lockwatch.sources.recording  # noqa: F401 - registers the record types

    replayed = codec.loads_line(codec.dumps_line(entry))
    assert isinstance(replayed, Entry)
    assert replayed.lock == entry.lock
    assert isinstance(replayed.lock.facts, PgLock)
    assert held_bounds(pg_of(replayed.lock), now) == (least, most)


def orjson_record(lock: Lock, entry: Entry, now: Any) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(
        records_json_array([lock_record(lock, entry.verdict, now)])
    )[0]
    return record


# --------------------------------------------------------------------------- what may not be seen


def test_an_unprivileged_monitor_says_unknown_and_names_the_grant(pg: PgHarness) -> None:
    dsn = pg.login_role("monitor", password=f"pw-{pg.tag}")
    role = str(conninfo.conninfo_to_dict(dsn)["user"])
    holder, waiter = pg.sessions("holder", "waiter")
    h, w = holder.info.backend_pid, waiter.info.backend_pid
    holder.execute("BEGIN")
    holder.execute("SELECT pg_advisory_xact_lock(1, 4714)")
    pg.block(waiter, "SELECT pg_advisory_lock(1, 4714)")
    pg.wait_state(h, "idle in transaction", longer_than=0.3)

    code, locks = ls(pg, "--fail-on-stale", "--pg-idle-after", "0.2", dsn=dsn)

    # Whether it idles in its transaction is hidden: unknown (never counted as stale).
    assert code == 0
    (held,) = [lock for lock in locks if lock["holder"]["pid"] == h]
    assert held["state"] == "unknown"
    assert codes(held) == ["insufficient_privilege", "blocking"]
    assert f"GRANT pg_read_all_stats TO {role};" in held["reasons"][0]["message"]
    assert held["holder"]["state"] is None and held["holder"]["client_process"] is None
    (waiting,) = [lock for lock in locks if lock["holder"]["pid"] == w]
    assert waiting["state"] == "waiting"

    pg.admin.execute(sql.SQL("GRANT pg_read_all_stats TO {}").format(sql.Identifier(role)))
    code, locks = ls(pg, "--fail-on-stale", "--pg-idle-after", "0.2", dsn=dsn)
    (held,) = [lock for lock in locks if lock["holder"]["pid"] == h]
    # Seen now: idle in its transaction, but its client (this test) is alive.
    assert held["state"] == "active"
    assert codes(held) == ["idle_in_transaction", "client_alive", "blocking"]


# --------------------------------------------------------------------------- prepared transactions


@contextlib.contextmanager
def prepared(cluster: Cluster, gid: str, *statements: str) -> Any:
    with connect(cluster.dsn, f"lw-setup-{gid}") as setup:
        setup.execute("BEGIN")
        for statement in statements:
            setup.execute(statement)
        setup.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))
    try:
        yield
    finally:
        with connect(cluster.dsn, f"lw-setup-{gid}") as cleanup, contextlib.suppress(psycopg.Error):
            cleanup.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))


def test_a_forgotten_prepared_transaction_goes_stale_and_says_how_to_end_it(
    throwaway_cluster: Cluster, tmp_path: Path
) -> None:
    gid = f"lw-gid-{uuid.uuid4().hex[:10]}"
    dsn = throwaway_cluster.dsn
    with prepared(throwaway_cluster, gid, "SELECT pg_advisory_xact_lock(4715)"):

        def listed(*args: str) -> tuple[int, dict[str, Any]]:
            code, out, err = run_cli("ls", "--json", *args, "--pg", dsn)
            assert code in (0, 3), err
            (lock,) = [
                lock
                for lock in json.loads(out)["locks"]
                if lock["holder"]["prepared_transaction"] == gid
            ]
            return code, lock

        code, lock = listed("--fail-on-stale", "--pg-idle-after", "3600")
        assert code == 0 and lock["state"] == "active"
        # Its age is known: since it was prepared.
        age = lock["age_seconds"]
        with connect(dsn, "lw-check") as check:
            row = check.execute(
                "SELECT EXTRACT(epoch FROM now() - prepared) FROM pg_prepared_xacts WHERE gid = %s",
                (gid,),
            ).fetchone()
        assert row is not None and 0 <= float(row[0]) - age < 5
        assert lock["next_change_at"] is not None

        code, lock = listed("--fail-on-stale", "--pg-idle-after", "0")
        assert code == 3
        assert lock["state"] == "stale"
        assert codes(lock) == ["prepared_too_long", "prepared_transaction"]
        message = lock["reasons"][1]["message"]
        assert f"COMMIT PREPARED '{gid}'" in message and f"ROLLBACK PREPARED '{gid}'" in message
        assert lock["holder"]["pid"] is None

        code, out, err = run_cli(
            "break", lock["id"], "--reason", "forgotten", "--yes", "--force",
            "--audit-log", str(tmp_path / "audit.jsonl"), "--pg", dsn,
        )  # fmt: skip
        assert code == 1, (out, err)
        assert f"COMMIT PREPARED '{gid}'" in err and f"ROLLBACK PREPARED '{gid}'" in err
        with connect(dsn, "lw-check") as check:
            assert check.execute(
                "SELECT count(*) FROM pg_prepared_xacts WHERE gid = %s", (gid,)
            ).fetchone() == (1,)
