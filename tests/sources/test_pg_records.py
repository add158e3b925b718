"""pg_locks rows to Lock records, and their verdicts: no server needed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.blocking import from_locks
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.report import lock_json, lock_record, records_json_array
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.postgres.facts import AdvisoryNames, PgClient
from lockwatch.sources.postgres.held import held_bounds
from lockwatch.sources.postgres.records import held_counts, to_locks, trim_query
from tests.conftest import NOW
from tests.facts_of import PgLock, pg_of

SERVER = "monitor@db:5432/app"
TARGET = (
    "locktype", "database", "relation", "page", "tuple", "virtualxid", "transactionid",
    "classid", "objid", "objsubid",
)  # fmt: skip


# The server's own times (pg_stat_activity's backend_start, state_change), on its
# clock and in its session's time zone: kept as written, never moved onto ours.
STARTED = datetime(2026, 11, 21, 13, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
CHANGED = STARTED + timedelta(minutes=59, microseconds=7)


def row(**values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "locktype": "advisory", "mode": "ExclusiveLock", "granted": True, "pid": 100,
        "database": 5, "database_name": "app", "relation": None, "schema_name": None,
        "relation_name": None, "page": None, "tuple": None, "virtualxid": None,
        "transactionid": None, "classid": 1, "objid": 42, "objsubid": 2, "object_name": None,
        "wait_age": None, "prepared_gid": None, "usename": "app", "application_name": "worker",
        "client": "10.0.0.5", "backend_type": "client backend", "state": "active",
        "wait_event_type": None, "wait_event": None, "query": "SELECT 1", "xact_age": 5.0,
        "query_age": 5.0, "state_age": 5.0, "blocked_by": None, "virtualtransaction": None,
        "client_port": 50123, "backend_age": 3600.0, "backend_started": STARTED,
        "state_changed": CHANGED,
        "held_kinds": None, "prepared_owner": None, "prepared_age": None,
    }  # fmt: skip
    base.update(values)
    # As the query computes it: format('%s/%s/...') writes NULL as an empty string.
    base["target"] = "/".join("" if base[k] is None else str(base[k]) for k in TARGET)
    return base


SESSION = (
    "usename", "application_name", "client", "backend_type", "state", "wait_event_type",
    "wait_event", "query", "xact_age", "query_age", "state_age", "client_port", "backend_age",
    "backend_started", "state_changed",
)  # fmt: skip


def sessions_of(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The pg_stat_activity rows the poll's first statement would return for `rows`."""
    found: dict[int, dict[str, Any]] = {}
    for r in rows:
        if r["pid"] is not None:
            found.setdefault(r["pid"], {k: r[k] for k in SESSION})
    return found


def judged(rows: list[dict[str, Any]], **kw: Any) -> list[tuple[Lock, Verdict]]:
    options: dict[str, Any] = {"idle_after": 60.0}
    options.update(kw)
    locks = to_locks(rows, sessions_of(rows), server=SERVER, polled_at=NOW, **options)
    clock = FrozenClock(NOW)
    return [(lock, evaluate(lock, StaticProcesses(), clock, "here")) for lock in locks]


def by_pid(pairs: list[tuple[Lock, Verdict]]) -> dict[object, tuple[Lock, Verdict]]:
    return {lock.holder.pid: (lock, verdict) for lock, verdict in pairs}


def test_advisory_holder_and_waiter() -> None:
    rows = [
        row(pid=100),
        row(pid=200, granted=False, wait_age=12.0, blocked_by=[100], state="active",
            wait_event_type="Lock", wait_event="advisory"),
    ]  # fmt: skip
    pairs = by_pid(judged(rows, names=AdvisoryNames.build(namespaces={1: "agent"})))
    holder, holder_verdict = pairs[100]
    waiter, waiter_verdict = pairs[200]
    assert holder.name == waiter.name == "agent:42"
    assert holder_verdict.state is State.ACTIVE
    assert holder_verdict.codes == ("blocking",)
    assert waiter_verdict.state is State.WAITING
    assert waiter_verdict.codes == ("waiting",)
    assert "12s" in waiter_verdict.reasons[0].message
    assert "pid 100" in waiter_verdict.reasons[0].message
    record = lock_json(waiter, waiter_verdict)
    assert record["source"] == "postgres" and record["format"] == "pg_locks"
    assert record["advisory_key"] == {"form": "pair", "key1": 1, "key2": 42}
    assert record["blocked_by"] == [100]
    assert record["granted"] is False
    assert lock_json(holder, holder_verdict)["blocking"] == [200]


