"""The verdict on a PostgreSQL lock (pg_locks + pg_stat_activity): what the
server says, with the bounds it allows and no more. pg_locks has no grant time,
so a held lock's age is a bound; a session's staleness is told by its client
process where lockwatch can see it, and only inferred from idle time where not."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from lockwatch.model.humanize import duration, named
from lockwatch.model.lock import Lock, Reason
from lockwatch.model.timestamps import plus_seconds, seconds_since
from lockwatch.model.verdict import State, Verdict, limit_text
from lockwatch.sources.postgres.terms import local_client, prepared_commands
from lockwatch.sources.sessions import client_gone, idle_client_alive

if TYPE_CHECKING:
    from lockwatch.sources.postgres.facts import PgBackend, PgLock

_IDLE_IN_TRANSACTION = ("idle in transaction", "idle in transaction (aborted)")
# Reason codes that are warnings about a live lock (its NOTE stands out).
WARNINGS = frozenset({"ddl_queue", "autovacuum_wraparound"})


def _pids(pids: tuple[int, ...]) -> str:
    return named("pid", [str(pid) for pid in pids])


def queue_reason(pg: PgLock, name: str) -> Reason | None:
    """`ddl_queue` for a waiter at the head of a lock queue (others queue behind its
    request) or queued behind such a waiter: while the head waits, every later
    request that conflicts with it waits too, even one the holder alone would let
    through (a SELECT behind an ALTER TABLE behind an idle transaction)."""
    count = pg.queued_behind
    if count:
        noun = "session queues" if count == 1 else "sessions queue"
        holders = [pid for pid in pg.blocked_by if pid and pid not in pg.queue_heads]
        root = (
            f", not on {_pids(tuple(holders))}, which holds the lock it waits for"
            if holders
            else ""
        )
        return Reason(
            "ddl_queue",
            f"queue head: {count} {noun} behind its waiting {pg.mode} request on {name}"
            f" ({_pids(pg.queued_here)}): they wait on this statement{root}; cancelling"
            " its statement (pg_cancel_backend) lets them through at once, and the statement"
            " can be run again later",
        )
    if pg.queue_heads:
        head = pg.queue_heads[0]
        query = f" ({pg.queue_head_query})" if pg.queue_head_query else ""
        # (queue_heads are all it waits on: one that also waits on a holder has none)
        then = f"cancelling pid {head}'s statement lets it through"
        if len(pg.queue_heads) > 1:
            then = f"it goes on once {_pids(pg.queue_heads)} no longer wait ahead of it"
        return Reason(
            "ddl_queue",
            f"queued behind pid {head}{query}, which itself waits for {name}: this session"
            f" waits on that queued request, not on a holder of the lock; {then}",
        )
    return None


def blocker_vacuum(pid: int, kind: str) -> Reason:
    """What a waiter blocked by an autovacuum worker can expect of it."""
    if kind == "wraparound":
        return Reason(
            "autovacuum_wraparound",
            f"blocked by an anti-wraparound autovacuum (pid {pid}): it will not yield to this"
            " request, and cancelling it only restarts it; this waits until it finishes",
        )
    if kind == "plain":
        return Reason(
            "autovacuum",
            f"blocked by an autovacuum worker (pid {pid}): it yields, this request cancels it"
            " after deadlock_timeout",
        )
    return Reason(
        "autovacuum",
        f"blocked by an autovacuum worker (pid {pid}) whose query is hidden: whether it will"
        " yield (it will not if it vacuums to prevent wraparound) cannot be told",
    )


def autovacuum_reason(backend: PgBackend) -> Reason | None:
    """What an autovacuum worker holding a lock will do: a plain one yields (the
    deadlock check of a conflicting request cancels it after deadlock_timeout); an
    anti-wraparound one does not, and cancelling it only has it started again."""
    kind = backend.autovacuum
    if kind is None:
        return None
    what = f" ({backend.query})" if backend.query else ""
    if kind == "wraparound":
        return Reason(
            "autovacuum_wraparound",
            f"held by an autovacuum worker vacuuming to prevent transaction ID wraparound{what}:"
            " it will not yield to a conflicting lock request, and cancelling it only restarts"
            " it (autovacuum starts it again while the table still needs it); let it finish",
        )
    if kind == "hidden":
        return Reason(
            "autovacuum",
            "held by an autovacuum worker whose query is hidden from lockwatch's role: whether"
            " it vacuums to prevent wraparound (and will not yield) cannot be told",
        )
    return Reason(
        "autovacuum",
        f"held by an autovacuum worker{what}: it yields, a conflicting lock request cancels"
        " it after deadlock_timeout, and it runs again later",
    )


def evaluate_pg(lock: Lock, pg: PgLock, now: datetime) -> Verdict:
    """pg_locks rows: waiting, blocking, and holders left behind.

    PostgreSQL keeps no time for a granted lock, so no age is claimed but a
    prepared transaction's (and a waiter's wait). Idle time alone is only a
    guess that a holder was forgotten: a client process found alive on this host
    overrules it (a dedicated lock connection sits idle while its program works
    elsewhere), one found gone is proof, and where the client cannot be found the
    guess is marked `inferred`. A session whose state lockwatch may not see is
    `unknown`, never `active`.
    """
    backend = pg.backend
    age = seconds_since(lock.acquired_at, now)
    info: list[Reason] = []
    alive = None if backend.pid is None else True
    gid = backend.prepared_gid
    if gid is not None:
        info.append(_prepared_reason(pg, gid))
    hidden = _hidden(backend) if backend.hidden else None
    if not pg.granted:
        return _waiting(lock, pg, now, [*info, hidden] if hidden is not None else info, age)
    if pg.blocking_here:
        count = len(pg.blocking_here)
        noun = "session" if count == 1 else "sessions"
        info.insert(
            0, Reason("blocking", f"blocks {count} waiting {noun}: {_pids(pg.blocking_here)}")
        )
    vacuum = autovacuum_reason(backend)
    if vacuum is not None:
        info.insert(0, vacuum)
    if gid is not None:
        return _prepared_held(lock, pg, info, age, alive)
    client = backend.client_process
    if client is not None and not client.alive:
        ends = "these locks until the server notices or the backend is terminated"
        gone = client_gone(client.label, backend.state or "", "backend", ends)
        return Verdict(State.STALE, (gone, *info), age_seconds=age, alive=alive)
    if hidden is not None and client is None:
        # Whether it sits idle in a transaction is exactly what is hidden.
        return Verdict(State.UNKNOWN, (hidden, *info), age_seconds=age, alive=alive)
    return _idle_rule(lock, pg, now, info, age, alive)


def _prepared_reason(pg: PgLock, gid: str) -> Reason:
    """A prepared transaction's hold, and the commands that end it."""
    commit, rollback = prepared_commands(gid)
    where = f" in database {pg.database}" if pg.database else ""
    return Reason(
        "prepared_transaction",
        f"held by prepared transaction {gid!r}: no session holds it, so terminating a"
        f" backend cannot free it; run {commit} (keep its work) or {rollback} (undo"
        f" it){where}",
    )


