"""The migration outage on a real PostgreSQL (issue 35, item 5): one session idle in
a transaction holds AccessShareLock on a table, an `ALTER TABLE` waits behind it
for AccessExclusiveLock, and plain SELECTs queue behind the ALTER. lockwatch flags
the ALTER as the queue's head (`ddl_queue`, how many queue behind it), the readers
as queued behind it, and offers cancelling the ALTER's statement first and
terminating the real root second; the cancel, carried out and audited, lets the
readers through while the root keeps its transaction.

Terraform's pg backend is not installable here: its lock is imitated with the exact
SQL of internal/backend/remote-state/pg (backend.go's table, client.go's Lock), and
lockwatch names it by the workspace its `states` row holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from lockwatch.actions.audit import AuditLog, Operator, read_records, verify
from lockwatch.actions.plan import Kind, plan, provider
from lockwatch.actions.run import Executor
from lockwatch.clock import SystemClock
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.postgres.dsn import display_name
from lockwatch.sources.postgres.source import PgSnapshot
from tests.facts_of import PgLock, pg_of
from tests.postgres.conftest import PgHarness, monitor, poll_ok

pytestmark = pytest.mark.postgres

HOST = "testhost"


def poll(dsn: str) -> PgSnapshot:
    async def run() -> PgSnapshot:
        async with monitor(dsn) as source:
            return await poll_ok(source)

    return asyncio.run(run())


def find(snapshot: PgSnapshot, pid: int, *, granted: bool) -> Lock:
    """The one lock of `pid` on a relation (granted or waiting)."""
    found = [
        lock
        for lock in snapshot.locks
        if isinstance(lock.facts, PgLock)
        and pg_of(lock).backend.pid == pid
        and pg_of(lock).granted == granted
        and pg_of(lock).locktype == "relation"
    ]
    assert len(found) == 1, f"{len(found)} locks of pid {pid}: {[lk.id for lk in snapshot.locks]}"
    return found[0]


def judge(lock: Lock) -> Verdict:
    return evaluate(lock, StaticProcesses(), SystemClock(), HOST)


def executor(pg: PgHarness, log: Path) -> Executor:
    audit = AuditLog(
        log, clock=SystemClock(), host=HOST, operator=Operator("tester", "tester", None)
    )
    server = display_name(pg.dsn)
    return Executor(audit, dsn_for=lambda name: pg.dsn if name == server else None)


def records(log: Path) -> list[dict[str, Any]]:
    found = []
    for _, record, raw in read_records(log):
        assert record is not None, raw
        found.append(record)
    assert verify(log).ok
    return found


class Queue:
    """The outage: root idle in a transaction, the ALTER waiting, two readers behind it."""

    def __init__(self, pg: PgHarness) -> None:
        self.table = pg.table()
        ident = sql.Identifier(self.table)
        self.root, self.alter, self.reader1, self.reader2 = pg.sessions(
            "root", "migration", "reader1", "reader2"
        )
        self.root.execute("BEGIN")
        self.root.execute(sql.SQL("SELECT count(*) FROM {}").format(ident))
        pg.wait_state(self.root.info.backend_pid, "idle in transaction")
        self.migration = pg.block(self.alter, f'ALTER TABLE "{self.table}" ADD COLUMN extra int')
        self.readers = [
            pg.block(conn, f'SELECT count(*) FROM "{self.table}"')
            for conn in (self.reader1, self.reader2)
        ]

    @property
    def pids(self) -> tuple[int, int, list[int]]:
        return (
            self.root.info.backend_pid,
            self.alter.info.backend_pid,
            [conn.info.backend_pid for conn in (self.reader1, self.reader2)],
        )


def test_the_waiting_alter_is_the_queue_head_and_its_readers_say_they_wait_on_it(
    pg: PgHarness,
) -> None:
    queue = Queue(pg)
    root, alter, readers = queue.pids
    snapshot = poll(pg.dsn)

    head = find(snapshot, alter, granted=False)
    verdict = judge(head)
    assert verdict.state is State.WAITING
    assert "ddl_queue" in verdict.codes
    assert pg_of(head).queued_behind == 2
    assert sorted(pg_of(head).blocking_here) == sorted(readers)
    assert pg_of(head).blocked_by == (root,)
    said = next(r.message for r in verdict.reasons if r.code == "ddl_queue")
    assert said.startswith("queue head: 2 sessions queue behind its waiting AccessExclusiveLock")
    assert f"not on pid {root}, which holds the lock it waits for" in said

    now = datetime.now(UTC)
    record = pg_of(head).record(head, verdict, now, {})
    assert record["queued_behind"] == 2 and record["queue_head"] is None

    for pid in readers:
        reader = find(snapshot, pid, granted=False)
        judged = judge(reader)
        assert judged.state is State.WAITING and "ddl_queue" in judged.codes
        assert pg_of(reader).queue_heads == (alter,)
        message = next(r.message for r in judged.reasons if r.code == "ddl_queue")
        assert message.startswith(f"queued behind pid {alter} (ALTER TABLE")
        assert f"cancelling pid {alter}'s statement lets it through" in message
        reader_record = pg_of(reader).record(reader, judged, now, {})
        assert reader_record["queue_head"] == alter and reader_record["queued_behind"] == 0

    # The holder is what it was: blocking the ALTER, not the readers.
    held = find(snapshot, root, granted=True)
    assert pg_of(held).blocking_here == (alter,)


def test_cancel_is_offered_first_and_running_it_unblocks_the_readers(
    pg: PgHarness, tmp_path: Path
) -> None:
    queue = Queue(pg)
    root, alter, _ = queue.pids
    snapshot = poll(pg.dsn)
    head = find(snapshot, alter, granted=False)
    actions = provider(head)
    assert actions is not None
    offered = actions.choices(Kind.BREAK, head)
    assert offered is not None
    assert [option.label for option in offered.options] == [
        "cancel its statement",
        f"terminate root pid {root}",
    ]

    # The dialog plans the first way unless another is chosen.
    verdict = judge(head)
    first = plan(
        Kind.BREAK, head, verdict, peers=snapshot.locks, given=dict(offered.options[0].given)
    )
    assert first.refusal is None and first.kind is Kind.CANCEL and not first.needs_name
    assert f"call pg_cancel_backend({alter})" in first.effect
    assert "the 2 sessions queued behind it" in first.effect

    log = tmp_path / "audit.jsonl"
    outcome = executor(pg, log).run(first, "migration outage")
    assert outcome.ok and outcome.event == "backend_cancelled", outcome

    queue.migration.wait_done()
    assert isinstance(queue.migration.error, psycopg.errors.QueryCanceled)
    assert "canceling statement due to user request" in str(queue.migration.error)
    for reader in queue.readers:
        reader.wait_done()
        assert reader.error is None, reader.error
    # The root keeps its transaction; the migration's session stays connected.
    assert pg.activity(root, "state") == ("idle in transaction",)
    assert queue.alter.execute("SELECT pg_backend_pid()").fetchone() == (alter,)

    intent, result = records(log)
    assert intent["intent"] == "backend_cancelled"
    assert result["event"] == "backend_cancelled" and result["result"] == "success"
    assert result["action"] == "cancel" and result["reason"] == "migration outage"
    assert result["target"]["pid"] == alter and result["target"]["id"] == head.id


def test_the_second_way_terminates_the_root_only_with_its_name_typed(
    pg: PgHarness, tmp_path: Path
) -> None:
    queue = Queue(pg)
    root, alter, _ = queue.pids
    snapshot = poll(pg.dsn)
    head = find(snapshot, alter, granted=False)
    actions = provider(head)
    assert actions is not None
    offered = actions.choices(Kind.BREAK, head)
    assert offered is not None
    second = plan(
        Kind.BREAK,
        head,
        judge(head),
        peers=snapshot.locks,
        given=dict(offered.options[1].given),
    )
    assert second.refusal is None and second.kind is Kind.BREAK
    assert pg_of(second.lock).backend.pid == root and pg_of(second.lock).granted
    assert second.needs_name and second.why_name is not None
    assert f"call pg_terminate_backend({root})" in second.effect

    log = tmp_path / "audit.jsonl"
    refused = executor(pg, log).run(second, "migration outage")
    # Refused, audited, for want of the typed name: the why is the plan's.
    assert not refused.ok and refused.event == "action_refused", refused
    assert refused.message.startswith(f"pid {root} holds public.{queue.table}"), refused
    assert pg.activity(root, "state") == ("idle in transaction",)

    done = executor(pg, log).run(second, "migration outage", force=True)
    assert done.ok and done.event == "backend_terminated", done
    queue.migration.wait_done()
    assert queue.migration.error is None, queue.migration.error
    for reader in queue.readers:
        reader.wait_done()
        assert reader.error is None, reader.error


def test_a_vanished_root_is_refused_not_guessed(pg: PgHarness) -> None:
    queue = Queue(pg)
    _, alter, readers = queue.pids
    snapshot = poll(pg.dsn)
    head = find(snapshot, alter, granted=False)
    # A reader is no root: nothing of it holds the lock the ALTER waits for.
    the_plan = plan(
        Kind.BREAK,
        head,
        judge(head),
        peers=snapshot.locks,
        given={"pg_way": "terminate_root", "pg_root": readers[0]},
    )
    assert the_plan.refusal is not None and the_plan.refusal[0] == "changed"


# --------------------------------------------------------------------------- terraform


# backend.go's schema (schema_name's default) and table, as Terraform creates them.
_TERRAFORM_SCHEMA = (
    "CREATE SCHEMA IF NOT EXISTS terraform_remote_state",
    "CREATE SEQUENCE IF NOT EXISTS public.global_states_id_seq AS bigint",
    "CREATE TABLE IF NOT EXISTS terraform_remote_state.states ("
    " id bigint NOT NULL DEFAULT nextval('public.global_states_id_seq') PRIMARY KEY,"
    " name text, data text)",
    "CREATE UNIQUE INDEX IF NOT EXISTS states_by_name ON terraform_remote_state.states (name)",
)
# client.go's Lock of an existing workspace, then its release of the creation lock.
_TERRAFORM_LOCK = (
    "SELECT states.id, pg_try_advisory_lock(states.id), pg_try_advisory_lock(-1)"
    " FROM terraform_remote_state.states WHERE states.name = %s"
)


def _terraform_tables(pg: PgHarness, workspaces: Sequence[str]) -> dict[str, int]:
    for statement in _TERRAFORM_SCHEMA:
        pg.admin.execute(statement)
    # Undone last first: the table (its default uses the sequence), then the sequence.
    pg.defer(lambda: pg.admin.execute("DROP SEQUENCE IF EXISTS public.global_states_id_seq"))
    pg.defer(lambda: pg.admin.execute("DROP SCHEMA IF EXISTS terraform_remote_state CASCADE"))
    ids = {}
    for name in workspaces:
        row = pg.admin.execute(
            "INSERT INTO terraform_remote_state.states (name, data) VALUES (%s, '{}') RETURNING id",
            (name,),
        ).fetchone()
        assert row is not None
        ids[name] = int(row[0])
    return ids


def _advisory(snapshot: PgSnapshot, pid: int) -> list[Lock]:
    return [
        lock
        for lock in snapshot.locks
        if isinstance(lock.facts, PgLock)
        and pg_of(lock).backend.pid == pid
        and pg_of(lock).locktype == "advisory"
    ]


def test_terraform_pg_backend_lock_is_named_by_its_workspace(pg: PgHarness) -> None:
    ids = _terraform_tables(pg, ["default", "prod & <eu>"])
    terraform, other = pg.sessions("terraform", "other")
    row = terraform.execute(_TERRAFORM_LOCK, ("prod & <eu>",)).fetchone()
    assert row == (ids["prod & <eu>"], True, True)
    terraform.execute("SELECT pg_advisory_unlock(-1)")
    # Someone else's key that is no workspace's id stays anonymous.
    unused = max(ids.values()) + 100
    other.execute("SELECT pg_advisory_lock(%s)", (unused,))

    snapshot = poll(pg.dsn)
    (held,) = _advisory(snapshot, terraform.info.backend_pid)
    assert held.name == "terraform state prod & <eu>"
    key = pg_of(held).advisory_key
    assert key is not None and key.key == ids["prod & <eu>"]
    (anonymous,) = _advisory(snapshot, other.info.backend_pid)
    assert anonymous.name == str(unused)


def test_terraform_creating_a_workspace_holds_its_creation_lock(pg: PgHarness) -> None:
    _terraform_tables(pg, ["default"])
    terraform = pg.session("terraform")
    # client.go: no row for the workspace yet, so only the creation lock is taken.
    assert terraform.execute(_TERRAFORM_LOCK, ("new",)).fetchone() is None
    assert terraform.execute("SELECT pg_try_advisory_lock(-1)").fetchone() == (True,)
    snapshot = poll(pg.dsn)
    (held,) = _advisory(snapshot, terraform.info.backend_pid)
    assert held.name == "terraform state (a workspace being created)"


def test_no_states_table_no_terraform_name(pg: PgHarness) -> None:
    session = pg.session("plain")
    session.execute("SELECT pg_advisory_lock(-1)")
    snapshot = poll(pg.dsn)
    (held,) = _advisory(snapshot, session.info.backend_pid)
    assert held.name == "-1"


def test_an_application_table_called_states_is_not_terraforms(pg: PgHarness) -> None:
    """A `states` table of the same columns, neither indexed by name as Terraform
    indexes it nor numbered from its sequence, names nothing."""
    pg.admin.execute("CREATE TABLE states (id bigserial PRIMARY KEY, name text, data text)")
    pg.defer(lambda: pg.admin.execute("DROP TABLE IF EXISTS states"))
    row = pg.admin.execute(
        "INSERT INTO states (name, data) VALUES ('texas', '') RETURNING id"
    ).fetchone()
    assert row is not None
    session = pg.session("app")
    session.execute("SELECT pg_advisory_lock(%s)", (row[0],))
    snapshot = poll(pg.dsn)
    (held,) = _advisory(snapshot, session.info.backend_pid)
    assert held.name == str(row[0])