def test_the_servers_own_session_times_are_kept_as_it_wrote_them() -> None:
    """What an action's compare-and-swap compares: exactly the server's values,
    whatever this host's clock said when the poll was stamped; the JSON has none
    of them (its ages are the contract)."""
    ((lock, verdict),) = judged([row(state="idle", state_age=4.0)])
    backend = pg_of(lock).backend
    assert backend.backend_started == STARTED and backend.state_changed == CHANGED
    assert backend.backend_start == NOW - timedelta(seconds=3600)  # moved onto our clock
    record = lock_json(lock, verdict)
    text = orjson.dumps(record).decode()
    assert "backend_started" not in text and "state_changed" not in text


def test_record_fields_and_ages() -> None:
    ((lock, verdict),) = judged([row(xact_age=30.0, query_age=10.0, state_age=4.0)])
    record = lock_json(lock, verdict)
    holder = record["holder"]
    assert {k: holder[k] for k in ("pid", "user", "application", "client", "state")} == {
        "pid": 100, "user": "app", "application": "worker", "client": "10.0.0.5",
        "state": "active",
    }  # fmt: skip
    assert holder["backend_type"] == "client backend"
    assert holder["query"] == "SELECT 1"
    assert record["database"] == "app"
    assert record["mode"] == "ExclusiveLock" and record["locktype"] == "advisory"
    assert isinstance(lock.facts, PgLock) and lock.facts.backend.xact_start == NOW - timedelta(
        seconds=30
    )
    assert lock.id.startswith(f"pg:{SERVER}:100:")


def test_idle_in_transaction_past_the_limit_is_stale_by_inference() -> None:
    rows = [
        row(locktype="transactionid", transactionid="728", classid=None, objid=None,
            objsubid=None, mode="ExclusiveLock", state="idle in transaction", state_age=61.0),
    ]  # fmt: skip
    ((lock, verdict),) = judged(rows, all_rows=True)
    assert verdict.state is State.STALE
    # Its client (10.0.0.5) is on another host: idle time is all lockwatch has.
    assert verdict.codes == ("idle_in_transaction", "inferred")
    assert "another host" in verdict.reasons[1].message
    assert "--force" in verdict.reasons[1].message
    assert lock.name == "xid 728"


def test_idle_in_transaction_within_the_limit_turns_stale_on_time() -> None:
    ((_, verdict),) = judged([row(state="idle in transaction", state_age=59.0)])
    assert verdict.state is State.ACTIVE
    assert verdict.next_change_at == NOW + timedelta(seconds=1)


@pytest.mark.parametrize(("state_age", "state"), [(60.5, State.STALE), (59.5, State.ACTIVE)])
def test_idle_session_holding_an_advisory_lock(state_age: float, state: State) -> None:
    ((_, verdict),) = judged([row(state="idle", state_age=state_age)])
    assert verdict.state is state
    if state is State.STALE:
        assert verdict.codes == ("idle_holder", "inferred")


def test_idle_session_with_non_advisory_lock_is_not_idle_holder() -> None:
    rows = [
        row(
            locktype="relation",
            relation=1234,
            schema_name="public",
            relation_name="t",
            classid=None,
            objid=None,
            objsubid=None,
            state="idle",
            state_age=999.0,
        )
    ]
    ((lock, verdict),) = judged(rows, all_rows=True)  # fmt: skip
    assert verdict.state is State.ACTIVE
    assert lock.name == "public.t"


def test_uncontended_relation_and_own_vxid_are_skipped_unless_all() -> None:
    rows = [
        row(locktype="relation", relation=1234, schema_name="public", relation_name="t",
            classid=None, objid=None, objsubid=None, mode="AccessShareLock"),
        row(locktype="virtualxid", virtualxid="3/7", classid=None, objid=None, objsubid=None),
    ]  # fmt: skip
    assert judged(rows) == []
    assert len(judged(rows, all_rows=True)) == 2


