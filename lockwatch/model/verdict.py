"""Verdicts: one pure function from (lock, process facts, clock, host) to a state."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import lru_cache

from lockwatch.clock import Clock, FrozenClock
from lockwatch.model.humanize import duration
from lockwatch.model.kernel import CALLS, KernelEvidence
from lockwatch.model.lock import Lock, Reason
from lockwatch.model.process import ProcessFacts, ProcessLookup
from lockwatch.model.slots import fast_init
from lockwatch.model.timestamps import plus_seconds

# A process may start a moment after the lock it writes is timestamped
# (coarse clocks, rounding to seconds): only a later start beyond this is reuse.
PID_REUSE_TOLERANCE_SECONDS = 1.0
# Emacs (lock_if_free) takes boot times within a second of each other as the same boot.
BOOT_TIME_TOLERANCE_SECONDS = 1.0
# Hosts' clocks drift by fractions of a second even when synchronised: only more
# than this in the future is worth telling the operator.
CLOCK_SKEW_TOLERANCE_SECONDS = 1.0


class State(StrEnum):
    ACTIVE = "active"
    STALE = "stale"
    INVALID = "invalid"
    WAITING = "waiting"
    # Nobody holds it: a kernel-lock sentinel file no kernel lock is held on.
    FREE = "free"
    # lockwatch cannot tell (a pid from another pid namespace): never counted as
    # stale, never shown as held by some unrelated process.
    UNKNOWN = "unknown"


@fast_init
@dataclass(frozen=True, slots=True)
class Verdict:
    state: State
    reasons: tuple[Reason, ...] = ()
    # Seconds since the lock was acquired (0 when its time is in the future).
    age_seconds: float | None = None
    # Whether the holder process runs on this host; None when it cannot be known.
    alive: bool | None = None
    process: ProcessFacts | None = None
    # When time alone will next change this verdict (stale, late), if ever.
    next_change_at: datetime | None = None
    conflicts_with: tuple[str, ...] = ()

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(r.code for r in self.reasons)


@lru_cache(maxsize=1024)
def same_host(recorded: str, local: str) -> bool:
    """Host names match ignoring case and domain (`tower-01` is `tower-01.lan`)."""
    a, b = recorded.strip().lower(), local.strip().lower()
    if a in ("", "localhost", "127.0.0.1", "::1") or a == b:
        return True
    if _is_address(a) or _is_address(b):
        return False  # 10.0.0.1 and 10.0.0.2 share no "short name"
    return a.split(".", 1)[0] == b.split(".", 1)[0]


def _is_address(host: str) -> bool:
    return ":" in host or host.replace(".", "").isdigit()


def evaluate(lock: Lock, processes: ProcessLookup, clock: Clock, local_host: str) -> Verdict:
    if lock.unseen is not None:
        # What it said when last read is no evidence now: it may have been released,
        # taken again or left behind since.
        return Verdict(State.UNKNOWN, (lock.unseen,), age_seconds=_age(lock, clock.now()))
    own = lock.facts
    if own is not None:
        # Its source's own rules (pg_locks, /proc/locks, a store's key, another
        # host's verdict); None: it is judged as a lock file, by its policy.
        judged = own.judge(lock, processes, clock.now(), local_host)
        if judged is not None:
            return judged
    now = clock.now()
    policy = lock.policy
    info: list[Reason] = list(lock.notes)
    stale: list[Reason] = []
    deadlines: list[datetime | None] = []

    age: float | None = None
    if lock.acquired_at is not None:
        age = (now - lock.acquired_at).total_seconds()
        if age < -CLOCK_SKEW_TOLERANCE_SECONDS:
            info.append(_skew("acquired", -age))
        age = max(age, 0.0)

    evidence = lock.evidence
    # With the kernel's word, "the lock names no process" is no longer the news.
    decided = [reason for reason in info if reason.code != "no_pid"]
    if evidence is not None and evidence.holds:
        # The kernel's word beats the file's: whoever holds the lock holds it,
        # whatever the file says (or fails to say) about its holder.
        return _kernel_held(evidence, processes, age, (*decided, *lock.defects))
    if lock.defects:
        return Verdict(State.INVALID, (*lock.defects, *info), age_seconds=age)
    if evidence is None and policy.kernel_only and lock.holder.pid is None:
        # Only the kernel's lock says whether it is held, and it could not be
        # asked (no /proc/locks, a network filesystem): nobody here can tell.
        reason = Reason(
            "no_kernel_evidence",
            "only a kernel lock on it says whether it is held, and /proc/locks"
            " could not be read for it",
        )
        return Verdict(State.UNKNOWN, (reason, *decided), age_seconds=age)
    if evidence is not None:
        unheld = _kernel_unheld(lock, evidence, processes, age, decided)
        if unheld is not None:
            return unheld

    holder = lock.holder
    if policy.held_while_used and lock.users:
        # Who works on it names the holder: "names no process" is no longer the news.
        info = [reason for reason in info if reason.code != "no_pid"]
    if policy.held_while_used and lock.users is not None and not lock.users:
        # Nobody at work on what it guards: left behind, once it is older than
        # a writer needs between creating it and being seen at work.
        if age is None or age > policy.users_grace:
            reason = Reason("holder_dead", f"no {policy.users_label}")
            return Verdict(State.STALE, (reason, *decided), age_seconds=age)
        assert lock.acquired_at is not None
        return Verdict(
            State.ACTIVE,
            tuple(info),
            age_seconds=age,
            next_change_at=plus_seconds(lock.acquired_at, policy.users_grace),
        )
    foreign = holder.host is not None and not same_host(holder.host, local_host)
    unknown: Reason | None = None  # why nobody can tell whether it is held
    alive: bool | None = None
    facts: ProcessFacts | None = None
    if foreign:
        info.append(
            Reason(
                "foreign_host",
                f"written on host {holder.host}, not this one ({local_host});"
                " its pid cannot be checked here",
            )
        )
    elif holder.pid is not None and (holder.other_pid_namespace or holder.pid == 1):
        # pid 1 here is init: no lock is held by it; such a pid was written
        # inside a container, as is any the file marks so.
        why = (
            "the lock file says so"
            if holder.other_pid_namespace
            else "pid 1 on this host is init, not a lock holder"
        )
        unknown = Reason(
            "other_pid_namespace",
            f"pid {holder.pid} was recorded in another pid namespace ({why}): it cannot be"
            " checked here",
        )
    elif holder.pid is not None:
        facts = processes.facts(holder.pid)
        alive = facts.alive
        reuse = (
            _ticks_differ(facts, holder.start_ticks)
            or _boot_differs(facts, holder.boot_time)
            or (None if policy.time_by_writer else _reused(facts, lock.acquired_at))
        )
        if reuse is not None:
            alive = False
        if policy.pid_liveness:
            if reuse is not None:
                stale.append(reuse)
            elif not facts.alive:
                stale.append(
                    Reason("holder_dead", f"holder pid {holder.pid} is not running on this host")
                )

    limit = policy.max_age
    if foreign and policy.foreign_max_age is not None:
        limit = policy.foreign_max_age if limit is None else min(limit, policy.foreign_max_age)
    if limit is not None and age is not None and lock.acquired_at is not None:
        over = age >= limit if policy.max_age_inclusive else age > limit
        if over:
            where = f" for a lock from host {holder.host}" if foreign else ""
            stale.append(
                Reason(
                    "too_old",
                    f"held for {duration(age)}, over the {limit_text(limit)} limit{where}",
                )
            )
        else:
            deadlines.append(plus_seconds(lock.acquired_at, limit))

    if policy.heartbeat and lock.heartbeat_at is not None and lock.ttl_seconds is not None:
        ttl = lock.ttl_seconds
        since = (now - lock.heartbeat_at).total_seconds()
        skewed = any(reason.code == "clock_skew" for reason in info)
        if since < -CLOCK_SKEW_TOLERANCE_SECONDS and not skewed:
            info.append(_skew("last heartbeat", -since))
        if since > ttl:
            stale.append(
                Reason(
                    "heartbeat_expired",
                    f"last heartbeat {duration(since)} ago, over the {limit_text(ttl)} ttl",
                )
            )
        else:
            late_after = ttl * policy.heartbeat_late_fraction
            if since > late_after:
                info.append(
                    Reason(
                        "heartbeat_late",
                        f"last heartbeat {duration(since)} ago; expected every"
                        f" {duration(late_after)}, stale after {duration(ttl)}",
                    )
                )
            else:
                deadlines.append(plus_seconds(lock.heartbeat_at, late_after))
            deadlines.append(plus_seconds(lock.heartbeat_at, ttl))

    if lock.expires_at is not None:
        breaks_at = plus_seconds(lock.expires_at, policy.expiry_grace)
        if breaks_at is not None and now > breaks_at:
            expired_for = (now - lock.expires_at).total_seconds()
            grace = (
                f"; its tool breaks it {limit_text(policy.expiry_grace)} after that"
                if policy.expiry_grace
                else ""
            )
            stale.append(
                Reason("heartbeat_expired", f"its lease expired {duration(expired_for)} ago{grace}")
            )
        else:
            deadlines.append(breaks_at)

    future = [d for d in deadlines if d is not None and d >= now]
    if policy.waiter and not stale and unknown is None:
        who = f"pid {holder.pid}" if holder.pid is not None else "a waiter"
        waiting = Reason("waiting", f"{who} waits its turn")
        return Verdict(
            State.WAITING,
            (waiting, *info),
            age_seconds=age,
            alive=alive,
            process=facts if alive else None,
        )
    if unknown is not None:
        # Its own rules (age, heartbeat) still decide when they can: only a
        # lock they leave live is in doubt.
        info.insert(0, unknown)
    return Verdict(
        State.UNKNOWN
        if unknown is not None and not stale
        else State.STALE
        if stale
        else State.ACTIVE,
        (*stale, *info),
        age_seconds=age,
        alive=alive,
        # A recycled pid's process is somebody else's: never show it as the holder.
        process=facts if alive else None,
        next_change_at=min(future) if future and not stale else None,
    )


def describe_process(pid: int, facts: ProcessFacts | None) -> str:
    command = " ".join(facts.cmdline) if facts is not None and facts.cmdline else ""
    if len(command) > 80:
        command = command[:79] + "…"
    return f"pid {pid} ({command})" if command else f"pid {pid}"


def _kernel_held(
    evidence: KernelEvidence,
    processes: ProcessLookup,
    age: float | None,
    info: tuple[Reason, ...],
) -> Verdict:
    hold = evidence.holds[0]
    pid = hold.holder_pid
    facts = processes.facts(pid) if pid is not None else None
    by = "an unknown process" if pid is None else describe_process(pid, facts)
    shared = ", shared" if hold.mode == "READ" else ""
    more = len(evidence.holds) - 1
    others = f" and {more} more" if more else ""
    waiting = (
        f"; {evidence.waiters} waiting for it"
        if evidence.waiters > 1
        else "; 1 waiting for it"
        if evidence.waiters
        else ""
    )
    reason = Reason(
        "kernel_lock",
        f"held with {CALLS.get(hold.type, hold.type)}{shared} by {by}{others}{waiting}",
    )
    return Verdict(
        State.ACTIVE,
        (reason, *info),
        age_seconds=age,
        alive=True if facts is None else facts.alive or None,
        process=facts if facts is not None and facts.alive else None,
    )


def _kernel_unheld(
    lock: Lock,
    evidence: KernelEvidence,
    processes: ProcessLookup,
    age: float | None,
    info: list[Reason],
) -> Verdict | None:
    """A file no kernel lock is held on: free if it is only a sentinel for one
    (or a pid file that was seen to carry one), else None (the file's own rules)."""
    policy, pid = lock.policy, lock.holder.pid
    # An opener as holder was named by the evidence (with_evidence), not the file.
    if policy.kernel_sentinel and (pid is None or pid in evidence.open_by):
        for opener in evidence.open_by:
            facts = processes.facts(opener)
            if facts.alive:
                reason = Reason(
                    "open_by",
                    f"no kernel lock is held on it, but {describe_process(opener, facts)} has it"
                    " open: likely the holder",
                )
                return Verdict(State.ACTIVE, (reason, *info), age, alive=True, process=facts)
        unseen = " (other users' open files could not be checked)" if evidence.open_unknown else ""
        reason = Reason("not_held", f"no process holds a kernel lock on it or has it open{unseen}")
        return Verdict(State.FREE, (reason, *info), age_seconds=age)
    if pid is not None and (
        policy.kernel_sentinel or (policy.kernel_pidfile and evidence.was_held)
    ):
        facts = processes.facts(pid)
        lives = "lives on but" if facts.alive else "is gone and"
        reason = Reason(
            "not_held",
            f"no kernel lock is held on it: pid {pid} {lives} no longer holds it",
        )
        return Verdict(State.FREE, (reason, *info), age_seconds=age)
    return None


# Limits come from a handful of policies and ttls: format each once.
limit_text = lru_cache(maxsize=256)(duration)


def _reused(facts: ProcessFacts, acquired_at: datetime | None) -> Reason | None:
    if not facts.alive or facts.started_at is None or acquired_at is None:
        return None
    late = (facts.started_at - acquired_at).total_seconds()
    if late <= PID_REUSE_TOLERANCE_SECONDS:
        return None
    return Reason(
        "pid_reused",
        f"pid {facts.pid} now belongs to a process started {duration(late)} after the lock"
        " was acquired; the holder is gone",
    )


def _ticks_differ(facts: ProcessFacts, recorded: int | None) -> Reason | None:
    if not facts.alive or recorded is None or facts.start_ticks is None:
        return None
    if facts.start_ticks == recorded:
        return None
    return Reason(
        "pid_reused",
        f"pid {facts.pid} now belongs to a process with another start time"
        f" ({facts.start_ticks} ticks after boot, the lock records {recorded}); the holder is gone",
    )


def _boot_differs(facts: ProcessFacts, recorded: int | None) -> Reason | None:
    """Emacs's rule: a lock made in another boot of this host names a pid of a
    process that is gone, whatever now runs under that pid (more than a second
    apart: boot times read at different moments drift by rounding)."""
    if not facts.alive or recorded is None or facts.boot_time is None:
        return None
    if abs(facts.boot_time - recorded) <= BOOT_TIME_TOLERANCE_SECONDS:
        return None
    return Reason(
        "pid_reused",
        f"the lock was made in an earlier boot of this host; pid {facts.pid} now belongs"
        " to another process and the holder is gone",
    )


def _age(lock: Lock, now: datetime) -> float | None:
    if lock.acquired_at is None:
        return None
    return max((now - lock.acquired_at).total_seconds(), 0.0)


def _skew(what: str, ahead: float) -> Reason:
    return Reason(
        "clock_skew",
        f"{what} time is {duration(ahead)} in the future; the writer's clock disagrees with ours",
    )


def evaluate_all(
    locks: Sequence[Lock], processes: ProcessLookup, clock: Clock, local_host: str
) -> list[Verdict]:
    """`evaluate` for many locks at one instant.

    A session holding many locks (80 advisory locks on a pooled connection) gets
    the same verdict for each granted one that nobody waits on: those are judged
    once per session and the verdict, immutable, is shared.
    """
    now = clock.now()
    instant = FrozenClock(now)
    shared: dict[Hashable, Verdict] = {}
    verdicts: list[Verdict] = []
    for lock in locks:
        facts = lock.facts
        key = None if facts is None else facts.share_key(lock)
        if key is None:
            verdicts.append(evaluate(lock, processes, instant, local_host))
            continue
        verdict = shared.get(key)
        if verdict is None:
            verdict = shared[key] = evaluate(lock, processes, instant, local_host)
        verdicts.append(verdict)
    return verdicts
