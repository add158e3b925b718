"""The rules of issue 35, item 5, on fakes (no server): a waiting lock that others
queue behind is a queue head (`ddl_queue`, how many), a waiter queued behind one
says so, its break offers cancelling its statement first and terminating the root
second, and an autovacuum worker holding a lock is named as such — a plain one
yields, an anti-wraparound one will not. The real ALTER TABLE queue is
test_pg_ddl_queue.py's."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from lockwatch.model.action import Asked, Kind
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.verdict import State
from lockwatch.sources.postgres import display
from lockwatch.sources.postgres.actions import ACTIONS, queue_choices
from lockwatch.sources.postgres.facts import PgBackend, PgLock
from lockwatch.sources.postgres.records import index_waits, to_locks
from lockwatch.sources.postgres.rules import evaluate_pg

NOW = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
SERVER = "monitor@db1:5432/app"
TARGET = "relation/5/16384////////"


def backend(pid: int, state: str = "active", query: str = "", **more: object) -> PgBackend:
    return PgBackend(
        pid=pid,
        user="app",
        state=state,
        query=query or None,
        state_since=NOW - timedelta(seconds=5),
        backend_start=NOW - timedelta(hours=1),
        **more,  # type: ignore[arg-type]
    )


def lock_of(facts: PgLock, name: str = "public.orders") -> Lock:
    return Lock(
        id=f"pg:{SERVER}:{facts.backend.pid}:{TARGET}:{facts.mode}:"
        + ("held" if facts.granted else "wait"),
        source="postgres",
        format="pg_locks",
        name=name,
        path=None,
        holder=Holder(pid=facts.backend.pid, actor=facts.backend.user),
        acquired_at=None,
        content={"target": TARGET},
        facts=dataclasses.replace(facts, idle_after=60.0),
    )


def relation(
    who: PgBackend,
    mode: str,
    *,
    granted: bool,
    blocked_by: tuple[int, ...] = (),
    here: tuple[int, ...] = (),
    heads: tuple[int, ...] = (),
    head_query: str | None = None,
    queued: tuple[int, ...] = (),
) -> Lock:
    return lock_of(
        PgLock(
            server=SERVER,
            locktype="relation",
            mode=mode,
            granted=granted,
            database="app",
            backend=who,
            blocked_by=blocked_by,
            blocking=here,
            blocking_here=here,
            queue_heads=heads,
            queue_head_query=head_query,
            queued_here=queued,
        )
    )


ROOT, ALTER, READERS = 100, 200, (301, 302)


def outage() -> tuple[Lock, Lock, Lock]:
    root = relation(
        backend(ROOT, "idle in transaction"), "AccessShareLock", granted=True, here=(ALTER,)
    )
    head = relation(
        backend(ALTER, query="ALTER TABLE orders ADD COLUMN x int"),
        "AccessExclusiveLock",
        granted=False,
        blocked_by=(ROOT,),
        here=READERS,
        queued=READERS,
    )
    reader = relation(
        backend(READERS[0], query="SELECT count(*) FROM orders"),
        "AccessShareLock",
        granted=False,
        blocked_by=(ALTER,),
        heads=(ALTER,),
        head_query="ALTER TABLE orders ADD COLUMN x int",
    )
    return root, head, reader


def _facts(lock: Lock) -> PgLock:
    assert isinstance(lock.facts, PgLock)
    return lock.facts


def test_a_waiter_others_queue_behind_is_the_queue_head() -> None:
    _, head, _ = outage()
    verdict = evaluate_pg(head, _facts(head), NOW)
    assert verdict.state is State.WAITING
    assert verdict.codes[:2] == ("waiting", "ddl_queue")
    said = verdict.reasons[1].message
    assert said.startswith(
        "queue head: 2 sessions queue behind its waiting AccessExclusiveLock request on"
        " public.orders (pids 301, 302): they wait on this statement, not on pid 100"
    )
    assert "pg_cancel_backend" in said
    assert _facts(head).queued_behind == 2
    assert "ddl_queue" in _facts(head).warning_codes()


def test_a_reader_queued_behind_the_head_says_it_waits_on_it() -> None:
    _, _, reader = outage()
    verdict = evaluate_pg(reader, _facts(reader), NOW)
    assert verdict.state is State.WAITING
    assert verdict.codes == ("waiting", "ddl_queue")
    assert verdict.reasons[1].message == (
        "queued behind pid 200 (ALTER TABLE orders ADD COLUMN x int), which itself waits for"
        " public.orders: this session waits on that queued request, not on a holder of the"
        " lock; cancelling pid 200's statement lets it through"
    )
    assert _facts(reader).queued_behind == 0


def test_a_waiter_also_blocked_by_a_holder_is_no_queue_and_its_blocker_no_head() -> None:
    """Two waiters for one exclusive lock (an advisory key, a row): the second
    waits on the holder as well as on the first's request, so the first's going
    lets nobody through; neither is told it is in a queue it could leave."""
    rows = [
        _row(ROOT, "ExclusiveLock", True, None),
        _row(ALTER, "ExclusiveLock", False, [ROOT]),
        _row(303, "ExclusiveLock", False, [ROOT, ALTER]),
    ]
    locks = to_locks(
        rows, {}, server=SERVER, polled_at=NOW, idle_after=60.0, waits=index_waits(rows)
    )
    waiters = [lock for lock in locks if not _facts(lock).granted]
    assert len(waiters) == 2
    for lock in waiters:
        facts = _facts(lock)
        assert facts.queued_behind == 0 and facts.queue_heads == (), facts.backend.pid
        assert "ddl_queue" not in evaluate_pg(lock, facts, NOW).codes
    assert queue_choices(waiters[0]) is None and queue_choices(waiters[1]) is None


def test_a_holder_or_a_lone_waiter_is_no_queue_head() -> None:
    root, _, _ = outage()
    lone = relation(backend(400), "AccessExclusiveLock", granted=False, blocked_by=(ROOT,))
    assert "ddl_queue" not in evaluate_pg(root, _facts(root), NOW).codes
    assert "ddl_queue" not in evaluate_pg(lone, _facts(lone), NOW).codes
    assert _facts(root).queued_behind == 0 and _facts(lone).queued_behind == 0


def test_the_break_of_a_queue_head_offers_cancel_first_and_the_root_second() -> None:
    root, head, reader = outage()
    offered = queue_choices(head)
    assert offered is not None
    assert [o.label for o in offered.options] == ["cancel its statement", "terminate root pid 100"]
    assert ACTIONS.choices(Kind.BREAK, head) == offered
    assert ACTIONS.choices(Kind.CANCEL, head) is None
    assert queue_choices(reader) is None and queue_choices(root) is None

    verdict = evaluate_pg(head, _facts(head), NOW)
    peers = [root, head, reader]
    first = ACTIONS.plan(
        Kind.BREAK, head, verdict, Asked(peers=peers, given=dict(offered.options[0].given))
    )
    assert first.kind is Kind.CANCEL and first.refusal is None and not first.needs_name
    assert first.lock is head
    assert first.effect.startswith(f"call pg_cancel_backend({ALTER}) on {SERVER}")
    assert "the 2 sessions queued behind it (pids 301, 302) no longer wait on it" in first.effect

    second = ACTIONS.plan(
        Kind.BREAK, head, verdict, Asked(peers=peers, given=dict(offered.options[1].given))
    )
    assert second.kind is Kind.BREAK and second.refusal is None
    assert second.lock is root and second.needs_name
    assert second.why_name is not None and "lower-risk" in second.why_name
    assert second.effect.startswith(f"call pg_terminate_backend({ROOT}) on {SERVER}")

    # Without a way chosen (the CLI), a break is what it always was.
    plain = ACTIONS.plan(Kind.BREAK, head, verdict, Asked(peers=peers))
    assert plain.kind is Kind.BREAK and plain.lock is head
    assert plain.effect.endswith(
        "; cancelling only its statement (c, lockwatch cancel) would free the 2 sessions"
        " queued behind it and keep its session"
    )


def test_a_root_not_among_the_peers_or_not_a_root_is_refused() -> None:
    root, head, reader = outage()
    verdict = evaluate_pg(head, _facts(head), NOW)
    given = {"pg_way": "terminate_root", "pg_root": ROOT}
    missing = ACTIONS.plan(Kind.BREAK, head, verdict, Asked(peers=[head, reader], given=given))
    assert missing.refusal is not None and missing.refusal[0] == "changed"
    for bad in (READERS[0], "100", None):
        asked = Asked(peers=[root, head, reader], given={**given, "pg_root": bad})
        refused = ACTIONS.plan(Kind.BREAK, head, verdict, asked)
        assert refused.refusal is not None and refused.refusal[0] == "changed", bad


def test_autovacuum_holders_are_named_and_told_apart() -> None:
    plain = backend(500, query="autovacuum: VACUUM public.orders", backend_type="autovacuum worker")
    wrap = backend(
        501,
        query="autovacuum: VACUUM public.orders (to prevent wraparound)",
        backend_type="autovacuum worker",
    )
    assert plain.autovacuum == "plain" and wrap.autovacuum == "wraparound"
    assert backend(502, query="SELECT 1", backend_type="client backend").autovacuum is None
    # A client naming its query "autovacuum: …" is no worker, unless the type is hidden.
    assert backend(503, query="autovacuum: x", backend_type="client backend").autovacuum is None
    assert backend(504, query="autovacuum: VACUUM t").autovacuum == "plain"
    # Its query hidden from our role: which kind it is is not guessed.
    hidden = backend(505, query="<insufficient privilege>", backend_type="autovacuum worker")
    assert hidden.autovacuum == "hidden"
    held = relation(hidden, "ShareUpdateExclusiveLock", granted=True, here=(ALTER,))
    judged = evaluate_pg(held, _facts(held), NOW)
    assert judged.state is State.UNKNOWN and judged.codes[0] == "insufficient_privilege"
    said = next(r for r in judged.reasons if r.code == "autovacuum")
    assert "cannot be told" in said.message

    yields = relation(plain, "ShareUpdateExclusiveLock", granted=True, here=(ALTER,))
    verdict = evaluate_pg(yields, _facts(yields), NOW)
    assert verdict.state is State.ACTIVE
    assert verdict.codes[0] == "autovacuum"
    assert "it yields" in verdict.reasons[0].message
    assert "deadlock_timeout" in verdict.reasons[0].message

    stays = relation(wrap, "ShareUpdateExclusiveLock", granted=True, here=(ALTER,))
    verdict = evaluate_pg(stays, _facts(stays), NOW)
    assert verdict.codes[0] == "autovacuum_wraparound"
    assert "will not yield" in verdict.reasons[0].message
    assert "cancelling it only restarts it" in verdict.reasons[0].message
    assert "autovacuum_wraparound" in _facts(stays).warning_codes()

    assert display.holder_text(wrap) == "autovacuum (to prevent wraparound) (pid 501, app)"
    assert display.confirm_word(wrap) == "501"
    cancel = ACTIONS.plan(Kind.CANCEL, stays, verdict, Asked(peers=[stays]))
    assert "only delays it" in cancel.effect
    record = _facts(stays).record(stays, verdict, NOW, {})
    assert record["holder"]["autovacuum"] == "wraparound"
    assert record["queued_behind"] == 0 and record["queue_head"] is None


def _row(pid: int, mode: str, granted: bool, blocked_by: list[int] | None) -> dict[str, object]:
    return {
        "locktype": "relation",
        "mode": mode,
        "granted": granted,
        "pid": pid,
        "virtualtransaction": f"{pid}/1",
        "database": 5,
        "database_name": "app",
        "relation": 16384,
        "schema_name": "public",
        "relation_name": "orders",
        "page": None,
        "tuple": None,
        "virtualxid": None,
        "transactionid": None,
        "classid": None,
        "objid": None,
        "objsubid": None,
        "object_name": None,
        "wait_age": None if granted else 1.0,
        "prepared_gid": None,
        "prepared_owner": None,
        "prepared_age": None,
        "blocked_by": blocked_by,
        "held_kinds": None,
        "terraform_state": None,
        "target": TARGET,
    }


def test_records_find_the_head_and_its_queue_from_the_poll_rows() -> None:
    rows = [
        _row(ROOT, "AccessShareLock", True, None),
        _row(ALTER, "AccessExclusiveLock", False, [ROOT]),
        _row(READERS[0], "AccessShareLock", False, [ALTER]),
        _row(READERS[1], "AccessShareLock", False, [ALTER]),
    ]
    sessions = {
        ALTER: {"query": "ALTER TABLE orders ADD COLUMN x int", "state": "active"},
        ROOT: {"state": "idle in transaction"},
    }
    locks = to_locks(
        rows, sessions, server=SERVER, polled_at=NOW, idle_after=60.0, waits=index_waits(rows)
    )
    by_pid = {(_facts(lk).backend.pid, _facts(lk).granted): _facts(lk) for lk in locks}
    assert by_pid[(ALTER, False)].queued_behind == 2
    assert by_pid[(ALTER, False)].queue_heads == ()
    for pid in READERS:
        assert by_pid[(pid, False)].queue_heads == (ALTER,)
        assert by_pid[(pid, False)].queue_head_query == "ALTER TABLE orders ADD COLUMN x int"
    assert by_pid[(ROOT, True)].blocking_here == (ALTER,)


def test_a_waiter_blocked_by_autovacuum_is_told_whether_it_will_yield() -> None:
    vacuum, plain_vacuum, client = 600, 601, 602
    rows = [
        _row(vacuum, "ShareUpdateExclusiveLock", True, None),
        _row(ALTER, "AccessExclusiveLock", False, [vacuum, plain_vacuum, client]),
    ]
    sessions = {
        vacuum: {
            "backend_type": "autovacuum worker",
            "query": "autovacuum: VACUUM public.orders (to prevent wraparound)",
        },
        plain_vacuum: {"backend_type": "autovacuum worker", "query": "autovacuum: ANALYZE t"},
        # A client calling its query "autovacuum:" is not one.
        client: {"backend_type": "client backend", "query": "autovacuum: (to prevent wraparound)"},
    }
    locks = to_locks(rows, sessions, server=SERVER, polled_at=NOW, idle_after=60.0)
    (waiter,) = [lk for lk in locks if not _facts(lk).granted]
    assert _facts(waiter).blocked_by_autovacuum == ((vacuum, "wraparound"), (plain_vacuum, "plain"))
    verdict = evaluate_pg(waiter, _facts(waiter), NOW)
    assert verdict.codes == ("waiting", "autovacuum_wraparound", "autovacuum")
    assert verdict.reasons[1].message.startswith(
        f"blocked by an anti-wraparound autovacuum (pid {vacuum}): it will not yield"
    )
    assert "cancels it after deadlock_timeout" in verdict.reasons[2].message
    (holder,) = [lk for lk in locks if _facts(lk).granted]
    assert _facts(holder).backend.autovacuum == "wraparound"
    assert evaluate_pg(holder, _facts(holder), NOW).codes[0] == "autovacuum_wraparound"


def test_a_waiter_behind_two_queued_requests_is_counted_behind_neither() -> None:
    """An ALTER (pid 200) queued on the holder, a SHARE request (pid 201) queued on
    the ALTER, an INSERT (pid 202) on both: cancelling 200 grants 201, whose SHARE
    still blocks 202; cancelling 201 leaves 202 behind 200. No single cancel lets
    202 through, so neither head promises it."""
    rows = [
        _row(ROOT, "AccessShareLock", True, None),
        _row(ALTER, "AccessExclusiveLock", False, [ROOT]),
        _row(201, "ShareLock", False, [ALTER]),
        _row(202, "RowExclusiveLock", False, [ALTER, 201]),
    ]
    locks = to_locks(
        rows, {}, server=SERVER, polled_at=NOW, idle_after=60.0, waits=index_waits(rows)
    )
    by_pid = {_facts(lk).backend.pid: _facts(lk) for lk in locks if not _facts(lk).granted}
    assert by_pid[ALTER].queued_here == (201,)
    assert by_pid[201].queued_here == ()
    assert by_pid[202].queue_heads == (ALTER, 201)  # it waits on both requests
