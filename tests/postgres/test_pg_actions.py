"""Actions on Postgres locks (issue 5) against a real server: terminate, cancel,
steal and release, the compare-and-swap before acting, privileges, and the audit
records every outcome leaves.

Each test opens its own sessions (conftest `PgHarness`), polls them with a real
`PgSource`, plans with `plan()` and runs the plan through the `Executor` the
dashboard and the CLI share. Waits are bounded polls on server-side conditions.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from lockwatch.actions.audit import AuditLog, Operator, read_records, verify
from lockwatch.actions.plan import Kind, Plan, describe, plan
from lockwatch.actions.run import Executor, Outcome, lock_hash
from lockwatch.clock import Clock, SystemClock
from lockwatch.model.action import ActionFailed, ActionRefused
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.postgres.actor import HOLD_APPLICATION, HeldAdvisory, PgActor
from lockwatch.sources.postgres.dsn import display_name
from lockwatch.sources.postgres.facts import AdvisoryKey
from lockwatch.sources.postgres.settings import DEFAULT_IDLE_AFTER
from lockwatch.sources.postgres.source import PgSnapshot
from tests.facts_of import PgLock, pg_of
from tests.postgres.conftest import (
    WAIT_S,
    Blocked,
    Cluster,
    PgHarness,
    connect,
    monitor,
    poll_ok,
    terminate,
    wait_until,
)

pytestmark = pytest.mark.postgres

HOST = "testhost"
SECRET = "lw-secret-pw-7c1f"
HASH = re.compile(r"sha256:[0-9a-f]{64}")


# --------------------------------------------------------------------------- helpers


def poll(
    dsn: str,
    *,
    idle_after: float = DEFAULT_IDLE_AFTER,
    all_rows: bool = False,
    remote: bool = False,
    clock: Clock | None = None,
) -> PgSnapshot:
    """One poll of the server, as the dashboard or `_find_pg` would make it. `remote`:
    as if every client were on another host (no client process to look at), so a
    holder idle past `idle_after` is stale by inference. `clock`: what stamps the poll."""
    options: dict[str, Any] = {"client_finder": None} if remote else {}
    if clock is not None:
        options["clock"] = clock

    async def run() -> PgSnapshot:
        async with monitor(dsn, idle_after=idle_after, all_rows=all_rows, **options) as source:
            return await poll_ok(source)

    return asyncio.run(run())


def find(snapshot: PgSnapshot, pid: int, *, granted: bool = True, key: Any = None) -> Lock:
    """The single lock of `pid` (granted or waiting), on advisory `key` if given."""
    found = [
        lock
        for lock in snapshot.locks
        if isinstance(lock.facts, PgLock)
        and pg_of(lock).backend.pid == pid
        and pg_of(lock).granted == granted
        and (key is None or pg_of(lock).advisory_key == key)
    ]
    assert len(found) == 1, f"{len(found)} locks of pid {pid}: {[lk.id for lk in snapshot.locks]}"
    return found[0]


def judge(lock: Lock) -> Verdict:
    return evaluate(lock, StaticProcesses(), SystemClock(), HOST)


def bigint(key: int) -> AdvisoryKey:
    return AdvisoryKey("bigint", key=key)


def pair(key1: int, key2: int) -> AdvisoryKey:
    return AdvisoryKey("pair", key1=key1, key2=key2)


def alive(pg: PgHarness, pid: int) -> bool:
    return bool(
        pg.admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    )


def holders(pg: PgHarness, key: AdvisoryKey) -> list[tuple[int, str, str]]:
    """(pid, application_name, mode) of every session holding advisory `key` in the
    test database, straight from pg_locks."""
    rows = pg.admin.execute(
        "SELECT l.pid, a.application_name, l.mode, l.classid::int8, l.objid::int8, l.objsubid"
        " FROM pg_locks AS l LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid"
        " WHERE l.locktype = 'advisory' AND l.granted"
        "   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    ).fetchall()
    return sorted(
        (pid, app, mode)
        for pid, app, mode, classid, objid, objsubid in rows
        if AdvisoryKey.from_pg_locks(classid, objid, objsubid) == key
    )


def lockwatch_sessions(pg: PgHarness) -> list[int]:
    rows = pg.admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s AND datname = %s",
        (HOLD_APPLICATION + "%", pg.dbname),
    ).fetchall()
    return [int(row[0]) for row in rows]


@dataclass
class Acts:
    """An Executor auditing to a private log, reaching the server through a DSN
    that carries a password (which must never be written anywhere)."""

    pg: PgHarness
    dsn: str
    server: str
    log: Path
    executor: Executor

    def poll(
        self, idle_after: float = DEFAULT_IDLE_AFTER, all_rows: bool = False, remote: bool = False
    ) -> PgSnapshot:
        return poll(self.dsn, idle_after=idle_after, all_rows=all_rows, remote=remote)

    def run(
        self,
        kind: Kind,
        lock: Lock,
        *,
        peers: Sequence[Lock] = (),
        reason: str = "lockwatch test",
        force: bool = False,
        held: HeldAdvisory | None = None,
    ) -> tuple[Plan, Outcome]:
        the_plan = plan(kind, lock, judge(lock), peers=peers, held=held is not None)
        return the_plan, self.executor.run(the_plan, reason, force=force, held=held)

    def records(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        found = []
        for _, record, raw in read_records(self.log):
            assert record is not None, raw
            found.append(record)
        assert verify(self.log).ok, verify(self.log)
        assert SECRET not in self.log.read_text()
        return found

    def events(self) -> list[str]:
        return [record["event"] for record in self.records()]


@pytest.fixture
def acts(pg: PgHarness, tmp_path: Path) -> Acts:
    dsn = conninfo.make_conninfo(pg.dsn, password=SECRET)
    server = display_name(dsn)
    log = tmp_path / "audit.jsonl"
    audit = AuditLog(
        log, clock=SystemClock(), host=HOST, operator=Operator("tester", "tester", None)
    )
    executor = Executor(audit, dsn_for=lambda name: dsn if name == server else None)
    return Acts(pg, dsn, server, log, executor)


@contextlib.contextmanager
def running(pg: PgHarness, conn: psycopg.Connection[Any], query: str) -> Iterator[Blocked]:
    """`query` running on `conn` in a background thread (not waiting on a lock:
    pg_sleep), until the server shows it active. Ended and joined on the way out."""
    statement = Blocked(conn, query)
    statement.thread.start()
    try:
        wait_until(
            lambda: (
                statement.done.is_set()
                or pg.admin.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND state = 'active'"
                    " AND query = %s",
                    (statement.pid, query),
                ).fetchone()
            ),
            f"pid {statement.pid} to run {query!r}",
        )
        assert not statement.done.is_set(), f"{query!r} ended early: {statement.error!r}"
        yield statement
    finally:
        if not statement.done.is_set():
            with contextlib.suppress(psycopg.Error):
                terminate(pg.admin, [statement.pid])
        statement.done.wait(WAIT_S)
        statement.thread.join(WAIT_S)


@contextlib.contextmanager
def holding(held: HeldAdvisory | None) -> Iterator[None]:
    """Never leave a stolen lock's connection open, whatever the test did."""
    try:
        yield
    finally:
        if held is not None and not held.connection.closed:
            held.release()


