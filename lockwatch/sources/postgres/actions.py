"""The postgres source's actions: break (terminate the holder's session),
cancel (its current query), steal (an advisory lock, taken on lockwatch's own
connection) and release (of what a steal holds). The plans are worked out
here; the connections and the compare-and-swap are sources/postgres/actor.py's,
imported only when an action runs (psycopg stays unloaded until then).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.action import ActionRefused, Done, Holding, Kind, Plan, refused
from lockwatch.model.facts import Row
from lockwatch.model.humanize import named
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.contract import ActionsBase, Choice, Choices, SourceError, Wanted
from lockwatch.sources.postgres import ids
from lockwatch.sources.postgres.dsn import dsn_from_name
from lockwatch.sources.postgres.effect import session_effect as _session_effect
from lockwatch.sources.postgres.facts import PgLock
from lockwatch.sources.postgres.held import held_text
from lockwatch.sources.postgres.terms import prepared_commands, sessions
from lockwatch.sources.servers import naming

if TYPE_CHECKING:
    from lockwatch.model.action import Asked, Doing
    from lockwatch.sources.postgres.settings import PgSettings

NAME = "postgres"


def _pg(lock: Lock) -> PgLock:
    assert isinstance(lock.facts, PgLock)
    return lock.facts


def _plan(
    kind: Kind,
    lock: Lock,
    verdict: Verdict,
    peers: Sequence[Lock],
    held: bool,
    held_elsewhere: bool = False,
) -> Plan:
    pg = _pg(lock)
    if pg.backend.pid is None:
        return _prepared_refused(kind, lock, verdict, pg)
    stale = verdict.state is State.STALE
    needs_name, why_name = naming(lock, verdict)
    if kind is Kind.BREAK:
        effect = _break_effect(lock, pg, peers)
        return Plan(
            kind,
            lock,
            verdict,
            "backend_terminated",
            effect,
            needs_name=needs_name,
            why_name=why_name,
        )
    if kind is Kind.CANCEL:
        return Plan(kind, lock, verdict, "backend_cancelled", _cancel_effect(pg))
    if kind is Kind.RELEASE:
        return _release_plan(kind, lock, verdict, pg, held, held_elsewhere)
    refusal = _steal_refusal(lock, verdict, pg, stale)
    if refusal is not None:
        return refused(kind, lock, verdict, *refusal)
    shared = "_shared" if pg.mode == "ShareLock" else ""
    effect = (
        f"call pg_terminate_backend({pg.backend.pid}) on {pg.server}:"
        f" {_session_effect(lock, peers)}; then take"
        f" advisory lock {lock.name} ({pg.advisory_key}) with pg_try_advisory_lock{shared} on"
        " lockwatch's own connection and hold it until released (r)"
    )
    # Stale only by inference (why_name says so): the steal, too, needs the typed name.
    inferred = why_name is not None
    return Plan(kind, lock, verdict, "lock_stolen", effect, needs_name=inferred, why_name=why_name)


def _prepared_refused(kind: Kind, lock: Lock, verdict: Verdict, pg: PgLock) -> Plan:
    """A prepared transaction has no session to signal: how to end it, refused."""
    gid = pg.backend.prepared_gid
    if gid is None:
        how = "end it with COMMIT PREPARED or ROLLBACK PREPARED (its gid is not known)"
    else:
        commit, rollback = prepared_commands(gid)
        how = f"run {commit} to keep its work, or {rollback} to undo it"
    database = f", connected to database {pg.database}" if pg.database else ""
    owner = f" as {pg.backend.user} (or a superuser)" if pg.backend.user else ""
    why = f"{pg.backend.label} has no session to signal: {how} on {pg.server}{database}{owner}"
    return refused(kind, lock, verdict, "prepared_transaction", why)


def _break_effect(lock: Lock, pg: PgLock, peers: Sequence[Lock]) -> str:
    """What terminating the holder's backend does."""
    effect = (
        f"call pg_terminate_backend({pg.backend.pid}) on {pg.server}:"
        f" {_session_effect(lock, peers)}{_vacuum_note(pg)}"
    )
    if pg.queued_behind:
        # A queue head: the lower-risk way, for a CLI break that did not choose it.
        effect += (
            f"; cancelling only its statement (c, lockwatch cancel) would free the"
            f" {sessions(pg.queued_behind)} queued behind it and keep its session"
        )
    return effect