def test_only_the_blockers_contended_rows_are_kept() -> None:
    tuple_target = {"locktype": "tuple", "relation": 1234, "schema_name": "public",
                    "relation_name": "t", "page": 0, "tuple": 1, "classid": None,
                    "objid": None, "objsubid": None}  # fmt: skip
    rows = [
        row(pid=100, **tuple_target, mode="ExclusiveLock"),
        row(pid=100, locktype="relation", relation=1234, schema_name="public",
            relation_name="t", classid=None, objid=None, objsubid=None,
            mode="RowExclusiveLock"),
        row(pid=200, granted=False, blocked_by=[100], **tuple_target, mode="ExclusiveLock"),
    ]  # fmt: skip
    pairs = judged(rows)
    names = sorted((lock.holder.pid, lock.name) for lock, _ in pairs)
    assert names == [(100, "public.t (0,1)"), (200, "public.t (0,1)")]


def test_prepared_transaction_holder_is_named_never_pid_0() -> None:
    target = {"locktype": "transactionid", "transactionid": "900", "classid": None,
              "objid": None, "objsubid": None}  # fmt: skip
    rows = [
        row(pid=None, prepared_gid="batch-7", usename=None, application_name=None,
            client=None, backend_type=None, state=None, query=None, xact_age=None,
            query_age=None, state_age=None, **target),
        row(pid=300, granted=False, blocked_by=[0], mode="ShareLock", **target),
    ]  # fmt: skip
    pairs = judged(rows)
    holder = next(v for lock, v in pairs if lock.holder.pid is None)
    waiter_lock, waiter = next((lock, v) for lock, v in pairs if lock.holder.pid == 300)
    assert holder.codes == ("blocking", "prepared_transaction")
    assert "batch-7" in waiter.reasons[0].message
    record = lock_json(waiter_lock, waiter)
    assert record["blocked_by"] == []
    assert record["blocked_by_prepared"] == ["batch-7"]
    tree = from_locks([lock for lock, _ in pairs])
    assert [root.id for root in tree.roots] == ["prepared:batch-7"]


def test_hidden_sessions_say_which_role_reveals_them() -> None:
    hidden = {"query": "<insufficient privilege>", "state": None, "client": None,
              "client_port": None, "xact_age": None, "state_age": None,
              "query_age": None}  # fmt: skip
    rows = [row(pid=100, **hidden), row(pid=200, granted=False, blocked_by=[100], **hidden)]
    pairs = by_pid(judged(rows, monitor_role="monitor"))
    _, holder = pairs[100]
    _, waiter = pairs[200]
    # Whether the holder idles in a transaction is what is hidden: never "active".
    assert holder.state is State.UNKNOWN
    assert holder.codes == ("insufficient_privilege", "blocking")
    assert "GRANT pg_read_all_stats TO monitor;" in holder.reasons[0].message
    # A waiter is a waiter whatever its state: pg_locks says so to every role.
    assert waiter.state is State.WAITING
    assert waiter.codes == ("waiting", "insufficient_privilege")


def test_relation_in_another_database_is_not_misnamed() -> None:
    rows = [row(locktype="relation", relation=16384, database=7, database_name="other",
                schema_name=None, relation_name=None, classid=None, objid=None,
                objsubid=None, granted=False, blocked_by=[1])]  # fmt: skip
    ((lock, _),) = judged(rows)
    assert lock.name == "relation 16384 in other"


def test_trim_query() -> None:
    assert trim_query("SELECT\n   1\n\tFROM x") == "SELECT 1 FROM x"
    long = trim_query("x" * 500)
    assert long is not None and len(long) == 200 and long.endswith("…")
    assert trim_query(None) is None