def _waiting(
    lock: Lock, pg: PgLock, now: datetime, extra: list[Reason], age: float | None
) -> Verdict:
    """A request not granted: who it waits on, for how long, its queue."""
    waited = seconds_since(pg.wait_start, now)
    blockers = [
        f"pid {who}"
        if isinstance(who, int)
        else "a prepared transaction"
        if who == "prepared:?"
        else f"prepared transaction {who.removeprefix('prepared:')!r}"
        for who in pg.waits_on()
    ]
    how_long = f" for {duration(waited)}" if waited is not None else ""
    by = f", blocked by {', '.join(blockers)}" if blockers else ""
    queue = queue_reason(pg, lock.name)
    waiting = Reason("waiting", f"waiting{how_long} for {pg.mode} on {lock.name}{by}")
    said = [waiting] if queue is None else [waiting, queue]
    said += [blocker_vacuum(pid, kind) for pid, kind in pg.blocked_by_autovacuum]
    return Verdict(State.WAITING, (*said, *extra), age_seconds=age, alive=True)


def _prepared_held(
    lock: Lock, pg: PgLock, info: list[Reason], age: float | None, alive: bool | None
) -> Verdict:
    """A prepared transaction's lock: stale once prepared longer than the limit."""
    limit = pg.idle_after
    stale: list[Reason] = []
    deadline: datetime | None = None
    if limit is not None and age is not None and lock.acquired_at is not None:
        if age > limit:
            stale.append(
                Reason(
                    "prepared_too_long",
                    f"prepared {duration(age)} ago (limit {limit_text(limit)}) and never"
                    " committed or rolled back: nothing will release its locks",
                )
            )
        else:
            deadline = plus_seconds(lock.acquired_at, limit)
    return _stale_or_active(stale, info, age, alive, deadline)