def check_record(
    record: dict[str, Any], lock: Lock, acts: Acts, *, action: str, reason: str
) -> None:
    """The fields every intent and result record of a Postgres action carries."""
    assert isinstance(lock.facts, PgLock)
    assert record["action"] == action
    assert record["reason"] == reason
    target = record["target"]
    assert target["source"] == "postgres"
    assert target["id"] == lock.id
    assert target["server"] == acts.server
    assert SECRET not in acts.server and "password" not in acts.server
    assert target["database"] == acts.pg.dbname
    assert target["pid"] == pg_of(lock).backend.pid
    assert target["locktype"] == pg_of(lock).locktype
    assert target["mode"] == pg_of(lock).mode
    assert HASH.fullmatch(record["previous_lock_hash"])
    assert record["previous_lock_hash"] == lock_hash(lock)
    previous = record["previous_lock"]
    assert isinstance(previous, dict)
    assert previous["pid"] == pg_of(lock).backend.pid
    assert previous["target"] == lock.content["target"]
    assert previous["mode"] == pg_of(lock).mode
    assert previous["granted"] == pg_of(lock).granted
    assert record["operator"] == "tester" and record["host"] == HOST


# --------------------------------------------------------------------------- terminate


def test_terminate_advisory_holder_frees_lock_waiter_proceeds_and_audits(acts: Acts) -> None:
    pg = acts.pg
    holder, waiter = pg.sessions("holder", "waiter")
    h, w = holder.info.backend_pid, waiter.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(4242)")
    blocked = pg.block(waiter, "SELECT pg_advisory_lock(4242)")
    snapshot = acts.poll()
    lock = find(snapshot, h, key=bigint(4242))
    assert judge(lock).state is State.ACTIVE  # not stale: breaking it needs force

    reason = "holder hung,   INC-1"
    the_plan, outcome = acts.run(Kind.BREAK, lock, peers=snapshot.locks, reason=reason, force=True)

    assert the_plan.needs_name and the_plan.refusal is None
    assert outcome.ok, outcome
    assert outcome.event == "backend_terminated"
    assert outcome.message == f"terminated pid {h} on {acts.server}"
    # pg_terminate_backend(pid, timeout) waited for it: gone already, no polling needed.
    assert not alive(pg, h)
    blocked.wait_done()
    assert blocked.error is None
    assert holders(pg, bigint(4242)) == [(w, pg.application("waiter"), "ExclusiveLock")]
    assert waiter.execute("SELECT pg_advisory_unlock(4242)").fetchone() == (True,)

    intent, result = acts.records()
    assert intent["event"] == "action_intent"
    assert intent["intent"] == "backend_terminated" and intent["result"] == "pending"
    assert result["event"] == "backend_terminated" and result["result"] == "success"
    assert result["pid"] == h
    assert result["forced"] is True and result["state"] == "active"
    assert result["effect"] == the_plan.effect
    assert result["message"] == outcome.message
    for record in (intent, result):
        check_record(record, lock, acts, action="break", reason="holder hung, INC-1")
    assert intent["action_id"] == result["action_id"]
    assert result["seq"] == intent["seq"] + 1 and result["prev_hash"] == intent["hash"]


def test_break_without_force_of_an_active_lock_is_refused_and_nothing_happens(
    acts: Acts,
) -> None:
    pg = acts.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(4243)")
    lock = find(acts.poll(), h, key=bigint(4243))

    _, outcome = acts.run(Kind.BREAK, lock, reason="just because")

    assert not outcome.ok and outcome.event == "action_refused"
    assert outcome.code == "not_stale" and "--force" in outcome.message
    assert alive(pg, h)
    assert holders(pg, bigint(4243)) == [(h, pg.application("holder"), "ExclusiveLock")]
    (refused,) = acts.records()  # refused before anything: no intent
    assert refused["event"] == "action_refused" and refused["code"] == "not_stale"
    check_record(refused, lock, acts, action="break", reason="just because")


def test_break_of_a_lock_whose_client_is_gone_needs_no_force(acts: Acts) -> None:
    pg = acts.pg
    # Its program took the lock and was killed mid-query: the backend runs on,
    # holding the lock, with nobody at the other end.
    client = pg.client_process(
        ("holder", ["SELECT pg_advisory_lock(4244)"]), then=(0, "SELECT pg_sleep(600)")
    )
    (h,) = client.backends
    client.kill()
    lock = find(acts.poll(), h, key=bigint(4244))
    verdict = judge(lock)
    assert verdict.state is State.STALE and verdict.codes == ("client_dead",)
    assert isinstance(lock.facts, PgLock) and lock.facts.backend.client_process is not None
    assert lock.facts.backend.client_process.alive is False

    the_plan, outcome = acts.run(Kind.BREAK, lock)

    assert not the_plan.needs_name
    assert outcome.ok and outcome.event == "backend_terminated"
    assert not alive(pg, h)
    assert holders(pg, bigint(4244)) == []
    assert acts.events() == ["action_intent", "backend_terminated"]


