"""What an action would do, worked out before anything is touched.

A Plan is what the confirmation shows (the dashboard's modal, the CLI's
prompt): the lock as the operator saw it, the exact effect in words, whether
the operator must type the lock's name (`--force`) because it is not stale, or
why the action cannot be done at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, cast

from lockwatch.model.events import holder_text
from lockwatch.model.handover import NewHolder
from lockwatch.model.humanize import duration
from lockwatch.model.kernel import kernel_lock_id
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.files.decoders import writer
from lockwatch.sources.files.scanner import TOMBSTONE_DIR
from lockwatch.sources.postgres.facts import PgLock, held_text
from lockwatch.sources.postgres.terms import prepared_commands


class Kind(StrEnum):
    BREAK = "break"
    STEAL = "steal"
    RELEASE = "release"
    CANCEL = "cancel"


@dataclass(frozen=True, slots=True)
class Plan:
    kind: Kind
    lock: Lock
    verdict: Verdict
    # The audit event a success records.
    event: str
    # The exact effect, in words.
    effect: str
    # Not stale: the operator must type the lock's name (CLI: --force).
    needs_name: bool = False
    # (code, message) when the action may not be done at all.
    refusal: tuple[str, str] | None = None
    # The bytes a steal writes.
    new_content: bytes | None = None
    # A kernel lock's break: the signal sent to its holder (TERM, KILL).
    signal: str | None = None
    # Why the typed name is needed when the lock is stale all the same (staleness
    # only inferred): what the confirmation and the refusal say instead of "not stale".
    why_name: str | None = None

    @property
    def verb(self) -> str:
        return self.kind.value


class OwnActions(Protocol):
    """The actions module of a source that plans and carries out its own actions
    (named by its plugin's `actions_module`: Redis, etcd)."""

    def plan_action(
        self, kind: Kind, lock: Lock, verdict: Verdict, peers: Sequence[Lock]
    ) -> Plan: ...

    def execute(self, plan: Plan, expect_sha256: str | None) -> tuple[dict[str, Any], str]:
        """(audit details, message); raises ActionRefused or ActionFailed."""
        ...


def own_actions(lock: Lock) -> OwnActions | None:
    from importlib import import_module

    from lockwatch.sources.registry import by_name

    module = getattr(by_name(lock.source), "actions_module", None)
    return None if module is None else cast(OwnActions, import_module(module))


def refused(kind: Kind, lock: Lock, verdict: Verdict, code: str, message: str) -> Plan:
    return Plan(kind, lock, verdict, "action_refused", "nothing", refusal=(code, message))


def tombstone_place(tombstone_dir: str | None) -> str:
    """Where broken locks go, in words: the configured directory, or the default
    beside each lock."""
    where = tombstone_dir or TOMBSTONE_DIR
    return f"{where}/" if where.startswith("/") else f"{where}/ beside it"


def _tombstone(lock: Lock, tombstone_dir: str | None) -> str:
    assert lock.path is not None
    directory, _, name = lock.path.rpartition("/")
    where = tombstone_dir or TOMBSTONE_DIR
    if not where.startswith("/"):
        where = f"{directory}/{where}"
    return f"{where}/{name}@<UTC time of the action>"


def _file_refusal(lock: Lock) -> tuple[str, str] | None:
    if lock.path is None:
        return ("not_a_lock", "this lock has no file")
    codes = {reason.code for reason in lock.defects}
    if "symlink" in codes:
        return ("symlink", f"{lock.path} is a symlink; lockwatch never acts on a lock through one")
    if "not_regular_file" in codes:
        return ("not_regular_file", f"{lock.path} is not a regular file")
    if "too_large" in codes:
        return ("too_large", f"{lock.path} is too large to be a lock; look at it by hand")
    return None


def _session_effect(lock: Lock, peers: Sequence[Lock]) -> str:
    """What ending the holder's session does: its transaction, every lock it holds
    (as pg_locks counted them at the poll, not only the rows on screen), and which
    of the sessions waiting on it go ahead."""
    assert lock.pg is not None
    pg = lock.pg
    pid = pg.backend.pid
    same = [
        peer.pg
        for peer in peers
        if peer.pg is not None and peer.pg.server == pg.server and peer.pg.backend.pid is not None
    ]
    parts = []
    if pg.backend.state in ("idle in transaction", "idle in transaction (aborted)"):
        parts.append("rolls back its open transaction")
    elif pg.backend.xact_start is not None:
        parts.append("ends its transaction (rolled back)")
    else:
        parts.append("ends its session")
    held = pg.backend.held
    if held:
        total = sum(count for _, count in held)
        kinds = ", ".join(f"{count} {locktype}" for locktype, count in held)
        parts.append(f"releases all {total} lock{'s' if total != 1 else ''} it holds ({kinds})")
    else:
        count = sum(1 for peer in same if peer.backend.pid == pid and peer.granted) or (
            1 if pg.granted else 0
        )
        parts.append(f"releases its {count} lock{'s' if count != 1 else ''}")
    parts.append(_who_proceeds(pid, [w for w in pg.blocking if w], same))
    return ", ".join(parts)


def _who_proceeds(pid: int | None, waiters: Sequence[int], same: Sequence[PgLock]) -> str:
    """Which waiters go ahead once `pid` is gone: those it alone holds up. One also
    queued behind another waiter (pg_blocking_pids names both) waits on."""
    if not waiters:
        return "nobody waits on it"
    blockers: dict[int, set[int | str]] = {}
    for peer in same:
        waiter = peer.backend.pid
        if not peer.granted and waiter is not None and waiter in waiters:
            others = blockers.setdefault(waiter, set())
            others.update(p for p in peer.blocked_by if p and p != pid)
            others.update(f"prepared transaction {gid}" for gid in peer.blocked_by_prepared)
    go = [w for w in waiters if not blockers.get(w)]
    stay = [w for w in waiters if blockers.get(w)]
    said = []
    if len(go) == 1:
        said.append(f"waiter {go[0]} proceeds")
    elif go:
        said.append(f"waiters {', '.join(map(str, go))} proceed")
    for waiter in stay:
        on = ", ".join(
            f"pid {who}" if isinstance(who, int) else who
            for who in sorted(blockers[waiter], key=str)
        )
        said.append(f"{waiter} still waits (on {on})")
    return "; ".join(said)


def plan(
    kind: Kind,
    lock: Lock,
    verdict: Verdict,
    *,
    peers: Sequence[Lock] = (),
    new_holder: NewHolder | None = None,
    tombstone_dir: str | None = None,
    held: bool = False,
    held_elsewhere: bool = False,
    signal: str = "TERM",
) -> Plan:
    """The plan for `kind` on `lock` as judged by `verdict`. `peers` are the other
    locks in view (a session's other locks count in its effect); `held` says
    whether lockwatch holds this lock (release needs it), `held_elsewhere` that
    another lockwatch process holds it (a Postgres steal held in a foreground CLI)."""
    if lock.source == "postgres":
        return _plan_pg(kind, lock, verdict, peers, held, held_elsewhere)
    if lock.source == "kernel":
        return _plan_kernel(kind, lock, verdict, signal)
    own = own_actions(lock)
    if own is not None:
        return own.plan_action(kind, lock, verdict, peers)
    if lock.source != "file":
        return refused(
            kind, lock, verdict, "unsupported", f"{lock.source} locks cannot be acted on"
        )
    refusal = _file_refusal(lock)
    if refusal is not None:
        return refused(kind, lock, verdict, *refusal)
    assert lock.path is not None
    evidence = lock.evidence
    if evidence is not None and evidence.holds and kind is not Kind.CANCEL:
        hold = evidence.holds[0]
        who = f"pid {hold.holder_pid}" if hold.holder_pid else "a process"
        return refused(
            kind,
            lock,
            verdict,
            "kernel_lock",
            f"{who} holds a kernel lock on {lock.path}: moving the file would let a second"
            " holder in while it still holds the old one; signal the holder instead"
            f" (lockwatch break '{kernel_lock_id(hold)}')",
        )
    # Free (nobody holds it) counts as stale: clearing it needs no typed name.
    stale = verdict.state in (State.STALE, State.FREE)
    if kind is Kind.BREAK:
        effect = (
            f"rename {lock.path} to {_tombstone(lock, tombstone_dir)}"
            " (kept, never deleted: it can be moved back)"
        )
        return Plan(kind, lock, verdict, "lock_broken", effect, needs_name=not stale)
    if kind is Kind.CANCEL:
        return refused(
            kind, lock, verdict, "unsupported", "cancel ends a Postgres query; a lock file has none"
        )
    if kind is Kind.RELEASE:
        if not held:
            return refused(
                kind,
                lock,
                verdict,
                "not_held",
                "lockwatch does not hold this lock (only locks it stole can be released);"
                " break it instead",
            )
        effect = f"rename {lock.path} to {_tombstone(lock, tombstone_dir)}: the lock is free"
        return Plan(kind, lock, verdict, "lock_released", effect)
    # Steal.
    if not stale:
        why = (
            "it is invalid; break it instead"
            if verdict.state is State.INVALID
            else "stealing a lock that is not stale is never allowed (lock spec §7.1)"
        )
        return refused(kind, lock, verdict, "not_stale", f"{lock.name} is {verdict.state}: {why}")
    module = writer(lock.format)
    content = (
        module.handover(lock.content, new_holder)
        if module is not None and new_holder is not None
        else None
    )
    if content is None or new_holder is None:
        return refused(
            kind,
            lock,
            verdict,
            "unsupported",
            f"lockwatch cannot write {lock.name} ({lock.format}) for you: it records no holder"
            " to hand over; break it instead",
        )
    # Heartbeat formats record the writer's pid (informational); the others' liveness
    # is the pid: the operator's shell, or lockwatch itself.
    pid = new_holder.own_pid if lock.policy.heartbeat else new_holder.pid
    terms = f"pid {pid} on {new_holder.host}"
    if lock.ttl_seconds is not None:
        terms += f", ttl {duration(lock.ttl_seconds)}"
    effect = (
        f"rename {lock.path} to {_tombstone(lock, tombstone_dir)}, then write a new"
        f" {lock.format} lock there held by {new_holder.operator} ({terms})"
    )
    return Plan(kind, lock, verdict, "lock_stolen", effect, new_content=content)


def _plan_kernel(kind: Kind, lock: Lock, verdict: Verdict, signal: str) -> Plan:
    """Only a break, and it signals the holder: nobody releases another process's
    kernel lock from outside. The kernel frees it when the holder exits."""
    assert lock.kernel is not None
    kernel = lock.kernel
    if kind is not Kind.BREAK:
        return refused(
            kind,
            lock,
            verdict,
            "unsupported",
            f"a kernel lock can only be broken by signalling its holder, not by {kind.value}",
        )
    if kernel.waiting:
        return refused(
            kind, lock, verdict, "not_held", f"this process waits for {lock.name}; it holds nothing"
        )
    pid = kernel.holder_pid
    if pid is None:
        return refused(
            kind, lock, verdict, "no_holder", "lockwatch could not tell which process holds it"
        )
    process = verdict.process
    command = f" ({' '.join(process.cmdline)})" if process is not None and process.cmdline else ""
    waiters = len(kernel.blocking)
    after = f"; then the kernel frees {lock.name}" + (
        f" and {waiters} waiting process{'es' if waiters != 1 else ''} may take it"
        if waiters
        else ""
    )
    how = "kills it at once (no clean-up)" if signal == "KILL" else "asks it to exit"
    effect = f"send SIG{signal} to pid {pid}{command}, which {how}{after}"
    # The holder is alive by definition: this always needs the typed name.
    return Plan(kind, lock, verdict, "holder_signalled", effect, needs_name=True, signal=signal)


def _plan_pg(
    kind: Kind,
    lock: Lock,
    verdict: Verdict,
    peers: Sequence[Lock],
    held: bool,
    held_elsewhere: bool = False,
) -> Plan:
    assert lock.pg is not None
    pg = lock.pg
    pid = pg.backend.pid
    where = pg.server
    if pid is None:
        gid = pg.backend.prepared_gid
        if gid is None:
            how = "end it with COMMIT PREPARED or ROLLBACK PREPARED (its gid is not known)"
        else:
            commit, rollback = prepared_commands(gid)
            how = f"run {commit} to keep its work, or {rollback} to undo it"
        database = f", connected to database {pg.database}" if pg.database else ""
        owner = f" as {pg.backend.user} (or a superuser)" if pg.backend.user else ""
        return refused(
            kind,
            lock,
            verdict,
            "prepared_transaction",
            f"{pg.backend.label} has no session to signal: {how} on {where}{database}{owner}",
        )
    stale = verdict.state is State.STALE
    # Stale by idle time alone, its client unseen: as deliberate as an active lock.
    inferred = stale and "inferred" in verdict.codes
    why_name = (
        f"{lock.name} is stale only by inference (idle time; lockwatch could not find its"
        " client process, which may still be at work)"
        if inferred
        else None
    )
    if kind is Kind.BREAK:
        effect = f"call pg_terminate_backend({pid}) on {where}: {_session_effect(lock, peers)}"
        return Plan(
            kind,
            lock,
            verdict,
            "backend_terminated",
            effect,
            needs_name=not stale or inferred,
            why_name=why_name,
        )
    if kind is Kind.CANCEL:
        state = pg.backend.state or "unknown"
        if state.startswith("idle"):
            what = (
                f"it is {state}: there is no query to cancel, and its locks stay held"
                " (b terminates it)"
            )
        else:
            query = f" ({pg.backend.query})" if pg.backend.query else ""
            what = f"cancels its current query{query}; its session stays connected"
        effect = f"call pg_cancel_backend({pid}) on {where}: {what}"
        return Plan(kind, lock, verdict, "backend_cancelled", effect)
    key = pg.advisory_key
    if kind is Kind.RELEASE:
        if not held or key is None:
            return refused(
                kind,
                lock,
                verdict,
                "not_held",
                "lockwatch does not hold this lock (only advisory locks it stole can be released)",
            )
        if held_elsewhere:
            effect = (
                f"call pg_terminate_backend({pid}) on {where}: ends the lockwatch steal session"
                f" holding advisory lock {lock.name} ({key}), which frees it"
            )
        else:
            effect = (
                f"unlock advisory lock {lock.name} ({key}) on lockwatch's own connection to {where}"
            )
        return Plan(kind, lock, verdict, "lock_released", effect)
    if key is None or pg.locktype != "advisory":
        return refused(
            kind,
            lock,
            verdict,
            "unsupported",
            f"only advisory locks can be stolen; this is a {pg.locktype} lock (b terminates"
            " its holder)",
        )
    if not pg.granted:
        return refused(
            kind, lock, verdict, "not_held", f"pid {pid} waits for {lock.name}; it holds nothing"
        )
    if not stale:
        return refused(
            kind,
            lock,
            verdict,
            "not_stale",
            f"{lock.name} is {verdict.state}: stealing a lock that is not stale is never allowed",
        )
    if pg.blocking_here:
        waiting = ", ".join(str(w) for w in pg.blocking_here)
        return refused(
            kind,
            lock,
            verdict,
            "has_waiters",
            f"{lock.name} has queued waiters (pid {waiting}): PostgreSQL grants it to them"
            " before lockwatch could take it, so a steal would only terminate its holder;"
            " nothing done. Break it instead (b, or lockwatch break) and let the waiter have it",
        )
    shared = "_shared" if pg.mode == "ShareLock" else ""
    effect = (
        f"call pg_terminate_backend({pid}) on {where}: {_session_effect(lock, peers)}; then take"
        f" advisory lock {lock.name} ({key}) with pg_try_advisory_lock{shared} on lockwatch's own"
        " connection and hold it until released (r)"
    )
    return Plan(kind, lock, verdict, "lock_stolen", effect, needs_name=inferred, why_name=why_name)


def describe(plan: Plan, now: datetime) -> list[tuple[str, str]]:
    """The confirmation's lines: what the operator is about to act on, `now`
    (the dashboard's clock: a replay's time, never the wall clock's)."""
    lock, verdict = plan.lock, plan.verdict
    reasons = "; ".join(f"{r.code}: {r.message}" for r in verdict.reasons) or "none"
    lines = [
        ("lock", f"{lock.name} ({lock.format}, {lock.source})"),
        ("where", lock.path or (lock.pg.server if lock.pg else lock.id)),
        ("holder", holder_text(lock) or "none recorded"),
        ("state", verdict.state.value),
        ("reasons", reasons),
        ("effect", plan.effect),
    ]
    if verdict.age_seconds is not None:
        lines.insert(4, ("age", duration(verdict.age_seconds)))
    elif lock.pg is not None and lock.pg.granted:
        # PostgreSQL keeps no time for a granted lock: what is known, as bounds.
        held = held_text(lock.pg, now)
        if held:
            lines.insert(4, ("held", held))
    if plan.why_name:
        lines.append(("confirm", f"{plan.why_name}: type its name to go ahead"))
    if lock.sha256:
        lines.append(("sha256", lock.sha256))
    return lines