def test_evaluate_all_shares_verdicts_without_changing_any() -> None:
    from lockwatch.model.verdict import evaluate_all

    rows = [row(pid=100, objid=n, state="idle", state_age=70.0) for n in range(30)]
    rows += [row(pid=200, objid=n, state="idle in transaction", state_age=5.0) for n in range(30)]
    rows += [row(pid=300, granted=False, objid=3, blocked_by=[100], wait_age=2.0)]
    rows += [row(pid=100, locktype="relation", relation=9, schema_name="public",
                 relation_name="t", classid=None, objid=None, objsubid=None,
                 state="idle", state_age=70.0)]  # fmt: skip
    locks = to_locks(
        rows, sessions_of(rows), server=SERVER, polled_at=NOW, idle_after=60.0, all_rows=True
    )
    clock, processes = FrozenClock(NOW), StaticProcesses()
    shared = evaluate_all(locks, processes, clock, "here")
    alone = [evaluate(lock, processes, clock, "here") for lock in locks]
    assert shared == alone
    states = {(lock.holder.pid, v.state, v.codes) for lock, v in zip(locks, shared, strict=True)}
    assert (100, State.STALE, ("idle_holder", "inferred")) in states
    assert (100, State.STALE, ("idle_holder", "inferred", "blocking")) in states
    assert (100, State.ACTIVE, ()) in states  # the relation lock: not an advisory one
    assert (200, State.ACTIVE, ()) in states
    assert (300, State.WAITING, ("waiting",)) in states


def test_prepared_transactions_without_a_gid_stay_apart() -> None:
    nameless = {"pid": None, "prepared_gid": None, "usename": None, "application_name": None,
                "client": None, "backend_type": None, "state": None, "query": None,
                "xact_age": None, "query_age": None, "state_age": None}  # fmt: skip
    rows = [
        row(**nameless, virtualtransaction="-1/700", objid=1),
        row(**nameless, virtualtransaction="-1/701", objid=2),
    ]
    ids = [lock.id for lock, _ in judged(rows)]
    assert len(set(ids)) == 2
    assert all(":vxid:-1/70" in lock_id for lock_id in ids)


def test_wait_time_falls_back_to_the_query_start_without_waitstart() -> None:
    rows = [
        row(pid=100),
        row(pid=200, granted=False, wait_age=None, query_age=9.0, blocked_by=[100]),
    ]
    waiter = next(lock for lock, _ in judged(rows) if lock.holder.pid == 200)
    assert isinstance(waiter.facts, PgLock)
    assert pg_of(waiter).wait_start == NOW - timedelta(seconds=9)


# --------------------------------------------------------------------------- ages as bounds


def record(lock: Lock, verdict: Verdict, now: Any = NOW) -> dict[str, Any]:
    """The lock as `ls --json` writes it at `now`."""
    return orjson.loads(records_json_array([lock_record(lock, verdict, now)]))[0]  # type: ignore[no-any-return]


def test_a_granted_lock_has_bounds_never_an_age() -> None:
    ((lock, verdict),) = judged([row(state="active", xact_age=30.0, state_age=2.0)])
    assert lock.acquired_at is None and verdict.age_seconds is None
    later = NOW + timedelta(seconds=42)
    doc = record(lock, evaluate(lock, StaticProcesses(), FrozenClock(later), "here"), later)
    assert doc["age_seconds"] is None and doc["acquired_at"] is None
    # Seen held at the poll (it is busy: nothing older is known), and no older
    # than its session (3600 s): it may be a session-level lock.
    assert doc["held_at_least_seconds"] == 42.0
    assert doc["held_at_most_seconds"] == 3642.0
    assert doc["level"] is None


def test_an_idle_session_held_its_locks_since_it_went_idle() -> None:
    ((lock, _),) = judged([row(state="idle", state_age=50.0)])
    assert isinstance(lock.facts, PgLock)
    assert pg_of(lock).known_held_at == NOW - timedelta(seconds=50)
    # No transaction, yet the lock is held: session-level, no older than the session.
    assert pg_of(lock).level == "session"
    assert pg_of(lock).acquired_after == NOW - timedelta(seconds=3600)


def test_transaction_level_locks_are_no_older_than_their_transaction() -> None:
    rows = [row(locktype="relation", relation=9, schema_name="public", relation_name="t",
                classid=None, objid=None, objsubid=None, state="idle in transaction",
                xact_age=30.0, state_age=20.0)]  # fmt: skip
    ((lock, _),) = judged(rows, all_rows=True)
    assert isinstance(lock.facts, PgLock) and lock.facts.level == "transaction"
    assert held_bounds(pg_of(lock), NOW) == (20.0, 30.0)