def test_break_on_inferred_staleness_needs_force(acts: Acts) -> None:
    pg = acts.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(4246)")
    pg.wait_state(h, "idle", longer_than=0.3)
    lock = find(acts.poll(idle_after=0.1, remote=True), h, key=bigint(4246))
    assert judge(lock).codes == ("idle_holder", "inferred")

    the_plan, outcome = acts.run(Kind.BREAK, lock)

    assert the_plan.needs_name and the_plan.why_name is not None
    lines = describe(the_plan, datetime.now(UTC))
    assert ("confirm", f"{the_plan.why_name}: type its name to go ahead") in lines
    assert not outcome.ok and outcome.event == "action_refused" and outcome.code == "inferred"
    assert "--force" in outcome.message and "nothing done" in outcome.message
    assert alive(pg, h)
    _, outcome = acts.run(Kind.BREAK, lock, force=True)
    assert outcome.ok and outcome.event == "backend_terminated", outcome
    assert not alive(pg, h)
    assert acts.events() == ["action_refused", "action_intent", "backend_terminated"]


def test_a_reason_is_required(acts: Acts) -> None:
    pg = acts.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(4245)")
    lock = find(acts.poll(), h, key=bigint(4245))

    _, outcome = acts.run(Kind.BREAK, lock, reason="  \n ", force=True)

    assert not outcome.ok and outcome.code == "no_reason"
    assert alive(pg, h)
    assert acts.events() == ["action_refused"]


# --------------------------------------------------------------------------- the effect


def test_effect_counts_the_holders_locks_and_names_its_waiters(acts: Acts) -> None:
    pg = acts.pg
    holder, first, second = pg.sessions("holder", "first", "second")
    h, w1, w2 = (conn.info.backend_pid for conn in (holder, first, second))
    for key in (1, 2, 3):
        holder.execute("SELECT pg_advisory_lock(77, %s)", (key,))
    pg.block(first, "SELECT pg_advisory_lock(77, 1)")
    assert pg.scalar("SELECT count(*) FROM pg_locks WHERE pid = %s AND granted", (h,)) == 3

    snapshot = acts.poll()
    lock = find(snapshot, h, key=pair(77, 1))
    where = acts.server
    the_plan = plan(Kind.BREAK, lock, judge(lock), peers=snapshot.locks)
    assert the_plan.effect == (
        f"call pg_terminate_backend({h}) on {where}: ends its session, releases all 3 locks it"
        f" holds (3 advisory), waiter {w1} ({pg.application('first')}) proceeds"
    )
    # Any of its locks: ending the session releases them all.
    other = find(snapshot, h, key=pair(77, 3))
    assert plan(Kind.BREAK, other, judge(other), peers=snapshot.locks).effect == the_plan.effect

    pg.block(second, "SELECT pg_advisory_lock(77, 2)")
    snapshot = acts.poll()
    lock = find(snapshot, h, key=pair(77, 1))
    effect = plan(Kind.BREAK, lock, judge(lock), peers=snapshot.locks).effect
    assert effect.endswith(
        f"(3 advisory), waiters {w1} ({pg.application('first')}),"
        f" {w2} ({pg.application('second')}) proceed"
    )


def test_effect_of_an_idle_in_transaction_holder_counts_every_lock_with_all_rows(
    acts: Acts,
) -> None:
    pg = acts.pg
    table = pg.table(rows=1)
    holder, waiter = pg.sessions("holder", "waiter")
    h, w = holder.info.backend_pid, waiter.info.backend_pid
    holder.execute("BEGIN")
    holder.execute(sql.SQL("UPDATE {} SET v = 1 WHERE id = 1").format(sql.Identifier(table)))
    holder.execute("SELECT pg_advisory_xact_lock(78, 1)")
    pg.block(waiter, "SELECT pg_advisory_lock(78, 1)")
    pg.wait_state(h, "idle in transaction")
    granted = pg.scalar("SELECT count(*) FROM pg_locks WHERE pid = %s AND granted", (h,))
    assert granted >= 4  # the advisory lock, the table and its index, vxid, xid

    kinds = ", ".join(
        f"{n} {locktype}"
        for locktype, n in pg.admin.execute(
            "SELECT locktype, count(*) FROM pg_locks WHERE pid = %s AND granted"
            " GROUP BY locktype ORDER BY locktype",
            (h,),
        ).fetchall()
    )
    expected = (
        f"call pg_terminate_backend({h}) on {acts.server}: rolls back its open transaction,"
        f" releases all {granted} locks it holds ({kinds}),"
        f" waiter {w} ({pg.application('waiter')}) proceeds"
    )
    # Every lock it holds, counted by the poll: not only the rows listed (the
    # uncontended table lock is not), and the same with every row listed.
    for all_rows in (False, True):
        snapshot = acts.poll(all_rows=all_rows)
        lock = find(snapshot, h, key=pair(78, 1))
        assert plan(Kind.BREAK, lock, judge(lock), peers=snapshot.locks).effect == expected


def test_effect_of_a_lone_holder_with_one_lock(acts: Acts) -> None:
    pg = acts.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(79)")
    snapshot = acts.poll()
    lock = find(snapshot, h, key=bigint(79))
    effect = plan(Kind.BREAK, lock, judge(lock), peers=snapshot.locks).effect
    assert effect.endswith(": ends its session, releases all 1 lock it holds (1 advisory),"
                           " nobody waits on it")  # fmt: skip


# --------------------------------------------------------------------------- cancel


