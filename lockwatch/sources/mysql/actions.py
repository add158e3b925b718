"""The mysql source's actions: break (KILL CONNECTION: the holder's transaction
rolls back and every lock it holds goes) and cancel (KILL QUERY: its statement
stops, its connection and transaction stay).

Compare-and-swap: the kill runs on the server only if the thread is still the
one the operator saw — the same thread id, user and client host:port (which
names its connection), the same transaction start for a row-lock holder, the
named lock still its own, and for a holder judged stale for idling, not one
statement run since (its QUERY_ID). On MariaDB the check and the KILL are one
statement (BEGIN NOT ATOMIC … END); on MySQL, which has no such block, the
check runs just before the KILL on the same connection. A changed thread is
refused, with nothing killed. PyMySQL is imported only when an action runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.action import ActionRefused, Done, Kind, Plan, refused
from lockwatch.model.facts import Row
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.contract import ActionsBase, SourceError, Wanted
from lockwatch.sources.mysql.display import held_text
from lockwatch.sources.mysql.facts import MyLock
from lockwatch.sources.mysql.rules import threads
from lockwatch.sources.servers import naming

if TYPE_CHECKING:
    from lockwatch.model.action import Asked, Doing

NAME = "mysql"
_IDLE_CODES = ("idle_in_transaction", "idle_holder")


def _my(lock: Lock) -> MyLock:
    assert isinstance(lock.facts, MyLock)
    return lock.facts


def _effect_of_break(my: MyLock, peers: Sequence[Lock]) -> str:
    session = my.session
    parts = []
    if session.trx_started is not None:
        parts.append("rolls back its open transaction")
    parts.append("releases every lock its connection holds (named, row and metadata locks)")
    mine = [
        p.facts
        for p in peers
        if isinstance(p.facts, MyLock)
        and p.facts.server == my.server
        and p.facts.session.thread_id == session.thread_id
        and p.facts.granted
    ]
    waiters = sorted({w for facts in mine or [my] for w in facts.blocking})
    if waiters:
        parts.append(f"{threads(waiters)} waiting on it may go ahead")
    else:
        parts.append("nobody waits on it")
    return ", ".join(parts)


def plan_for(kind: Kind, lock: Lock, verdict: Verdict, peers: Sequence[Lock]) -> Plan:
    my = _my(lock)
    session = my.session
    thread = session.thread_id
    who = f"thread {thread}" + (f" ({session.user}@{session.host})" if session.user else "")
    if session.hidden:
        why = (
            f"{who} is hidden from lockwatch's user (no PROCESS privilege), so it cannot be"
            " checked before a kill: GRANT PROCESS ON *.* to lockwatch's user"
        )
        return refused(kind, lock, verdict, "insufficient_privilege", why)
    needs_name, why_name = naming(lock, verdict)
    if kind is Kind.BREAK:
        effect = f"KILL CONNECTION {thread} on {my.server} ({who}): {_effect_of_break(my, peers)}"
        return Plan(
            kind,
            lock,
            verdict,
            "connection_killed",
            effect,
            needs_name=needs_name,
            why_name=why_name,
        )
    if kind is Kind.CANCEL:
        if session.idle:
            why = (
                f"{who} is {session.state_text}: it runs no statement to cancel, and KILL QUERY"
                " would leave its locks held (break ends its connection)"
            )
            return refused(kind, lock, verdict, "idle", why)
        statement = f" ({session.query})" if session.query else ""
        after = (
            f"; the {my.queued_behind} statement(s) queued behind this DDL run at once"
            if my.queued_behind
            else ""
        )
        effect = (
            f"KILL QUERY {thread} on {my.server}: stops its statement{statement}; its connection"
            f" and transaction stay, with the locks they already hold{after}"
        )
        return Plan(kind, lock, verdict, "query_killed", effect)
    return refused(kind, lock, verdict, "unsupported", f"MySQL locks cannot be {kind.value}ed")


class MyActions(ActionsBase):
    name = NAME
    kinds = frozenset({Kind.BREAK, Kind.CANCEL})

    def reach(self, wanted: Wanted) -> Mapping[str, Any]:
        from lockwatch.sources.mysql.dsn import endpoint_for
        from lockwatch.sources.mysql.settings import DEFAULTS, MySettings, resolve

        settings: MySettings = wanted.settings(NAME) or DEFAULTS
        try:
            known = {endpoint.name: endpoint for endpoint in resolve(wanted, settings)}
        except SourceError:
            raise
        environ = dict(wanted.environ)

        def endpoint(server: str) -> Any:
            return known.get(server) or endpoint_for(server, environ, settings.password_file)

        return {"mysql_endpoint": endpoint}

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        return plan_for(kind, lock, verdict, asked.peers)

    def run(self, plan: Plan, doing: Doing) -> Done:
        from lockwatch.sources.mysql.actor import kill

        my = _my(plan.lock)
        find = doing.reach.get("mysql_endpoint")
        endpoint = find(my.server) if find is not None else None
        if endpoint is None:
            raise ActionRefused("no_dsn", f"no DSN for {my.server}: name the server with --mysql")
        stale_idle = plan.verdict.state is State.STALE and any(
            code in plan.verdict.codes for code in _IDLE_CODES
        )
        # Judged stale for idling: still untouched now, unless forced against the verdict.
        untouched = stale_idle and (not doing.force or plan.why_name is not None)
        connection = plan.kind is Kind.BREAK
        kill(endpoint, plan.lock, connection=connection, untouched=untouched)
        session = my.session
        details = {
            "thread_id": session.thread_id,
            "user": session.user,
            "host": session.host,
            "statement": session.query,
        }
        verb = "killed the connection of" if connection else "killed the statement of"
        return Done(details, f"{verb} thread {session.thread_id} on {my.server}")

    def target(self, lock: Lock) -> dict[str, Any]:
        my = lock.facts
        if not isinstance(my, MyLock):
            return {}
        session = my.session
        return {
            "server": my.server,
            "thread_id": session.thread_id,
            "user": session.user,
            "host": session.host,
            "database": session.database,
            "statement": session.query,
            "lock_kind": my.kind,
            "mode": my.mode,
        }

    def unseen_target(self, lock_id: str) -> dict[str, Any]:
        from lockwatch.sources.mysql.records import parse_id

        parsed = parse_id(lock_id)
        return {"source": NAME, "id": lock_id, "server": None if parsed is None else parsed.server}

    def where(self, lock: Lock) -> str | None:
        return lock.facts.server if isinstance(lock.facts, MyLock) else None

    def confirm_rows(self, lock: Lock, verdict: Verdict, now: datetime) -> Sequence[Row]:
        my = lock.facts
        if not isinstance(my, MyLock) or not my.granted or lock.acquired_at is not None:
            return ()
        held = held_text(my, now)
        return [("held", held)] if held else ()


ACTIONS = MyActions()
