"""Verdicts: one pure function from (lock, process facts, clock, host) to a state.

`evaluate` chains named rules: a lock with facts of its source's own is judged
by them (`Facts.judge`); a lock file by the generic rules below, each reading
the part of its format's `StalenessPolicy` it is named for.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import datetime
from enum import StrEnum
from functools import lru_cache

from lockwatch.clock import Clock, FrozenClock
from lockwatch.model.holder import describe_process, holder_checks
from lockwatch.model.hosts import is_local_address
from lockwatch.model.humanize import duration
from lockwatch.model.kernel import CALLS, KernelEvidence, uncertain_holder
from lockwatch.model.lock import EXISTENCE, KERNEL, Holder, Lock, Reason, StalenessPolicy
from lockwatch.model.process import ProcessFacts, ProcessLookup
from lockwatch.model.slots import fast_init, lean_dataclass
from lockwatch.model.timestamps import plus_seconds

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
@lean_dataclass(frozen=True, slots=True)
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
    if a == "" or a == b or is_local_address(a):
        return True
    if _is_address(a) or _is_address(b):
        return False  # 10.0.0.1 and 10.0.0.2 share no "short name"
    return a.split(".", 1)[0] == b.split(".", 1)[0]


def _is_address(host: str) -> bool:
    return ":" in host or host.replace(".", "").isdigit()


def evaluate(lock: Lock, processes: ProcessLookup, clock: Clock, local_host: str) -> Verdict:
    """A lock's verdict: the named rules below, in this order. The first rules
    decide alone when they apply (a verdict); the others add their reasons and
    deadlines, and `final_state` weighs them."""
    if lock.unseen is not None:
        return unseen(lock, clock.now())
    if lock.unread is not None:
        return unread(lock, processes, clock.now())
    if lock.facts is not None:
        judged = by_own_facts(lock, processes, clock.now(), local_host)
        if judged is not None:
            return judged
    now = clock.now()
    policy = lock.policy
    info: list[Reason] = list(lock.notes)
    age = age_of(lock, now, info)
    # Only the kernel's word, defects or a lock's users decide alone (most lock
    # files have none of them: the hot path of a large scan skips these rules).
    if lock.evidence is not None or lock.defects or policy.kernel_only or policy.held_while_used:
        # With the kernel's word, "the lock names no process" is no longer the news.
        decided = [reason for reason in info if reason.code != "no_pid"]
        decisive = (
            kernel_evidence_held(lock, processes, age, decided)
            or defects(lock, age, info)
            or kernel_only_unknown(lock, age, decided)
            or kernel_unheld(lock, processes, now, age, decided)
            or held_while_used(lock, age, info, decided)
        )
        if decisive is not None:
            return decisive
    stale: list[Reason] = []
    deadlines: list[datetime | None] = []
    foreign = is_foreign(lock.holder, local_host)
    unknown, facts, alive = holder_checks(lock, foreign, processes, local_host, info, stale)
    unknown = unknown or undecided(lock, foreign, info)
    pid_or_sentinel(lock, alive, info, stale)
    age_limit(lock, foreign, age, stale, deadlines)
    heartbeat(lock, now, info, stale, deadlines)
    lease_expiry(lock, now, stale, deadlines)
    return waiter(lock, age, unknown, facts, alive, info, stale) or final_state(
        now, age, unknown, facts, alive, info, stale, deadlines
    )


# --- the rules that decide alone ---------------------------------------------


def unseen(lock: Lock, now: datetime) -> Verdict:
    """A lock that could not be read again is unknown: what it said when last
    read is no evidence now (it may have been released, taken again or left
    behind since)."""
    assert lock.unseen is not None
    return Verdict(State.UNKNOWN, (lock.unseen,), age_seconds=_age(lock, now))


def unread(lock: Lock, processes: ProcessLookup, now: datetime) -> Verdict:
    """A lock file lockwatch's user may not read: a kernel lock held on it is
    held by its holder whoever reads /proc/locks (the verdict the tool that
    took it reaches, content unread); with none, its content might name a
    holder nobody here can check: unknown, the reason naming why."""
    assert lock.unread is not None
    info = list(lock.notes)
    age = age_of(lock, now, info)
    held = kernel_evidence_held(lock, processes, age, [*info, lock.unread])
    if held is not None:
        return held
    return Verdict(State.UNKNOWN, (lock.unread, *info), age_seconds=age)


def by_own_facts(
    lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
) -> Verdict | None:
    """Its source's own rules (pg_locks, /proc/locks, a store's key, another
    host's verdict); None: it is judged as a lock file, by its policy."""
    assert lock.facts is not None
    return lock.facts.judge(lock, processes, now, local_host)