def test_cancel_ends_a_long_query_and_the_session_survives(acts: Acts) -> None:
    pg = acts.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(5151)")
    with running(pg, holder, "SELECT pg_sleep(60)") as statement:
        snapshot = acts.poll()
        lock = find(snapshot, h, key=bigint(5151))
        the_plan, outcome = acts.run(Kind.CANCEL, lock)
        assert the_plan.effect == (
            f"call pg_cancel_backend({h}) on {acts.server}: cancels its current query"
            " (SELECT pg_sleep(60)); its session stays connected"
        )
        assert outcome.ok and outcome.event == "backend_cancelled", outcome
        statement.wait_done()
    assert isinstance(statement.error, psycopg.errors.QueryCanceled)
    assert holder.execute("SELECT pg_backend_pid()").fetchone() == (h,)
    # Only the query: the session-level advisory lock stays held.
    assert holders(pg, bigint(5151)) == [(h, pg.application("holder"), "ExclusiveLock")]
    intent, result = acts.records()
    assert intent["intent"] == "backend_cancelled"
    assert result["event"] == "backend_cancelled" and result["result"] == "success"
    check_record(result, lock, acts, action="cancel", reason="lockwatch test")


def test_cancel_a_waiter_stuck_behind_a_lock(acts: Acts) -> None:
    pg = acts.pg
    holder, waiter = pg.sessions("holder", "waiter")
    h, w = holder.info.backend_pid, waiter.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(5152)")
    blocked = pg.block(waiter, "SELECT pg_advisory_lock(5152)")
    lock = find(acts.poll(), w, granted=False, key=bigint(5152))
    assert lock.id.endswith(":ExclusiveLock:wait")

    _, outcome = acts.run(Kind.CANCEL, lock)

    assert outcome.ok and outcome.event == "backend_cancelled", outcome
    blocked.wait_done()
    assert isinstance(blocked.error, psycopg.errors.QueryCanceled)
    assert waiter.execute("SELECT pg_backend_pid()").fetchone() == (w,)
    assert alive(pg, h)
    assert holders(pg, bigint(5152)) == [(h, pg.application("holder"), "ExclusiveLock")]


def test_cancel_an_idle_in_transaction_holder_says_nothing_is_released(acts: Acts) -> None:
    pg = acts.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("BEGIN")
    holder.execute("SELECT pg_advisory_xact_lock(5153)")
    pg.wait_state(h, "idle in transaction")
    lock = find(acts.poll(), h, key=bigint(5153))

    the_plan, outcome = acts.run(Kind.CANCEL, lock)

    assert the_plan.effect == (
        f"call pg_cancel_backend({h}) on {acts.server}: it is idle in transaction: there is"
        " no query to cancel, and its locks stay held (b terminates it)"
    )
    assert outcome.ok and outcome.event == "backend_cancelled", outcome
    # Its transaction is intact (not aborted) and keeps the lock.
    assert holder.execute("SELECT 1").fetchone() == (1,)
    assert holder.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    assert holders(pg, bigint(5153)) == [(h, pg.application("holder"), "ExclusiveLock")]
    holder.execute("ROLLBACK")
    assert holders(pg, bigint(5153)) == []


# --------------------------------------------------------------------------- compare and swap


@pytest.mark.parametrize("change", ["released", "session_ended", "another_pid_took_it"])
@pytest.mark.parametrize("kind", [Kind.BREAK, Kind.CANCEL, Kind.STEAL])
def test_lock_changed_since_seen_is_refused_and_nothing_is_touched(
    acts: Acts, change: str, kind: Kind
) -> None:
    pg = acts.pg
    holder, other = pg.sessions("holder", "other")
    h, o = holder.info.backend_pid, other.info.backend_pid
    key = pair(606, 1)
    holder.execute("SELECT pg_advisory_lock(606, 1)")
    pg.wait_state(h, "idle", longer_than=0.3)
    lock = find(acts.poll(idle_after=0.1, remote=True), h, key=key)
    assert judge(lock).state is State.STALE  # so that steal is allowed but for the change

    if change == "released":
        holder.execute("SELECT pg_advisory_unlock(606, 1)")
    elif change == "session_ended":
        terminate(pg.admin, [h])
    else:
        holder.execute("SELECT pg_advisory_unlock(606, 1)")
        other.execute("SELECT pg_advisory_lock(606, 1)")

    _, outcome = acts.run(kind, lock, force=True)

    assert not outcome.ok and outcome.event == "action_refused", outcome
    assert outcome.code == "changed"
    assert f"pid {h}" in outcome.message and "nothing done" in outcome.message
    assert alive(pg, o)
    assert alive(pg, h) is (change != "session_ended")
    expected = (
        [(o, pg.application("other"), "ExclusiveLock")] if change.startswith("another") else []
    )
    assert holders(pg, key) == expected
    assert lockwatch_sessions(pg) == []
    intent, refused = acts.records()
    assert intent["event"] == "action_intent"
    assert refused["event"] == "action_refused" and refused["code"] == "changed"
    check_record(refused, lock, acts, action=kind.value, reason="lockwatch test")


def test_holder_now_waits_instead_of_holding_is_refused(acts: Acts) -> None:
    """Same pid, same lock, but granted flipped: the row the operator saw is not there."""
    pg = acts.pg
    holder, other = pg.sessions("holder", "other")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(607)")
    lock = find(acts.poll(), h, key=bigint(607))
    holder.execute("SELECT pg_advisory_unlock(607)")
    other.execute("SELECT pg_advisory_lock(607)")
    pg.block(holder, "SELECT pg_advisory_lock(607)")

    _, outcome = acts.run(Kind.BREAK, lock, force=True)

    assert outcome.event == "action_refused" and outcome.code == "changed"
    assert f"pid {h} now waits for" in outcome.message
    assert alive(pg, h)


# --------------------------------------------------------------------------- steal


