"""The verdict on a MySQL or MariaDB lock: what the server says, with the
bounds it allows and no more.

A waiter is `waiting` (a DDL statement at the head of a table's metadata-lock
queue also says `ddl_queue`: the statements queued behind it). A holder's
staleness is told by its client process where lockwatch can see it (gone:
stale; alive: not stale on idle time alone), and only inferred from idle time
where not (`inferred`: acting on it needs its name typed). A session lockwatch's
user may not see is `unknown`, with the GRANT that shows it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from lockwatch.model.humanize import duration, named
from lockwatch.model.lock import Lock, Reason
from lockwatch.model.timestamps import plus_seconds, seconds_since
from lockwatch.model.verdict import State, Verdict, limit_text
from lockwatch.sources.sessions import client_gone, idle_client_alive

if TYPE_CHECKING:
    from lockwatch.sources.mysql.facts import MyLock, MySession

# Reason codes that are warnings about a live lock.
WARNINGS = frozenset({"ddl_queue", "client_dead", "idle_in_transaction", "insufficient_privilege"})

_WHAT = {"get_lock": "named lock", "innodb_row": "row lock", "metadata_lock": "metadata lock"}
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def threads(ids: tuple[int, ...] | list[int]) -> str:
    """`thread 143`, `threads 143, 150`: as many as the ids are."""
    return named("thread", [str(thread) for thread in ids])


def evaluate_my(lock: Lock, my: MyLock, now: datetime) -> Verdict:
    session = my.session
    age = seconds_since(lock.acquired_at, now)
    hidden = hidden_reason(session.monitor_user) if session.hidden else None
    if not my.granted:
        return _waiting(lock, my, now, hidden, age)
    info = _held_info(my)
    client = session.client_process
    if client is not None and not client.alive:
        ends = "this lock until the server notices or the connection is killed"
        gone = client_gone(client.label, session.state_text or "", "server thread", ends)
        return Verdict(State.STALE, (gone, *info), age_seconds=age, alive=False)
    if hidden is not None:
        return Verdict(State.UNKNOWN, (hidden, *info), age_seconds=age, alive=None)
    return _idle_rule(lock, my, now, info, age)


def _waiting(
    lock: Lock, my: MyLock, now: datetime, hidden: Reason | None, age: float | None
) -> Verdict:
    """A request not granted: who it waits on, for how long, its DDL queue."""
    what = f"{_WHAT.get(my.kind, my.kind)} {lock.name}"
    waited = seconds_since(my.wait_start, now)
    how_long = f" for {duration(waited)}" if waited is not None else ""
    if my.name_unread is not None:
        return _unread(my, how_long, hidden, age)
    by = ""
    if my.blocked_by:
        suspects = " (suspected: no metadata_lock_info plugin)" if my.suspected else ""
        by = f", blocked by {threads(my.blocked_by)}{suspects}"
    reasons = [Reason("waiting", f"waiting{how_long} for {my.mode} on {what}{by}")]
    if my.queued_behind:
        count = my.queued_behind
        noun = "statement is" if count == 1 else "statements are"
        reasons.append(
            Reason(
                "ddl_queue",
                f"head of the metadata-lock queue on {my.target}: {count} {noun} queued"
                " behind this DDL, which itself waits; cancelling it (KILL QUERY) lets"
                " them run at once",
            )
        )
    elif my.queue_head is not None:
        reasons.append(
            Reason(
                "ddl_queue",
                f"queued behind DDL thread {my.queue_head}, which itself waits for"
                f" {my.target}'s metadata lock",
            )
        )
    if hidden is not None:
        reasons.append(hidden)
    return Verdict(State.WAITING, tuple(reasons), age_seconds=age, alive=True)


def _held_info(my: MyLock) -> list[Reason]:
    """What a granted lock's verdict tells besides: whom it blocks, and whether
    its holder is only suspected."""
    info: list[Reason] = []
    if my.blocking:
        count = len(my.blocking)
        noun = "session" if count == 1 else "sessions"
        info.append(Reason("blocking", f"blocks {count} waiting {noun}: {threads(my.blocking)}"))
    if my.suspected:
        info.append(
            Reason(
                "inferred",
                f"a suspected holder only: it had a transaction open before the waiters on"
                f" {my.target} began waiting, and may hold its metadata lock; without the"
                " metadata_lock_info plugin MariaDB does not say who holds a table's metadata"
                " lock (INSTALL SONAME 'metadata_lock_info')",
            )
        )
    return info


def _idle_rule(
    lock: Lock, my: MyLock, now: datetime, info: list[Reason], age: float | None
) -> Verdict:
    """A held lock by its session's idle time: stale past the limit idle in a
    transaction (or idle holding a named lock), unless its client process is
    seen alive."""
    session = my.session
    client = session.client_process
    limit = my.idle_after
    idle_for = seconds_since(session.state_since, now) if session.idle else None
    stale: list[Reason] = []
    deadline: datetime | None = None
    if limit is not None and idle_for is not None and session.state_since is not None:
        if session.trx_started is not None:
            code, doing = "idle_in_transaction", "idle in transaction, holding locks,"
        elif my.kind == "get_lock":
            code, doing = "idle_holder", "idle while still holding a named lock,"
        else:
            code, doing = "", ""
        if code and idle_for > limit:
            idle = f"{doing} for {duration(idle_for)} (limit {limit_text(limit)})"
            if client is not None:
                return idle_client_alive(code, idle, client.label, info, age, True)
            stale.extend((Reason(code, idle), inferred_reason(session)))
        elif code:
            deadline = plus_seconds(session.state_since, limit)
    return Verdict(
        State.STALE if stale else State.ACTIVE,
        (*stale, *info),
        age_seconds=age,
        alive=True,
        next_change_at=None if stale else deadline,
    )


def _unread(my: MyLock, how_long: str, hidden: Reason | None, age: float | None) -> Verdict:
    """A GET_LOCK waiter whose name its statement does not tell: `unknown`, put
    behind no holder (a guess would blame an innocent session)."""
    reasons = [
        Reason(
            "name_unread",
            f"waiting{how_long} in GET_LOCK (state 'User lock'), for a name lockwatch cannot"
            f" read: {my.name_unread}; so who blocks it is not known (its statement is in the"
            " details; IS_USED_LOCK(name) names the holder)",
        )
    ]
    if hidden is not None:
        reasons.append(hidden)
    return Verdict(State.UNKNOWN, tuple(reasons), age_seconds=age, alive=True)


def hidden_reason(user: str | None) -> Reason:
    who = f"'{user}'" if user else "<user>"
    return Reason(
        "insufficient_privilege",
        "this session is hidden from lockwatch's user, so whether it sits idle holding its"
        f" locks cannot be told; to see it: GRANT PROCESS ON *.* TO {who}"
        " (MySQL 8 also: GRANT SELECT ON performance_schema.* TO it)",
    )


def inferred_reason(session: MySession) -> Reason:
    client = session.client
    if client is None:
        where = "its client's address is not known"
    elif client in _LOOPBACK:
        how = "its unix socket" if client == "localhost" else f"{session.host}"
        where = (
            f"its client ({how}) is on the server's host, but lockwatch could not find its process"
        )
    else:
        where = f"its client ({session.host}) is on another host"
    return Reason(
        "inferred",
        f"stale by idle time alone: {where}, so whether it is still at work cannot be"
        " checked; breaking it needs its name typed (CLI: --force)",
    )