def age_of(lock: Lock, now: datetime, info: list[Reason]) -> float | None:
    """Seconds since it was acquired (0 for a time in the future, which a
    `clock_skew` reason in `info` tells when it is beyond the tolerance)."""
    if lock.acquired_at is None:
        return None
    age = (now - lock.acquired_at).total_seconds()
    if age < -CLOCK_SKEW_TOLERANCE_SECONDS:
        info.append(_skew("acquired", -age))
    return max(age, 0.0)


def kernel_evidence_held(
    lock: Lock, processes: ProcessLookup, age: float | None, decided: list[Reason]
) -> Verdict | None:
    """A kernel lock held on the file: active. The kernel's word beats the
    file's: whoever holds the lock holds it, whatever the file says (or fails to
    say) about its holder; its defects are told, not decisive."""
    evidence = lock.evidence
    if evidence is None or not evidence.holds:
        return None
    return _kernel_held(evidence, processes, age, (*decided, *lock.defects))


def defects(lock: Lock, age: float | None, info: list[Reason]) -> Verdict | None:
    """Content its decoder found defects in: invalid."""
    if not lock.defects:
        return None
    return Verdict(State.INVALID, (*lock.defects, *info), age_seconds=age)


def kernel_only_unknown(lock: Lock, age: float | None, decided: list[Reason]) -> Verdict | None:
    """A lock only its kernel lock decides, when the kernel could not be asked (no
    /proc/locks, a network filesystem) and the file names nobody: unknown."""
    if lock.evidence is not None or not lock.policy.kernel_only or lock.holder.pid is not None:
        return None
    reason = Reason(
        "no_kernel_evidence",
        "only a kernel lock on it says whether it is held, and /proc/locks"
        " could not be read for it",
    )
    return Verdict(State.UNKNOWN, (reason, *decided), age_seconds=age)


def kernel_unheld(
    lock: Lock,
    processes: ProcessLookup,
    now: datetime,
    age: float | None,
    decided: list[Reason],
) -> Verdict | None:
    """No kernel lock held on the file: free (or held by whoever has it open) if
    it is only a sentinel for one, or a pid file seen to carry one; else the
    file's own rules go on."""
    evidence = lock.evidence
    if evidence is None:
        return None
    return _kernel_unheld(lock, evidence, processes, now, age, decided)


def held_while_used(
    lock: Lock, age: float | None, info: list[Reason], decided: list[Reason]
) -> Verdict | None:
    """A lock held exactly while some process works on what it guards (git's):
    with somebody at work, that names the holder (a "no pid" note is dropped
    from `info`); with nobody, stale once older than a writer needs between
    creating it and being seen at work, active until then."""
    policy = lock.policy
    if not policy.held_while_used or lock.users is None:
        return None
    if lock.users:
        info[:] = [reason for reason in info if reason.code != "no_pid"]
        return None
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


# --- the rules that add reasons and deadlines --------------------------------


def is_foreign(holder: Holder, local_host: str) -> bool:
    """Whether the lock was written on another host (its pid names nothing here)."""
    return holder.host is not None and not same_host(holder.host, local_host)


def undecided(lock: Lock, foreign: bool, info: list[Reason]) -> Reason | None:
    """Unknown by its format's rule: another host's lock where its tool checks the
    pid on the writer's host only (its `foreign_host` note is the reason), or a
    lock nothing here can judge (the decoder's first note says why)."""
    policy = lock.policy
    if policy.foreign_unknown and foreign:
        reason = next((r for r in info if r.code == "foreign_host"), None)
    elif policy.undecided and lock.notes:
        reason = lock.notes[0]
    else:
        return None
    if reason is not None and reason in info:
        info.remove(reason)
    return reason