STEALS = [
    pytest.param("SELECT pg_advisory_lock(%s)", (-(2**40) - 7,), bigint(-(2**40) - 7), False,
                 id="bigint"),
    pytest.param("SELECT pg_advisory_lock(%s, %s)", (-3, 2**31 - 1), pair(-3, 2**31 - 1), False,
                 id="int4-pair"),
    pytest.param("SELECT pg_advisory_lock_shared(%s, %s)", (808, 9), pair(808, 9), True,
                 id="shared"),
]  # fmt: skip


@pytest.mark.parametrize(("take", "args", "key", "shared"), STEALS)
def test_steal_a_stale_advisory_lock_then_release_it(
    acts: Acts, take: str, args: tuple[int, ...], key: AdvisoryKey, shared: bool
) -> None:
    pg = acts.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    mode = "ShareLock" if shared else "ExclusiveLock"
    holder.execute(take, args)
    pg.wait_state(h, "idle", longer_than=0.3)
    snapshot = acts.poll(idle_after=0.1, remote=True)
    lock = find(snapshot, h, key=key)
    assert judge(lock).state is State.STALE

    # Stale by inference only: the operator types its name (force).
    the_plan, outcome = acts.run(
        Kind.STEAL, lock, peers=snapshot.locks, reason="leaked, INC-7", force=True
    )
    held = outcome.held
    with holding(held):
        function = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
        assert the_plan.effect == (
            f"call pg_terminate_backend({h}) on {acts.server}: ends its session, releases all"
            f" 1 lock it holds (1 advisory), nobody waits on it; then take advisory lock"
            f" {lock.name} ({key}) with"
            f" {function} on lockwatch's own connection and hold it until released (r)"
        )
        assert outcome.ok and outcome.event == "lock_stolen", outcome
        assert isinstance(held, HeldAdvisory)
        assert not alive(pg, h)
        mine = held.backend_pid
        # The steal's session names whose lock it holds: lockwatch-steal:<operator>.
        assert holders(pg, key) == [(mine, f"{HOLD_APPLICATION}:tester", mode)]
        assert held.alive() and held.key == key and held.shared is shared
        assert outcome.message == (
            f"terminated pid {h} and took {lock.name} on {acts.server}"
            f" (lockwatch session {mine} holds it)"
        )
        # The monitor sees lockwatch's own session holding it, under the id it announces.
        again = find(acts.poll(), mine, key=key)
        assert again.id == held.lock_id
        assert isinstance(again.facts, PgLock)
        assert pg_of(again).backend.application == f"{HOLD_APPLICATION}:tester"

        # The lock as lockwatch holds it, built without a poll, matches the monitor's.
        ours = held.as_lock(lock)
        assert ours.id == again.id and ours.name == again.name
        assert isinstance(ours.facts, PgLock) and isinstance(again.facts, PgLock)
        assert (
            pg_of(ours).backend.pid,
            pg_of(ours).mode,
            pg_of(ours).granted,
            pg_of(ours).advisory_key,
        ) == (
            pg_of(again).backend.pid,
            pg_of(again).mode,
            pg_of(again).granted,
            pg_of(again).advisory_key,
        )
        for column in ("pid", "target", "mode", "granted", "locktype", "database_name"):
            assert ours.content[column] == again.content[column], column

        release = plan(Kind.RELEASE, ours, judge(ours), held=True)
        assert release.refusal is None
        done = acts.executor.run(release, "done with it", held=held)
        assert done.ok and done.event == "lock_released", done
        assert done.message == f"released {lock.name} on {acts.server}"
        assert holders(pg, key) == []
        assert held.connection.closed
        wait_until(lambda: mine not in lockwatch_sessions(pg), "lockwatch's session to end")

    records = acts.records()
    assert [r["event"] for r in records] == [
        "action_intent",
        "backend_terminated",
        "lock_stolen",
        "action_intent",
        "lock_released",
    ]
    terminated = records[1]
    check_record(terminated, lock, acts, action="steal", reason="leaked, INC-7")
    assert terminated["pid"] == h and terminated["result"] == "success"
    assert terminated["action_id"] == records[0]["action_id"] == records[2]["action_id"]
    stolen = records[2]
    check_record(stolen, lock, acts, action="steal", reason="leaked, INC-7")
    assert stolen["result"] == "success" and stolen["state"] == "stale"
    assert stolen["terminated_pid"] == h and stolen["held_by_pid"] == mine
    released = records[4]
    assert released["result"] == "success" and released["unlocked"] is True
    assert released["reason"] == "done with it"
    assert released["target"]["id"] == held.lock_id and released["target"]["pid"] == mine
    assert released["previous_lock"]["pid"] == mine
    assert HASH.fullmatch(released["previous_lock_hash"])


def test_release_of_a_lock_that_the_server_already_let_go_is_still_done(acts: Acts) -> None:
    pg = acts.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(909)")
    pg.wait_state(h, "idle", longer_than=0.3)
    lock = find(acts.poll(idle_after=0.1, remote=True), h, key=bigint(909))
    _, outcome = acts.run(Kind.STEAL, lock, force=True)
    held = outcome.held
    with holding(held):
        assert outcome.ok and isinstance(held, HeldAdvisory), outcome
        terminate(pg.admin, [held.backend_pid])  # someone ended lockwatch's session
        assert not held.alive()
        ours = held.as_lock(lock)
        done = acts.executor.run(plan(Kind.RELEASE, ours, judge(ours), held=True), "x", held=held)
        assert done.ok and done.event == "lock_released"
        assert "already let go" in done.message
    assert holders(pg, bigint(909)) == []


class LateClock:
    """This host's clock, `by` seconds off: a poll stamped that far from the
    server's now(), as a loaded client stamps it (its thread ran seconds later)."""

    def __init__(self, by: float) -> None:
        self.by = timedelta(seconds=by)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.by


