"""A PostgreSQL session by name (issue 37, item 5): its application, user, state
and the start of its query in the HOLDER cell, its name and what it is doing in a
confirmation's title, its application (or pid) as the word to type, and the
effect of ending it naming every session of its chain, those that proceed and
those that still wait. Pure: no server needed (tests/postgres's others use one)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from lockwatch.model import columns
from lockwatch.model.action import Kind
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.postgres.effect import session_effect
from lockwatch.sources.postgres.facts import PgBackend, PgLock

NOW = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
ACTIVE = Verdict(State.ACTIVE, ())


def holder(lock: Lock) -> str:
    """Both tables' HOLDER text, whole."""
    return columns.holder(lock, ACTIVE).text


SERVER = "monitor@db1:5432/app"


def backend(pid: int, application: str = "", state: str = "active", **more: object) -> PgBackend:
    return PgBackend(
        pid=pid,
        user="postgres",
        application=application,
        state=state,
        state_since=NOW - timedelta(seconds=32),
        **more,  # type: ignore[arg-type]
    )


def pg_lock(
    who: PgBackend,
    *,
    granted: bool = True,
    blocked_by: tuple[int, ...] = (),
    blocking: tuple[int, ...] = (),
    target: str = "xid",
) -> Lock:
    facts = PgLock(
        server=SERVER,
        locktype="transactionid",
        mode="ExclusiveLock" if granted else "ShareLock",
        granted=granted,
        database="app",
        backend=who,
        blocked_by=blocked_by,
        blocking=blocking,
        blocking_here=blocking if granted else (),
    )
    return Lock(
        id=f"pg:{SERVER}:{who.pid}:{target}:{'held' if granted else 'wait'}",
        source="postgres",
        format="pg_locks",
        name="xid 728",
        path=None,
        holder=Holder(pid=who.pid, actor=who.user),
        acquired_at=None,
        content={},
        facts=dataclasses.replace(facts, idle_after=60.0),
    )


REPORT = backend(
    8527,
    "report-job",
    "idle in transaction",
    query="SELECT *\n  FROM invoices   WHERE month = 11 FOR UPDATE -- a long, long comment here",
)


def test_the_holder_cell_names_the_session_and_what_it_does() -> None:
    lock = pg_lock(REPORT)
    assert holder(lock) == (
        "report-job idle in transaction: SELECT * FROM invoices WHERE month = 11 FOR UPDATE"
        " -- a lon… · postgres"
    )
    # Without an application: its pid stands for its name.
    assert holder(pg_lock(backend(17, query="VACUUM"))) == "pid 17 active: VACUUM · postgres"
    # The events' holder stays the same while the session works (no state, no query).
    assert lock.facts is not None
    assert lock.facts.holder_text(lock) == "report-job (pid 8527, postgres)"


def test_a_query_with_a_password_is_scrubbed_in_the_cell() -> None:
    lock = pg_lock(backend(9, "psql", query="ALTER ROLE app PASSWORD 'hunter2'"))
    assert "hunter2" not in holder(lock)


def test_the_title_and_the_word_to_type_name_the_session() -> None:
    lock = pg_lock(REPORT)
    facts = lock.facts
    assert facts is not None
    assert facts.confirm_title(lock, Kind.BREAK, NOW) == (
        "Terminate report-job (pid 8527, idle in transaction 32s)?"
    )
    assert facts.confirm_title(lock, Kind.CANCEL, NOW) == (
        "Cancel the query of report-job (pid 8527, idle in transaction 32s)?"
    )
    assert facts.confirm_word(lock) == "report-job"
    nameless = pg_lock(backend(17, state="idle"))
    assert nameless.facts is not None
    assert nameless.facts.confirm_word(nameless) == "17"
    assert nameless.facts.confirm_title(nameless, Kind.BREAK, NOW) == (
        "Terminate pid 17 (postgres, idle 32s)?"
    )
    # A name as shown: control characters spelled out, never sent to the terminal.
    odd = pg_lock(backend(18, "job\x1b[2J"))
    assert odd.facts is not None
    word = odd.facts.confirm_word(odd)
    assert word is not None and "\x1b" not in word


def test_the_effect_names_every_session_of_the_chain() -> None:
    """8527 holds; 100 and 200 wait on it; 300 waits on 100 (further down); 400
    waits on 8527 and on 500, which is not in the chain."""
    root = pg_lock(REPORT, blocking=(100, 200, 400))
    first = pg_lock(backend(100, "billing-worker"), granted=False, blocked_by=(8527,))
    first_holds = pg_lock(backend(100, "billing-worker"), blocking=(300,), target="tuple")
    second = pg_lock(backend(200, "month-end"), granted=False, blocked_by=(8527,))
    third = pg_lock(backend(300), granted=False, blocked_by=(100,))
    fourth = pg_lock(backend(400, "etl"), granted=False, blocked_by=(8527, 500))
    peers = [root, first, first_holds, second, third, fourth]
    effect = session_effect(root, peers)
    assert effect.startswith("rolls back its open transaction, releases its 1 lock, ")
    assert "waiters 100 (billing-worker), 200 (month-end) proceed" in effect
    assert "300 still waits (on pid 100)" in effect  # indirectly, down the chain
    assert "400 (etl) still waits (on pid 500)" in effect
    lone = pg_lock(backend(5))
    assert session_effect(lone, [lone]).endswith("nobody waits on it")
