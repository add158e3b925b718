"""What an action would do, worked out before anything is touched.

A Plan is what the confirmation shows (the dashboard's modal, the CLI's
prompt): the lock as the operator saw it, the exact effect in words, whether
the operator must type the lock's name (`--force`) because it is not stale, or
why the action cannot be done at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from lockwatch.model.events import holder_text
from lockwatch.model.handover import NewHolder
from lockwatch.model.humanize import duration
from lockwatch.model.kernel import kernel_lock_id
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.files.decoders import writer
from lockwatch.sources.files.scanner import TOMBSTONE_DIR


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

    @property
    def verb(self) -> str:
        return self.kind.value


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
    """What ending the holder's session does: its transaction, its locks, its waiters."""
    assert lock.pg is not None
    pg = lock.pg
    pid = pg.backend.pid
    held = sum(
        1
        for peer in peers
        if peer.pg is not None
        and peer.pg.server == pg.server
        and peer.pg.backend.pid == pid
        and peer.pg.granted
    ) or (1 if pg.granted else 0)
    parts = []
    if pg.backend.state in ("idle in transaction", "idle in transaction (aborted)"):
        parts.append("rolls back its open transaction")
    elif pg.backend.xact_start is not None:
        parts.append("ends its transaction (rolled back)")
    else:
        parts.append("ends its session")
    parts.append(f"releases its {held} lock{'s' if held != 1 else ''}")
    waiters = [w for w in pg.blocking if w]
    if len(waiters) == 1:
        parts.append(f"waiter {waiters[0]} proceeds")
    elif waiters:
        parts.append(f"waiters {', '.join(map(str, waiters))} proceed")
    else:
        parts.append("nobody waits on it")
    return ", ".join(parts)


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
        gid = pg.backend.prepared_gid or "?"
        return refused(
            kind,
            lock,
            verdict,
            "prepared_transaction",
            f"{pg.backend.label} has no session to signal: run COMMIT PREPARED '{gid}' or"
            f" ROLLBACK PREPARED '{gid}' on {where}",
        )
    stale = verdict.state is State.STALE
    if kind is Kind.BREAK:
        effect = f"call pg_terminate_backend({pid}) on {where}: {_session_effect(lock, peers)}"
        return Plan(kind, lock, verdict, "backend_terminated", effect, needs_name=not stale)
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
    shared = "_shared" if pg.mode == "ShareLock" else ""
    effect = (
        f"call pg_terminate_backend({pid}) on {where}: {_session_effect(lock, peers)}; then take"
        f" advisory lock {lock.name} ({key}) with pg_try_advisory_lock{shared} on lockwatch's own"
        " connection and hold it until released (r)"
    )
    return Plan(kind, lock, verdict, "lock_stolen", effect)


def describe(plan: Plan) -> list[tuple[str, str]]:
    """The confirmation's lines: what the operator is about to act on."""
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
    if lock.sha256:
        lines.append(("sha256", lock.sha256))
    return lines