@pytest.mark.parametrize("kind", [Kind.STEAL, Kind.BREAK])
def test_a_poll_stamped_seconds_from_the_servers_clock_is_still_the_same_session(
    acts: Acts, kind: Kind
) -> None:
    """The session and its idleness are compared by the server's own timestamps
    (backend_start, state_change), not by ages turned into this host's time: a
    poll stamped 3 s off the server's now() (under load) acts as any other."""
    pg = acts.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(%s)", (4402,))
    pg.wait_state(h, "idle", longer_than=0.3)
    # Stamped 3 s early: the holder looks idle 3 s longer, stale all the same.
    snapshot = poll(acts.dsn, idle_after=0.1, remote=True, clock=LateClock(-3.0))
    lock = find(snapshot, h, key=bigint(4402))
    assert judge(lock).state is State.STALE

    _, outcome = acts.run(kind, lock, peers=snapshot.locks, reason="leaked", force=True)

    with holding(outcome.held):
        assert outcome.ok, outcome
        assert not alive(pg, h)


@pytest.mark.parametrize("kind", [Kind.STEAL, Kind.BREAK])
def test_an_idle_holder_that_woke_since_it_was_seen_is_not_touched(acts: Acts, kind: Kind) -> None:
    pg = acts.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(%s)", (4401,))
    # Seen idle briefly, then busy and idle again at once: its state_change moved
    # by less than any tolerance of poll jitter would allow, and that is enough.
    pg.wait_state(h, "idle", longer_than=0.15)
    snapshot = acts.poll(idle_after=0.1, remote=True)
    lock = find(snapshot, h, key=bigint(4401))
    assert judge(lock).state is State.STALE
    # The operator reads the confirmation; meanwhile the "leaked" holder does work.
    holder.execute("SELECT 1")
    # The typed name confirms the inferred staleness, not whatever it does now.
    _, outcome = acts.run(kind, lock, peers=snapshot.locks, reason="leaked", force=True)
    with holding(outcome.held):  # a wrong steal's key must not outlive the test
        assert not outcome.ok and outcome.code == "changed", outcome
    assert "no longer the idle holder you saw" in outcome.message
    assert alive(pg, h)
    assert [pid for pid, _, _ in holders(pg, bigint(4401))] == [h]
    assert acts.events() == ["action_intent", "action_refused"]


def test_steal_of_an_active_lock_is_refused_even_with_force(acts: Acts) -> None:
    pg = acts.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(910)")
    lock = find(acts.poll(), h, key=bigint(910))
    assert judge(lock).state is State.ACTIVE

    the_plan, outcome = acts.run(Kind.STEAL, lock, force=True)

    assert the_plan.refusal is not None and the_plan.refusal[0] == "not_stale"
    assert not outcome.ok and outcome.event == "action_refused" and outcome.code == "not_stale"
    assert "never allowed" in outcome.message
    assert alive(pg, h)
    assert holders(pg, bigint(910)) == [(h, pg.application("holder"), "ExclusiveLock")]
    assert lockwatch_sessions(pg) == []
    (refused,) = acts.records()
    assert refused["event"] == "action_refused" and refused["code"] == "not_stale"
    check_record(refused, lock, acts, action="steal", reason="lockwatch test")


def test_steal_of_a_waiting_row_or_a_non_advisory_lock_is_refused(acts: Acts) -> None:
    pg = acts.pg
    table = pg.table(rows=1)
    holder, row_waiter, key_waiter = pg.sessions("holder", "row-waiter", "key-waiter")
    h, rw, kw = (conn.info.backend_pid for conn in (holder, row_waiter, key_waiter))
    holder.execute("SELECT pg_advisory_lock(911)")
    holder.execute("BEGIN")
    holder.execute(sql.SQL("UPDATE {} SET v = 1 WHERE id = 1").format(sql.Identifier(table)))
    update = sql.SQL("UPDATE {} SET v = 2 WHERE id = 1").format(sql.Identifier(table))
    pg.block(row_waiter, update.as_string(row_waiter))
    pg.block(key_waiter, "SELECT pg_advisory_lock(911)")
    pg.wait_state(h, "idle in transaction", longer_than=0.3)
    snapshot = acts.poll(idle_after=0.1, remote=True)
    xid = next(
        lock
        for lock in snapshot.locks
        if isinstance(lock.facts, PgLock)
        and pg_of(lock).backend.pid == h
        and pg_of(lock).locktype == "transactionid"
    )
    assert judge(xid).state is State.STALE
    _, outcome = acts.run(Kind.STEAL, xid)
    assert outcome.event == "action_refused" and outcome.code == "unsupported"
    assert "only advisory locks can be stolen" in outcome.message

    waiting = find(snapshot, kw, granted=False, key=bigint(911))
    _, outcome = acts.run(Kind.STEAL, waiting)
    assert outcome.event == "action_refused" and outcome.code == "not_held"
    assert f"pid {kw} waits for 911" in outcome.message
    assert alive(pg, h) and alive(pg, rw) and alive(pg, kw)
    assert acts.events() == ["action_refused", "action_refused"]


def test_steal_of_a_lock_with_a_queued_waiter_is_refused_before_anything(acts: Acts) -> None:
    pg = acts.pg
    holder, waiter = pg.sessions("holder", "waiter")
    h, w = holder.info.backend_pid, waiter.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(912)")
    pg.wait_state(h, "idle", longer_than=0.3)
    pg.block(waiter, "SELECT pg_advisory_lock(912)")
    snapshot = acts.poll(idle_after=0.1, remote=True)
    lock = find(snapshot, h, key=bigint(912))
    assert judge(lock).state is State.STALE

    the_plan, outcome = acts.run(Kind.STEAL, lock, peers=snapshot.locks, force=True)

    # The waiter would be served first: terminating the holder would only hand it over.
    assert the_plan.refusal is not None and the_plan.refusal[0] == "has_waiters"
    assert not outcome.ok and outcome.event == "action_refused" and outcome.code == "has_waiters"
    assert f"pid {w}" in outcome.message and "Break it instead" in outcome.message
    assert alive(pg, h) and lockwatch_sessions(pg) == []
    assert [pid for pid, _, _ in holders(pg, bigint(912))] == [h]
    (refused,) = acts.records()
    assert refused["event"] == "action_refused" and refused["code"] == "has_waiters"
    check_record(refused, lock, acts, action="steal", reason="lockwatch test")