def _cancel_effect(pg: PgLock) -> str:
    """What cancelling the backend's current query does."""
    state = pg.backend.state or "unknown"
    if state.startswith("idle"):
        what = (
            f"it is {state}: there is no query to cancel, and its locks stay held (b terminates it)"
        )
    else:
        query = f" ({pg.backend.query})" if pg.backend.query else ""
        what = f"cancels its current query{query}; its session stays connected"
        if pg.queued_behind:
            count = pg.queued_behind
            pids = named("pid", [str(p) for p in pg.queued_here], most=10)
            wait = "waits" if count == 1 else "wait"
            what += (
                f"; its waiting {pg.mode} request leaves the queue, and the"
                f" {sessions(count)} queued behind it ({pids}) no longer {wait} on it"
            )
    return f"call pg_cancel_backend({pg.backend.pid}) on {pg.server}: {what}{_vacuum_note(pg)}"


def _release_plan(
    kind: Kind, lock: Lock, verdict: Verdict, pg: PgLock, held: bool, held_elsewhere: bool
) -> Plan:
    """Releasing an advisory lock lockwatch stole: on its own connection, or by
    ending the steal session that holds it."""
    key = pg.advisory_key
    if not held or key is None:
        why = "lockwatch does not hold this lock (only advisory locks it stole can be released)"
        return refused(kind, lock, verdict, "not_held", why)
    if held_elsewhere:
        effect = (
            f"call pg_terminate_backend({pg.backend.pid}) on {pg.server}: ends the lockwatch"
            f" steal session holding advisory lock {lock.name} ({key}), which frees it"
        )
    else:
        effect = (
            f"unlock advisory lock {lock.name} ({key}) on lockwatch's own connection to {pg.server}"
        )
    return Plan(kind, lock, verdict, "lock_released", effect)


def _steal_refusal(lock: Lock, verdict: Verdict, pg: PgLock, stale: bool) -> tuple[str, str] | None:
    """Why a steal is refused (reason code, words), or None when it may go ahead."""
    if pg.advisory_key is None or pg.locktype != "advisory":
        return (
            "unsupported",
            f"only advisory locks can be stolen; this is a {pg.locktype} lock (b terminates"
            " its holder)",
        )
    if not pg.granted:
        return "not_held", f"pid {pg.backend.pid} waits for {lock.name}; it holds nothing"
    if not stale:
        return (
            "not_stale",
            f"{lock.name} is {verdict.state}: stealing a lock that is not stale is never allowed",
        )
    if pg.blocking_here:
        waiting = ", ".join(str(w) for w in pg.blocking_here)
        return (
            "has_waiters",
            f"{lock.name} has queued waiters (pid {waiting}): PostgreSQL grants it to them"
            " before lockwatch could take it, so a steal would only terminate its holder;"
            " nothing done. Break it instead (b, or lockwatch break) and let the waiter have it",
        )
    return None


def _vacuum_note(pg: PgLock) -> str:
    """What ending an autovacuum worker's work does: it is started again."""
    if pg.backend.autovacuum == "wraparound":
        return (
            "; it is an anti-wraparound autovacuum: autovacuum starts it again while the table"
            " needs it, so this only delays it (it will not yield; letting it finish is the way)"
        )
    if pg.backend.autovacuum == "plain":
        return "; it is an autovacuum worker: it would have yielded to a conflicting lock request"
    return ""


# What the dialog's choices give the plan (Asked.given), by name.
WAY = "pg_way"
ROOT = "pg_root"
# Roots offered for a queue head, at most: a queue has one holder more often than not.
ROOTS_OFFERED = 3


def roots(pg: PgLock) -> tuple[int, ...]:
    """The sessions holding the lock a waiter waits for (not those queued ahead of it)."""
    return tuple(pid for pid in pg.blocked_by if pid and pid not in pg.queue_heads)