def test_a_lock_seen_before_its_transaction_began_is_session_level() -> None:
    (base,) = [row(state="active", xact_age=5.0)]
    key = (100, STARTED, base["target"], "ExclusiveLock")
    seen = {key: NOW - timedelta(seconds=20)}
    ((lock, _),) = judged([base], seen=seen)
    assert isinstance(lock.facts, PgLock)
    assert pg_of(lock).known_held_at == NOW - timedelta(seconds=20)
    assert pg_of(lock).level == "session"
    assert held_bounds(pg_of(lock), NOW) == (20.0, 3600.0)
    # A later session with the same pid is another hold: what was seen is not its.
    ((other, _),) = judged([row(state="active", xact_age=5.0, backend_started=CHANGED)], seen=seen)
    assert (
        isinstance(other.facts, PgLock)
        and pg_of(other).known_held_at == NOW
        and pg_of(other).level is None
    )


def test_a_waiters_age_is_its_wait_exactly() -> None:
    rows = [row(pid=100), row(pid=200, granted=False, wait_age=12.0, blocked_by=[100])]
    lock, verdict = by_pid(judged(rows))[200]
    assert verdict.age_seconds == 12.0
    doc = record(lock, verdict)
    assert doc["age_seconds"] == 12.0 and doc["held_at_least_seconds"] is None


def test_without_waitstart_a_wait_has_no_exact_age() -> None:
    rows = [row(pid=100), row(pid=200, granted=False, wait_age=None, query_age=9.0,
                                 blocked_by=[100])]  # fmt: skip
    lock, verdict = by_pid(judged(rows))[200]
    assert verdict.age_seconds is None
    assert record(lock, verdict)["wait_seconds"] == 9.0


TWO_HOURS = NOW - timedelta(hours=2)


@pytest.mark.parametrize(
    ("pg_fields", "cell"),
    [
        ({"known_held_at": NOW - timedelta(seconds=192), "acquired_after": TWO_HOURS}, "≥ 3m12s"),
        ({"known_held_at": NOW - timedelta(seconds=0.4), "acquired_after": TWO_HOURS}, "≤ 2h00m"),
        ({"known_held_at": NOW, "acquired_after": None}, "≥ 0s"),
        ({"known_held_at": None, "acquired_after": None}, "?"),
    ],
)  # fmt: skip
def test_the_age_cell_shows_a_bound(pg_fields: dict[str, Any], cell: str) -> None:
    from dataclasses import replace

    from lockwatch.model.columns import age

    ((lock, verdict),) = judged([row()])
    assert isinstance(lock.facts, PgLock)
    lock = replace(lock, facts=replace(pg_of(lock), **pg_fields))
    assert (age(lock, verdict, NOW) or "?") == cell


def test_held_counts_parse_what_the_query_says_and_skip_garbage() -> None:
    assert held_counts("advisory=80,virtualxid=1") == (("advisory", 80), ("virtualxid", 1))
    assert held_counts(None) == ()
    assert held_counts("nonsense,=3,relation=x,tuple=2") == (("tuple", 2),)


# --------------------------------------------------------------------------- client-aware verdicts


def with_client(found: PgClient | None, **values: Any) -> tuple[Lock, Verdict]:
    options: dict[str, Any] = {"client": "127.0.0.1"}
    options.update(values)
    ((lock, verdict),) = judged([row(**options)], clients={100: found} if found else {})
    return lock, verdict


ALIVE = PgClient(pid=4321, cmdline=("python", "worker.py"), alive=True)


@pytest.mark.parametrize(
    ("state", "code"), [("idle in transaction", "idle_in_transaction"), ("idle", "idle_holder")]
)
def test_a_live_client_is_not_a_leak(state: str, code: str) -> None:
    lock, verdict = with_client(ALIVE, state=state, state_age=600.0)
    assert verdict.state is State.ACTIVE
    assert verdict.codes == (code, "client_alive")
    assert "pid 4321 (python worker.py)" in verdict.reasons[1].message
    holder = record(lock, verdict)["holder"]
    assert holder["client_process"] == {
        "pid": 4321,
        "cmdline": ["python", "worker.py"],
        "alive": True,
    }
    assert holder["client_port"] == 50123


