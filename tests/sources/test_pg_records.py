"""pg_locks rows to Lock records, and their verdicts: no server needed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.blocking import from_locks
from lockwatch.model.lock import Lock
from lockwatch.model.pg import AdvisoryNames
from lockwatch.model.process import StaticProcesses
from lockwatch.model.report import lock_json
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.postgres.records import to_locks, trim_query
from tests.conftest import NOW

SERVER = "monitor@db:5432/app"
TARGET = (
    "locktype", "database", "relation", "page", "tuple", "virtualxid", "transactionid",
    "classid", "objid", "objsubid",
)  # fmt: skip


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
    }  # fmt: skip
    base.update(values)
    # As the query computes it: format('%s/%s/...') writes NULL as an empty string.
    base["target"] = "/".join("" if base[k] is None else str(base[k]) for k in TARGET)
    return base


SESSION = (
    "usename", "application_name", "client", "backend_type", "state", "wait_event_type",
    "wait_event", "query", "xact_age", "query_age", "state_age",
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
    assert lock.pg is not None and lock.pg.backend.xact_start == NOW - timedelta(seconds=30)
    assert lock.id.startswith(f"pg:{SERVER}:100:")


def test_idle_in_transaction_past_the_limit_is_stale() -> None:
    rows = [
        row(locktype="transactionid", transactionid="728", classid=None, objid=None,
            objsubid=None, mode="ExclusiveLock", state="idle in transaction", state_age=61.0),
    ]  # fmt: skip
    ((lock, verdict),) = judged(rows, all_rows=True)
    assert verdict.state is State.STALE
    assert verdict.codes == ("idle_in_transaction",)
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
        assert verdict.codes == ("idle_holder",)


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
    ((_, verdict),) = judged([row(query="<insufficient privilege>", state=None)])
    assert "insufficient_privilege" in verdict.codes
    assert "pg_read_all_stats" in verdict.reasons[-1].message


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
    assert (100, State.STALE, ("idle_holder",)) in states
    assert (100, State.STALE, ("idle_holder", "blocking")) in states
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
    assert waiter.pg is not None
    assert waiter.pg.wait_start == NOW - timedelta(seconds=9)