def queue_choices(lock: Lock) -> Choices | None:
    """A queue head's break, the low-risk way first: cancel its statement (its
    request leaves the queue and those behind it go on), then terminate the
    session holding the lock it waits for (its transaction is rolled back)."""
    pg = lock.facts
    if not isinstance(pg, PgLock) or not pg.queued_behind or pg.backend.pid is None:
        return None
    options = [Choice("cancel its statement", ((WAY, "cancel"),))]
    options += [
        Choice(f"terminate root pid {root}", ((WAY, "terminate_root"), (ROOT, root)))
        for root in roots(pg)[:ROOTS_OFFERED]
    ]
    return Choices("action", tuple(options))


def _root_plan(lock: Lock, verdict: Verdict, peers: Sequence[Lock], root: object) -> Plan:
    """Terminate `root`, holding the lock that queue head `lock` waits for: its
    granted row among `peers` is what the action re-checks and signals."""
    pg = _pg(lock)
    kind = Kind.BREAK
    target = lock.content.get("target") if isinstance(lock.content, Mapping) else None
    found = next(
        (
            peer
            for peer in peers
            if isinstance(peer.facts, PgLock)
            and peer.facts.server == pg.server
            and peer.facts.granted
            and peer.facts.backend.pid == root
            and isinstance(peer.content, Mapping)
            and peer.content.get("target") == target
        ),
        None,
    )
    if found is None or not isinstance(root, int) or root not in roots(pg):
        why = (
            f"pid {root} is not seen holding {lock.name} now (it may have let go); nothing"
            " done: look again"
        )
        return refused(kind, lock, verdict, "changed", why)
    planned = _plan(kind, found, verdict, peers, held=False)
    if planned.refusal is not None:
        return planned
    # Judged as the queue head is (waiting): the root is another session, never
    # ended without its name typed.
    return replace(
        planned,
        needs_name=True,
        why_name=f"pid {root} holds {found.name}, which queue head pid {pg.backend.pid} waits"
        f" for: terminating it rolls back its transaction (cancelling pid"
        f" {pg.backend.pid}'s statement is the lower-risk way)",
    )