def test_a_live_client_within_the_limit_is_plainly_active() -> None:
    _, verdict = with_client(ALIVE, state="idle in transaction", state_age=5.0)
    assert verdict.state is State.ACTIVE and verdict.codes == ()


def test_a_gone_client_is_stale_whatever_the_session_does() -> None:
    gone = PgClient(pid=4321, cmdline=("python", "worker.py"), alive=False)
    lock, verdict = with_client(gone, state="active", state_age=1.0)
    assert verdict.state is State.STALE
    assert verdict.codes == ("client_dead",)
    assert "pid 4321" in verdict.reasons[0].message
    assert record(lock, verdict)["holder"]["client_process"]["alive"] is False


def test_a_local_client_lockwatch_cannot_find_leaves_staleness_inferred() -> None:
    _, verdict = with_client(None, client="local", client_port=-1, state="idle", state_age=90.0)
    assert verdict.codes == ("idle_holder", "inferred")
    assert "could not find its process" in verdict.reasons[1].message


# --------------------------------------------------------------------------- prepared transactions


def prepared_rows(prepared_age: float, gid: str = "batch-7") -> list[dict[str, Any]]:
    target = {"locktype": "transactionid", "transactionid": "900", "classid": None,
              "objid": None, "objsubid": None}  # fmt: skip
    nameless = {"usename": None, "application_name": None, "client": None,
                "backend_type": None, "state": None, "query": None, "xact_age": None,
                "query_age": None, "state_age": None}  # fmt: skip
    return [
        row(pid=None, prepared_gid=gid, prepared_owner="billing", prepared_age=prepared_age,
            **nameless, **target),
        row(pid=300, granted=False, blocked_by=[0], mode="ShareLock", **target),
    ]  # fmt: skip


def test_a_prepared_transaction_ages_from_when_it_was_prepared() -> None:
    pairs = judged(prepared_rows(30.0))
    lock, verdict = next((lock, v) for lock, v in pairs if lock.holder.pid is None)
    assert verdict.age_seconds == 30.0
    assert verdict.state is State.ACTIVE
    assert verdict.next_change_at == NOW + timedelta(seconds=30)
    assert isinstance(lock.facts, PgLock) and lock.facts.backend.user == "billing"
    assert record(lock, verdict)["age_seconds"] == 30.0


def test_a_prepared_transaction_past_the_limit_is_stale_and_says_how_to_end_it() -> None:
    pairs = judged(prepared_rows(61.0, gid="it's-7"))
    _, verdict = next((lock, v) for lock, v in pairs if lock.holder.pid is None)
    assert verdict.state is State.STALE
    assert verdict.codes == ("prepared_too_long", "blocking", "prepared_transaction")
    message = verdict.reasons[2].message
    assert "COMMIT PREPARED 'it''s-7'" in message and "ROLLBACK PREPARED 'it''s-7'" in message
    assert "in database app" in message


# ------------------------------------------------------------------ what an action would do


def plan_for(kind: str, rows: list[dict[str, Any]], pid: int, **kw: Any) -> Any:
    from lockwatch.actions.plan import Kind, plan

    pairs = judged(rows, **kw)
    lock, verdict = next((lock, v) for lock, v in pairs if lock.holder.pid == pid and pg_of(lock)
                         and pg_of(lock).granted)  # fmt: skip
    return plan(Kind(kind), lock, verdict, peers=[lock for lock, _ in pairs])


def test_terminating_counts_every_lock_the_backend_holds_and_who_proceeds() -> None:
    rows = [
        row(pid=100, held_kinds="advisory=3,relation=2,virtualxid=1"),
        # 200 waits on 100 alone; 300 is queued behind 200 for the same key.
        row(pid=200, granted=False, blocked_by=[100], wait_age=3.0),
        row(pid=300, granted=False, blocked_by=[100, 200], wait_age=2.0),
    ]
    effect = plan_for("break", rows, 100).effect
    assert "releases all 6 locks it holds (3 advisory, 2 relation, 1 virtualxid)" in effect
    assert "waiter 200 (worker) proceeds" in effect
    assert "300 (worker) still waits (on pid 200)" in effect