def test_a_waiter_that_queued_after_the_plan_also_stops_the_steal(acts: Acts) -> None:
    pg = acts.pg
    holder, waiter = pg.sessions("holder", "waiter")
    h, w = holder.info.backend_pid, waiter.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(913)")
    pg.wait_state(h, "idle", longer_than=0.3)
    snapshot = acts.poll(idle_after=0.1, remote=True)
    lock = find(snapshot, h, key=bigint(913))
    the_plan = plan(Kind.STEAL, lock, judge(lock), peers=snapshot.locks)
    assert the_plan.refusal is None  # nobody waited when the operator looked
    pg.block(waiter, "SELECT pg_advisory_lock(913)")

    outcome = acts.executor.run(the_plan, "leaked", force=True)

    assert not outcome.ok and outcome.code == "has_waiters", outcome
    assert f"pid {w}" in outcome.message
    assert alive(pg, h)
    assert acts.events() == ["action_intent", "action_refused"]


def test_a_backend_terminated_on_the_way_is_audited_even_when_the_steal_fails(
    acts: Acts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiter that queues between lockwatch's check and the terminate (simulated: the
    check is skipped) is served first: the steal fails, but the holder was ended,
    and the log says so in a record of its own."""
    pg = acts.pg
    holder, waiter = pg.sessions("holder", "waiter")
    h, w = holder.info.backend_pid, waiter.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(914)")
    pg.wait_state(h, "idle", longer_than=0.3)
    snapshot = acts.poll(idle_after=0.1, remote=True)
    lock = find(snapshot, h, key=bigint(914))
    the_plan = plan(Kind.STEAL, lock, judge(lock), peers=snapshot.locks)
    blocked = pg.block(waiter, "SELECT pg_advisory_lock(914)")
    monkeypatch.setattr(PgActor, "_no_waiters", lambda self, conn, lock, facts: None)

    outcome = acts.executor.run(the_plan, "leaked", force=True)

    assert not outcome.ok and outcome.event == "action_failed" and outcome.code == "taken"
    assert f"pid {h} was terminated" in outcome.message
    assert f"pid {w} ({pg.application('waiter')}) took" in outcome.message
    blocked.wait_done()
    assert not alive(pg, h)
    assert holders(pg, bigint(914)) == [(w, pg.application("waiter"), "ExclusiveLock")]
    wait_until(lambda: lockwatch_sessions(pg) == [], "lockwatch's holding session to close")
    intent, terminated, failed = acts.records()
    assert intent["intent"] == "lock_stolen"
    assert terminated["event"] == "backend_terminated" and terminated["pid"] == h
    assert terminated["result"] == "success"
    assert failed["event"] == "action_failed" and failed["code"] == "taken"
    assert intent["action_id"] == terminated["action_id"] == failed["action_id"]
    for record in (terminated, failed):
        check_record(record, lock, acts, action="steal", reason="leaked")


# --------------------------------------------------------------------------- privileges


def unprivileged_role(pg: PgHarness, name: str) -> str:
    """A LOGIN role with no pg_signal_backend; its DSN. Dropped at teardown."""
    return pg.login_role(name, password=SECRET)


def role_executor(dsn: str, log: Path) -> Executor:
    audit = AuditLog(
        log, clock=SystemClock(), host=HOST, operator=Operator("tester", "tester", None)
    )
    return Executor(audit, dsn_for=lambda name: dsn)


@pytest.mark.parametrize(("kind", "verb"), [(Kind.BREAK, "terminate"), (Kind.CANCEL, "cancel")])
def test_without_pg_signal_backend_a_superusers_session_cannot_be_signalled(
    acts: Acts, tmp_path: Path, kind: Kind, verb: str
) -> None:
    pg = acts.pg
    assert pg.scalar("SELECT rolsuper FROM pg_roles WHERE rolname = current_user") is True
    role_dsn = unprivileged_role(pg, "nosignal")
    holder = pg.session("holder")  # a postgres (superuser) session
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(1313)")
    lock = find(poll(role_dsn), h, key=bigint(1313))
    log = tmp_path / "role-audit.jsonl"

    the_plan = plan(kind, lock, judge(lock))
    outcome = role_executor(role_dsn, log).run(the_plan, "try it", force=True)

    assert not outcome.ok and outcome.event == "action_failed", outcome
    assert outcome.code == "insufficient_privilege"
    assert "pg_signal_backend" in outcome.message and f"pid {h}" in outcome.message
    assert verb in outcome.message
    assert SECRET not in outcome.message
    assert alive(pg, h)
    assert holders(pg, bigint(1313)) == [(h, pg.application("holder"), "ExclusiveLock")]
    records = [record for _, record, _ in read_records(log)]
    assert [r["event"] for r in records if r] == ["action_intent", "action_failed"]
    failed = records[1]
    assert failed is not None
    assert failed["code"] == "insufficient_privilege" and failed["result"] == "failed"
    assert "pg_signal_backend" in failed["message"]
    assert failed["target"]["pid"] == h and failed["target"]["id"] == lock.id
    assert HASH.fullmatch(failed["previous_lock_hash"])
    assert SECRET not in log.read_text()


def test_pg_signal_backend_is_what_it_takes_for_another_roles_session(
    acts: Acts, tmp_path: Path
) -> None:
    pg = acts.pg
    actor_dsn = unprivileged_role(pg, "actor")
    victim_dsn = unprivileged_role(pg, "victim")
    actor_role = str(conninfo.conninfo_to_dict(actor_dsn)["user"])
    victim = connect(victim_dsn, pg.application("victim"))
    pg.defer(victim.close)
    v = victim.info.backend_pid
    pg.defer(lambda: terminate(pg.admin, [v]))
    victim.execute("SELECT pg_advisory_lock(1314)")
    lock = find(poll(actor_dsn), v, key=bigint(1314))
    log = tmp_path / "actor-audit.jsonl"
    executor = role_executor(actor_dsn, log)

    outcome = executor.run(plan(Kind.BREAK, lock, judge(lock)), "try", force=True)
    assert outcome.code == "insufficient_privilege" and "pg_signal_backend" in outcome.message
    assert alive(pg, v)

    pg.admin.execute(sql.SQL("GRANT pg_signal_backend TO {}").format(sql.Identifier(actor_role)))
    outcome = executor.run(plan(Kind.BREAK, lock, judge(lock)), "granted now", force=True)
    assert outcome.ok and outcome.event == "backend_terminated", outcome
    assert not alive(pg, v)
    events = [record["event"] for _, record, _ in read_records(log) if record]
    assert events == ["action_intent", "action_failed", "action_intent", "backend_terminated"]


def test_the_actor_raises_action_failed_naming_the_role(acts: Acts) -> None:
    """PgActor itself, as the dashboard's worker calls it."""
    pg = acts.pg
    role_dsn = unprivileged_role(pg, "direct")
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(1315)")
    pg.wait_state(h, "idle", longer_than=0.3)
    lock = find(poll(role_dsn, idle_after=0.1), h, key=bigint(1315))
    actor = PgActor(role_dsn)
    with pytest.raises(ActionFailed) as failed:
        actor.terminate(lock)
    assert failed.value.code == "insufficient_privilege"
    assert "GRANT pg_signal_backend TO" in failed.value.message
    with pytest.raises(ActionFailed) as failed:
        actor.steal(lock)  # the terminate comes first: no key is taken
    assert failed.value.code == "insufficient_privilege"
    assert alive(pg, h) and lockwatch_sessions(pg) == []
    with pytest.raises(ActionRefused) as refused:
        actor.release_remote(lock)
    assert refused.value.code == "not_held"