class PgActions(ActionsBase):
    name = NAME
    kinds = frozenset({Kind.BREAK, Kind.STEAL, Kind.RELEASE, Kind.CANCEL})

    def reach(self, wanted: Wanted) -> Mapping[str, Any]:
        from lockwatch.sources.postgres.dsn import display_name, resolve_dsns, with_password
        from lockwatch.sources.secrets import PasswordFileError, read_password_file

        settings: PgSettings | None = wanted.settings(NAME)
        configured = settings.dsns if settings is not None else ()
        password_file = settings.password_file if settings is not None else None
        password = None
        try:
            dsns = resolve_dsns(
                wanted.values.get("pg_dsns") or (),
                configured,
                wanted.environ,
                password_file=password_file,
            )
            if password_file:
                password = read_password_file(password_file)
        except PasswordFileError as exc:
            raise SourceError(str(exc)) from exc
        by_name = {display_name(dsn): dsn for dsn in dsns}

        def dsn_for(server: str) -> str | None:
            derived = dsn_from_name(server)
            if derived is not None and password is not None:
                derived = with_password(derived, password)
            return by_name.get(server) or derived

        return {"dsn_for": dsn_for}

    def holding(self, lock: Lock, operator: str, pid: int | None) -> Holding:
        # Only a `lockwatch steal` session of this operator's: anyone else's is a break.
        from lockwatch.sources.postgres.actor import held_by_steal

        held = held_by_steal(lock, operator)
        return Holding(held, elsewhere=held)

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        applications = asked.given.get("pg_applications")
        pg = _pg(lock)
        if (
            applications is not None
            and not asked.held
            and not (pg.backend.application or "").startswith(applications)
        ):
            why = (
                f"only the demo's own sessions ({applications}…) can be acted on"
                " here; this one belongs to someone else"
            )
            return refused(kind, lock, verdict, "not_ours", why)
        way = asked.given.get(WAY)
        if kind is Kind.BREAK and way == "cancel" and pg.queued_behind:
            # A queue head's low-risk way: its statement cancelled, its session kept.
            return _plan(Kind.CANCEL, lock, verdict, asked.peers, asked.held)
        if kind is Kind.BREAK and way == "terminate_root":
            return _root_plan(lock, verdict, asked.peers, asked.given.get(ROOT))
        return _plan(kind, lock, verdict, asked.peers, asked.held, asked.held_elsewhere)

    def choices(self, kind: Kind, lock: Lock) -> Choices | None:
        return queue_choices(lock) if kind is Kind.BREAK else None

    def run(self, plan: Plan, doing: Doing) -> Done:
        from lockwatch.sources.postgres.actor import PgActor

        lock = plan.lock
        pg = _pg(lock)
        held = doing.held
        if plan.kind is Kind.RELEASE and held is not None:
            unlocked = held.release()
            message = f"released {lock.name} on {pg.server}"
            if not unlocked:
                message += " (the server had already let go of it: the connection is closed)"
            return Done({"unlocked": unlocked}, message)
        dsn_for = doing.reach.get("dsn_for")
        dsn = dsn_for(pg.server) if dsn_for is not None else None
        if dsn is None:
            raise ActionRefused("no_dsn", f"no DSN for {pg.server}: name the server with --pg")
        actor = PgActor(dsn)
        pid = pg.backend.pid
        server = pg.server

        def terminated(gone: int) -> None:
            # Its own record the moment a backend is gone, whatever happens next.
            doing.note(
                "backend_terminated",
                {
                    "pid": gone,
                    "message": f"terminated pid {gone} on {server} (part of {plan.verb})",
                },
            )

        if plan.kind is Kind.BREAK:
            # Judged stale for idling: still idle now, unless the operator forced it
            # against the verdict (a name typed for inferred staleness confirms it).
            stale = plan.verdict.state is State.STALE
            actor.terminate(
                lock, still_idle=stale and (not doing.force or plan.why_name is not None)
            )
            return Done({"pid": pid}, f"terminated pid {pid} on {server}")
        if plan.kind is Kind.CANCEL:
            actor.cancel(lock)
            return Done({"pid": pid}, f"cancelled the query of pid {pid} on {server}")
        if plan.kind is Kind.RELEASE:
            actor.release_remote(lock, on_terminated=terminated)
            return Done({"pid": pid}, f"released {lock.name}: ended lockwatch session {pid}")
        taken = actor.steal(lock, operator=doing.operator, on_terminated=terminated)
        details = {"terminated_pid": pid, "held_by_pid": taken.backend_pid}
        message = (
            f"terminated pid {pid} and took {lock.name} on {server}"
            f" (lockwatch session {taken.backend_pid} holds it)"
        )
        return Done(details, message, held=taken)

    def target(self, lock: Lock) -> dict[str, Any]:
        pg = lock.facts
        if not isinstance(pg, PgLock):
            return {}
        # The server's display name: never the DSN, which may hold a password.
        return {
            "server": pg.server,
            "database": pg.database,
            "pid": pg.backend.pid,
            "locktype": pg.locktype,
            "mode": pg.mode,
        }

    def unseen_target(self, lock_id: str) -> dict[str, Any]:
        return {"source": NAME, "id": lock_id, "server": ids.pg_server(lock_id)}

    def seen_hash(self, lock: Lock) -> str | None:
        """Its pg_locks row as canonical JSON."""
        from lockwatch.model.compact import plain

        if not isinstance(lock.facts, PgLock) or not isinstance(lock.content, Mapping):
            return None
        row = plain(lock.content)
        canonical = json.dumps(row, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def where(self, lock: Lock) -> str | None:
        return lock.facts.server if isinstance(lock.facts, PgLock) else None

    def confirm_rows(self, lock: Lock, verdict: Verdict, now: datetime) -> Sequence[Row]:
        pg = lock.facts
        if not isinstance(pg, PgLock) or not pg.granted:
            return ()
        # PostgreSQL keeps no time for a granted lock: what is known, as bounds.
        held = held_text(pg, now)
        return [("held", held)] if held else ()


ACTIONS = PgActions()