def test_breaking_on_inferred_staleness_needs_the_typed_name() -> None:
    rows = [row(state="idle in transaction", state_age=600.0)]
    the_plan = plan_for("break", rows, 100)
    assert the_plan.verdict.state is State.STALE
    assert the_plan.needs_name and the_plan.why_name is not None
    assert "inference" in the_plan.why_name
    steal = plan_for("steal", [row(state="idle", state_age=600.0)], 100)
    assert steal.refusal is None and steal.needs_name


def test_breaking_a_lock_whose_client_is_gone_needs_no_name() -> None:
    gone = PgClient(pid=None, alive=False)
    the_plan = plan_for("break", [row(client="127.0.0.1", state="active")], 100,
                        clients={100: gone})  # fmt: skip
    assert the_plan.verdict.codes == ("client_dead",)
    assert not the_plan.needs_name and the_plan.refusal is None


def test_a_steal_with_a_queued_waiter_is_refused_before_anything() -> None:
    gone = PgClient(pid=None, alive=False)
    rows = [row(pid=100, client="127.0.0.1"), row(pid=200, granted=False, blocked_by=[100])]
    the_plan = plan_for("steal", rows, 100, clients={100: gone})
    assert the_plan.verdict.state is State.STALE
    assert the_plan.refusal is not None and the_plan.refusal[0] == "has_waiters"
    assert "pid 200" in the_plan.refusal[1] and "break" in the_plan.refusal[1].lower()


def test_a_prepared_transactions_refusal_names_both_commands() -> None:
    from lockwatch.actions.plan import Kind, plan

    pairs = judged(prepared_rows(61.0))
    lock, verdict = next((lock, v) for lock, v in pairs if lock.holder.pid is None)
    the_plan = plan(Kind.BREAK, lock, verdict)
    assert the_plan.refusal is not None
    code, message = the_plan.refusal
    assert code == "prepared_transaction"
    assert "COMMIT PREPARED 'batch-7'" in message and "ROLLBACK PREPARED 'batch-7'" in message
    assert "database app" in message and "billing" in message


def test_compact_rows_in_any_column_order_read_as_their_dicts() -> None:
    """to_locks reads a poll's compact rows by position (one call per row): rows
    whose columns come in another order, or a result without some column, read
    exactly as the same rows as dicts do."""
    from lockwatch.model.compact import Columns
    from lockwatch.model.compact import Row as CompactRow

    rows = [row(pid=100, objid=n, objsubid=1 + n % 2, classid=n) for n in range(4)]
    rows += [
        row(pid=200, granted=False, objid=1, classid=1, objsubid=2, blocked_by=[100], wait_age=3.0)
    ]
    rows += [row(pid=100, locktype="relation", relation=9, schema_name="public",
                 relation_name="t", database_name=None, classid=None, objid=None,
                 objsubid=None, mode="RowExclusiveLock")]  # fmt: skip
    names = sorted(rows[0], reverse=True)
    shuffled = Columns(names)
    compact = [CompactRow(shuffled, [r[k] for k in names]) for r in rows]
    fewer = Columns([k for k in names if k != "wait_age"])
    partial = [CompactRow(fewer, [r[k] for k in fewer.names]) for r in rows[:1]]
    options: dict[str, Any] = {"server": SERVER, "polled_at": NOW, "idle_after": 60.0}
    sessions = sessions_of(rows)
    plain = to_locks(rows, sessions, all_rows=True, **options)
    read = to_locks(compact, sessions, all_rows=True, **options)
    assert [lock.id for lock in read] == [lock.id for lock in plain]
    assert [lock.name for lock in read] == [lock.name for lock in plain]
    assert [lock.facts for lock in read] == [lock.facts for lock in plain]
    assert {lock.name for lock in read} == {"0", "1:1", "3:3", str(2 << 32 | 2), "public.t"}
    # A column the result lacks reads as NULL, as a dict without it does.
    lacking = [{k: v for k, v in rows[0].items() if k != "wait_age"}]
    assert [lock.facts for lock in to_locks(partial, sessions, all_rows=True, **options)] == [
        lock.facts for lock in to_locks(lacking, sessions, all_rows=True, **options)
    ]