def test_an_unreachable_server_is_a_failure_without_the_password(acts: Acts) -> None:
    pg = acts.pg
    holder = pg.session("holder")
    holder.execute("SELECT pg_advisory_lock(1316)")
    lock = find(acts.poll(), holder.info.backend_pid, key=bigint(1316))
    dead = conninfo.make_conninfo(acts.dsn, port="1", connect_timeout="2")
    with pytest.raises(ActionFailed) as failed:
        PgActor(dead, connect_timeout_s=2).terminate(lock)
    assert failed.value.code == "connect_failed"
    assert SECRET not in failed.value.message


# --------------------------------------------------------------------------- prepared transactions


def test_prepared_transaction_is_refused_with_a_commit_or_rollback_prepared_hint(
    throwaway_cluster: Cluster, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:10]
    gid = f"lw-gid-{tag}"
    with connect(throwaway_cluster.dsn, f"lw-setup-{tag}") as setup:
        setup.execute("BEGIN")
        setup.execute("SELECT pg_advisory_xact_lock(4711)")
        setup.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))
    pg = PgHarness(throwaway_cluster.dsn)
    try:
        snapshot = poll(throwaway_cluster.dsn, idle_after=0.0)
        (lock,) = [
            lock
            for lock in snapshot.locks
            if isinstance(lock.facts, PgLock)
            and pg_of(lock).backend.prepared_gid == gid
            and pg_of(lock).locktype == "advisory"
        ]
        assert isinstance(lock.facts, PgLock) and lock.facts.backend.pid is None
        server = display_name(throwaway_cluster.dsn)
        log = tmp_path / "audit.jsonl"
        executor = role_executor(throwaway_cluster.dsn, log)
        for kind in (Kind.BREAK, Kind.CANCEL, Kind.STEAL):
            the_plan = plan(kind, lock, judge(lock), peers=snapshot.locks)
            assert the_plan.refusal is not None
            code, message = the_plan.refusal
            assert code == "prepared_transaction"
            assert f"COMMIT PREPARED '{gid}'" in message
            assert f"ROLLBACK PREPARED '{gid}'" in message and server in message
            outcome = executor.run(the_plan, "try", force=True)
            assert outcome.event == "action_refused" and outcome.code == "prepared_transaction"
        # Still there: nothing could have touched it.
        assert pg.scalar("SELECT count(*) FROM pg_prepared_xacts WHERE gid = %s", (gid,)) == 1
        events = [record["event"] for _, record, _ in read_records(log) if record]
        assert events == ["action_refused"] * 3
    finally:
        with contextlib.suppress(psycopg.Error):
            pg.admin.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
        pg.close()


# --------------------------------------------------------------------------- concurrency


def test_two_lockwatches_breaking_at_once_terminate_once(acts: Acts, tmp_path: Path) -> None:
    """Both saw the lock; one terminates it, the other finds it gone and is refused."""
    pg = acts.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(2020)")
    lock = find(acts.poll(), h, key=bigint(2020))
    outcomes: list[Outcome] = []
    barrier = threading.Barrier(2)

    def go() -> None:
        barrier.wait(WAIT_S)
        outcomes.append(acts.run(Kind.BREAK, lock, force=True)[1])

    threads = [threading.Thread(target=go) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S * 2)
    assert len(outcomes) == 2
    events = sorted(outcome.event for outcome in outcomes)
    # Usually the second finds the lock gone. Both may also pass the check while the
    # backend is still exiting: then both signal the right pid (it held the lock when
    # signalled), which is harmless. Never a failure, never a missing audit record.
    assert events in (
        ["action_refused", "backend_terminated"],
        ["backend_terminated", "backend_terminated"],
    ), outcomes
    for outcome in outcomes:
        assert outcome.ok or outcome.code == "changed", outcome
    assert not alive(pg, h)
    assert sorted(acts.events()) == sorted(["action_intent", "action_intent", *events])