def _idle_rule(
    lock: Lock, pg: PgLock, now: datetime, info: list[Reason], age: float | None, alive: bool | None
) -> Verdict:
    """A session's lock by its idle time: stale past the limit idle in a
    transaction (or idle holding a session advisory lock), unless its client
    process is seen alive."""
    backend = pg.backend
    client = backend.client_process
    limit = pg.idle_after
    stale: list[Reason] = []
    deadline: datetime | None = None
    idle_for = seconds_since(backend.state_since, now)
    if limit is not None and idle_for is not None:
        code = None
        if backend.state in _IDLE_IN_TRANSACTION:
            code, what = "idle_in_transaction", f"{backend.state}, holding locks,"
        elif backend.state == "idle" and pg.locktype == "advisory":
            # Outside a transaction only session-level advisory locks survive:
            # the leaked lock of a pooled connection.
            code, what = "idle_holder", "idle while still holding a session advisory lock,"
        if code is not None:
            if idle_for > limit:
                idle = f"{what} for {duration(idle_for)} (limit {limit_text(limit)})"
                if client is not None:
                    return idle_client_alive(code, idle, client.label, info, age, alive)
                stale.append(Reason(code, idle))
                stale.append(_inferred(backend))
            elif backend.state_since is not None:
                deadline = plus_seconds(backend.state_since, limit)
    return _stale_or_active(stale, info, age, alive, deadline)


def _stale_or_active(
    stale: list[Reason],
    info: list[Reason],
    age: float | None,
    alive: bool | None,
    deadline: datetime | None,
) -> Verdict:
    """Stale for `stale`'s reasons if any; else active until `deadline`."""
    return Verdict(
        State.STALE if stale else State.ACTIVE,
        (*stale, *info),
        age_seconds=age,
        alive=alive,
        next_change_at=deadline if not stale else None,
    )


def _hidden(backend: PgBackend) -> Reason:
    role = backend.monitor_role
    grant = f"GRANT pg_read_all_stats TO {role};" if role else "GRANT pg_read_all_stats TO <role>;"
    whose = f" ({role})" if role else ""
    return Reason(
        "insufficient_privilege",
        f"this session's state and query are hidden from lockwatch's role{whose}, so whether"
        f" it sits idle holding its locks cannot be told; to see it: {grant}",
    )


def _inferred(backend: PgBackend) -> Reason:
    client = backend.client
    if client is None:
        where = "its client's address is not known"
    elif local_client(client):
        where = (
            f"its client ({client}) is on the server's host, but lockwatch could not find its"
            " process there"
        )
    else:
        where = f"its client ({client}) is on another host"
    return Reason(
        "inferred",
        f"stale by idle time alone: {where}, so whether it is still at work cannot be"
        " checked; breaking it needs its name typed (CLI: --force)",
    )