def test_queries_with_nothing_secret_compile_no_sql_tokenizer() -> None:
    """Every session's query is scrubbed; one without a word that could name a
    secret is not read token by token, so no process pays to compile the
    tokenizers for it (a fresh interpreter: this one may have compiled them)."""
    import subprocess
    import sys

    script = (
        "from lockwatch.sources.postgres.records import trim_query\n"
        "from lockwatch.model import sql_secrets\n"
        "assert trim_query('SELECT pg_advisory_lock(42)') == 'SELECT pg_advisory_lock(42)'\n"
        "assert sql_secrets._compiled.cache_info().currsize == 0\n"
        "assert trim_query(\"ALTER ROLE a PASSWORD 'x'\") == \"ALTER ROLE a PASSWORD '***'\"\n"
        "assert sql_secrets._compiled.cache_info().currsize == 1\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_listing_renders_alike_locks_once_and_says_the_same() -> None:
    """`ls --json` builds one lock of a session's alike ones and gives the others
    its record with their own id, name, mode, database and key: the document is,
    byte for byte, the one built lock by lock, whatever the sessions are (idle
    past the limit, blocking, blocked by a prepared transaction, in another
    database, holding other kinds of lock) and whatever the names say."""
    from lockwatch.model.verdict import evaluate_all
    from lockwatch.sources.postgres.listing import render
    from lockwatch.sources.postgres.source import PgSnapshot

    xid = {"locktype": "transactionid", "transactionid": "900", "classid": None,
           "objid": None, "objsubid": None}  # fmt: skip
    relation = {"locktype": "relation", "relation": 9, "schema_name": "public",
                "relation_name": "t", "classid": None, "objid": None, "objsubid": None}  # fmt: skip
    rows = [row(pid=100, objid=n, state="idle", state_age=70.0) for n in range(5)]
    rows += [row(pid=100, objid=n, objsubid=1, mode="ShareLock", database_name=None)
             for n in range(3)]  # fmt: skip
    rows += [row(pid=200, objid=n, state="idle in transaction", state_age=5.0) for n in range(4)]
    rows += [row(pid=200, objid=9, classid=2, blocked_by=[0])]
    rows += [row(pid=300, granted=False, objid=3, blocked_by=[100], wait_age=2.0)]
    rows += [row(pid=400, **relation), row(pid=400, mode="RowExclusiveLock", **relation)]
    # An idle session's relation lock is not an idle holder's advisory lock.
    rows += [row(pid=100, state="idle", state_age=70.0, **relation)]
    rows += [row(pid=None, prepared_gid="batch-7", usename=None, application_name=None,
                 client=None, backend_type=None, state=None, query=None, xact_age=None,
                 query_age=None, state_age=None, **xid),
             row(pid=500, granted=False, blocked_by=[0], mode="ShareLock", **xid)]  # fmt: skip
    names = AdvisoryNames.build(namespaces={1: "agent"}, keys={4294967297: "nightly"})
    snapshot = PgSnapshot(SERVER, NOW, rows, sessions_of(rows), 160000, 60.0, names, all_rows=True)
    rendered = render(snapshot, NOW, "here", 1)
    locks = snapshot.locks
    verdicts = evaluate_all(locks, StaticProcesses(), FrozenClock(NOW), "here")
    memo: dict[Any, Any] = {}
    one_by_one = [lock_record(lock, v, NOW, memo) for lock, v in zip(locks, verdicts, strict=True)]
    assert rendered.array == records_json_array(one_by_one)
    assert rendered.stale == sum(v.state is State.STALE for v in verdicts) > 0
    assert [lock.id for lock in rendered.waiting] == [
        lock.id for lock, v in zip(locks, verdicts, strict=True) if v.state is State.WAITING
    ]
    # Some were followers indeed, and what tells them apart came through.
    records = orjson.loads(rendered.array)
    assert len(records) == len(locks) == len(rows)
    assert {r["name"] for r in records} >= {"agent:0", "agent:4", "nightly", "public.t"}
    assert {r["database"] for r in records if r["holder"]["pid"] == 100} == {"app", None}