def pid_or_sentinel(
    lock: Lock, alive: bool | None, info: list[Reason], stale: list[Reason]
) -> None:
    """A file whose reading the config declared an existence lock says so; a
    bare pid nothing declared, live and with no kernel lock on it, is active by
    the pid rule, the sentinel's reading named beside it: never a bare active."""
    policy = lock.policy
    if policy.declared == EXISTENCE:
        info.insert(0, _declared_existence(lock))
        return
    # Without the kernel's word (a network filesystem) no sentinel reading is known.
    unproven = policy.sentinel_unproven and policy.kernel_pidfile and lock.evidence is not None
    if not unproven or stale or alive is not True:
        return
    info.insert(
        0,
        Reason(
            "live_pid_no_kernel_lock",
            f"pid {lock.holder.pid} lives: held by the pid rule (a pid file is held while its"
            " process lives); no kernel lock is held on it, so if it is a kernel lock's"
            " sentinel (portalocker, a daemon's lockf'd pid file) it was released, and free."
            " To settle it, declare its path's protocol in lockwatch.toml ([[protocols]])",
        ),
    )


def age_limit(
    lock: Lock,
    foreign: bool,
    age: float | None,
    stale: list[Reason],
    deadlines: list[datetime | None],
) -> None:
    """Stale past its policy's age limit (the stricter foreign one for another
    host's lock); until then, the limit is a deadline."""
    policy = lock.policy
    limit = policy.max_age
    if foreign and policy.foreign_max_age is not None:
        limit = policy.foreign_max_age if limit is None else min(limit, policy.foreign_max_age)
    if limit is None or age is None or lock.acquired_at is None:
        return
    over = age >= limit if policy.max_age_inclusive else age > limit
    if over:
        where = f" for a lock from host {lock.holder.host}" if foreign else ""
        stale.append(
            Reason(
                "too_old", f"held for {duration(age)}, over the {limit_text(limit)} limit{where}"
            )
        )
    else:
        deadlines.append(plus_seconds(lock.acquired_at, limit))


def heartbeat(
    lock: Lock,
    now: datetime,
    info: list[Reason],
    stale: list[Reason],
    deadlines: list[datetime | None],
) -> None:
    """A heartbeat lock: stale once its last beat is older than its ttl, late
    past the policy's fraction of it (both deadlines until then); a beat from the
    future is clock skew (told once)."""
    policy = lock.policy
    beat, ttl = lock.heartbeat_at, lock.ttl_seconds
    if not policy.heartbeat or beat is None or ttl is None:
        return
    since = (now - beat).total_seconds()
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
        return
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
        deadlines.append(plus_seconds(beat, late_after))
    deadlines.append(plus_seconds(beat, ttl))


def lease_expiry(
    lock: Lock, now: datetime, stale: list[Reason], deadlines: list[datetime | None]
) -> None:
    """A lock whose lease runs out (`expires_at`): stale once its tool would
    break it (the policy's grace after expiry); that moment is a deadline."""
    if lock.expires_at is None:
        return
    grace_seconds = lock.policy.expiry_grace
    breaks_at = plus_seconds(lock.expires_at, grace_seconds)
    if breaks_at is not None and now > breaks_at:
        expired_for = (now - lock.expires_at).total_seconds()
        grace = (
            f"; its tool breaks it {limit_text(grace_seconds)} after that" if grace_seconds else ""
        )
        stale.append(
            Reason(
                lock.policy.expiry_code,
                f"its lease expired {duration(expired_for)} ago{grace}",
            )
        )
    else:
        deadlines.append(breaks_at)


# --- the state -----------------------------------------------------------------


def waiter(
    lock: Lock,
    age: float | None,
    unknown: Reason | None,
    facts: ProcessFacts | None,
    alive: bool | None,
    info: list[Reason],
    stale: list[Reason],
) -> Verdict | None:
    """A file that records a waiter, not a holder: waiting, unless a rule found it
    stale or nobody can tell."""
    if not lock.policy.waiter or stale or unknown is not None:
        return None
    pid = lock.holder.pid
    who = f"pid {pid}" if pid is not None else "a waiter"
    waiting = Reason("waiting", f"{who} waits its turn")
    return Verdict(
        State.WAITING,
        (waiting, *info),
        age_seconds=age,
        alive=alive,
        process=facts if alive else None,
    )


def final_state(
    now: datetime,
    age: float | None,
    unknown: Reason | None,
    facts: ProcessFacts | None,
    alive: bool | None,
    info: list[Reason],
    stale: list[Reason],
    deadlines: list[datetime | None],
) -> Verdict:
    """Stale if any rule says so; else unknown if nobody can tell (its own rules,
    age and heartbeat, still decide when they can: only a lock they leave live is
    in doubt); else active, until the nearest deadline still ahead."""
    if unknown is not None:
        info.insert(0, unknown)
    future = [d for d in deadlines if d is not None and d >= now] if not stale else None
    return Verdict(
        State.STALE if stale else State.UNKNOWN if unknown is not None else State.ACTIVE,
        (*stale, *info),
        age_seconds=age,
        alive=alive,
        # A recycled pid's process is somebody else's: never show it as the holder.
        process=facts if alive else None,
        next_change_at=min(future) if future else None,
    )


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
    uncertain = uncertain_holder(hold)
    extra = () if uncertain is None else (Reason(*uncertain),)
    return Verdict(
        State.ACTIVE,
        (reason, *extra, *info),
        age_seconds=age,
        alive=True if facts is None else facts.alive or None,
        process=facts if facts is not None and facts.alive else None,
    )


def _kernel_unheld(
    lock: Lock,
    evidence: KernelEvidence,
    processes: ProcessLookup,
    now: datetime,
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
        # A kernel_only file is only ever a sentinel (its tool, or the config, says so).
        if policy.sentinel_unproven and not policy.kernel_only and not evidence.was_held:
            reason = _existence_unknown(unseen, _file_age(lock, now))
            return Verdict(State.UNKNOWN, (reason, *info), age_seconds=age)
        said = f"no process holds a kernel lock on it or has it open{unseen}"
        return Verdict(State.FREE, (_unheld(policy, said), *info), age_seconds=age)
    if pid is not None and (
        policy.kernel_sentinel or (policy.kernel_pidfile and evidence.was_held)
    ):
        facts = processes.facts(pid)
        lives = "lives on but" if facts.alive else "is gone and"
        said = f"no kernel lock is held on it: pid {pid} {lives} no longer holds it"
        return Verdict(State.FREE, (_unheld(policy, said), *info), age_seconds=age)
    return None


def _unheld(policy: StalenessPolicy, said: str) -> Reason:
    """Free: the kernel's word on a sentinel, and who says the file is one."""
    if policy.declared != KERNEL:
        return Reason("not_held", said)
    return Reason(
        "declared_kernel_sentinel",
        f"{said}; the config declares its path's locks kernel locks' sentinels"
        ' ([[protocols]] kind = "kernel"): free',
    )


def _declared_existence(lock: Lock) -> Reason:
    pid = lock.holder.pid
    rule = "while it exists" if pid is None else f"while it exists and pid {pid} lives"
    return Reason(
        "declared_existence",
        f"the config declares its path's locks existence locks ([[protocols]] kind ="
        f' "existence"): held {rule}',
    )


def _file_age(lock: Lock, now: datetime) -> str:
    """How old the file is, in words (an existence lock's age, if it is one)."""
    modified = lock.modified_at or lock.acquired_at
    if modified is None:
        return "of unknown age"
    return f"last modified {duration(max((now - modified).total_seconds(), 0.0))} ago"


def _existence_unknown(unseen: str, age: str) -> Reason:
    return Reason(
        "existence_unknown",
        f"an empty file, {age}, that no process holds a kernel lock on or has open{unseen},"
        " nor was seen holding: if it is a kernel lock's sentinel (filelock, portalocker,"
        " flock(1)), its lock was released: free; if it is an existence lock (npm's"
        " lockfile, created O_EXCL), it is held while it exists. The file cannot say which:"
        " ask which tool makes it, or declare its path's protocol in lockwatch.toml"
        ' ([[protocols]] path = a glob, kind = "kernel" or "existence")',
    )


# Limits come from a handful of policies and ttls: format each once.
limit_text = lru_cache(maxsize=256)(duration)


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
