"""A lock file's verdict: one pure function from (lock, process facts, instant,
host) to a state, reached through its facts (`FileFacts.judge`).

`evaluate_file` chains named rules, each reading the part of its format's
`StalenessPolicy` (or of the kernel's word on it) it is named for.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from lockwatch.model.holder import describe_process
from lockwatch.model.humanize import duration
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.model.process import ProcessFacts, ProcessLookup
from lockwatch.model.timestamps import plus_seconds
from lockwatch.model.verdict import (
    CLOCK_SKEW_TOLERANCE_SECONDS,
    State,
    Verdict,
    limit_text,
    same_host,
    skew,
)
from lockwatch.sources.filelocks import CALLS, KernelEvidence, uncertain_holder
from lockwatch.sources.files.holder import holder_checks
from lockwatch.sources.files.policy import EXISTENCE, KERNEL, StalenessPolicy

if TYPE_CHECKING:
    from lockwatch.sources.files.facts import FileFacts

# The states nearly every lock file's verdict is weighed with, as module names:
# looking a member up on the enum class goes through EnumType's __getattr__
# hook (Python 3.11: ~900 instructions a look-up, a few per lock file).
_ACTIVE, _STALE, _UNKNOWN = State.ACTIVE, State.STALE, State.UNKNOWN

# A lock file's facts, which every rule here is only ever handed a lock with
# (FileFacts.judge): one C call, as cheap as reading the attribute.
_file: Callable[[Lock], FileFacts] = operator.attrgetter("facts")


def evaluate_file(
    lock: Lock, ff: FileFacts, processes: ProcessLookup, now: datetime, local_host: str
) -> Verdict:
    """A lock file's verdict (`ff` its facts): the named rules below, in this
    order. The first rules decide alone when they apply (a verdict); the others
    add their reasons and deadlines, and `final_state` weighs them."""
    if ff.unseen is not None:
        return Verdict(State.UNKNOWN, (ff.unseen,), age_seconds=_age(lock, now))
    if ff.unread is not None:
        return unread(lock, ff.unread, processes, now)
    policy = ff.policy
    info: list[Reason] = list(lock.notes)
    age = age_of(lock, now, info)
    # Only the kernel's word, defects or a lock's users decide alone (most lock
    # files have none of them: the hot path of a large scan skips these rules).
    if _may_decide(lock, ff, policy):
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
    unknown, facts, alive = holder_checks(lock, policy, foreign, processes, local_host, info, stale)
    unknown = unknown or undecided(lock, foreign, info)
    pid_or_sentinel(lock, alive, info, stale)
    age_limit(lock, foreign, age, stale, deadlines)
    heartbeat(lock, now, info, stale, deadlines)
    lease_expiry(lock, now, stale, deadlines)
    return waiter(lock, final_state(now, age, unknown, facts, alive, info, stale, deadlines))


# --- the rules that decide alone ---------------------------------------------


def _may_decide(lock: Lock, ff: FileFacts, policy: StalenessPolicy) -> bool:
    """Whether any rule that decides alone may apply: exactly when one of them
    would not return None at once. Most lock files are on a local filesystem
    with no kernel lock held on them (their evidence attached, empty), and
    neither defects nor a kernel-only or user-held policy."""
    if lock.defects or policy.kernel_only or policy.held_while_used:
        return True
    evidence = ff.evidence
    # kernel_evidence_held needs a hold; kernel_unheld a sentinel, or a pid
    # file seen to carry one (kernel_only_unknown and held_while_used: above).
    return evidence is not None and bool(
        evidence.holds or policy.kernel_sentinel or (policy.kernel_pidfile and evidence.was_held)
    )


def unread(lock: Lock, why: Reason, processes: ProcessLookup, now: datetime) -> Verdict:
    """A lock file lockwatch's user may not read (`why`): a kernel lock held on
    it is held by its holder whoever reads /proc/locks (the verdict the tool that
    took it reaches, content unread); with none, its content might name a
    holder nobody here can check: unknown, the reason naming why."""
    info = list(lock.notes)
    age = age_of(lock, now, info)
    held = kernel_evidence_held(lock, processes, age, [*info, why])
    if held is not None:
        return held
    return Verdict(State.UNKNOWN, (why, *info), age_seconds=age)


def age_of(lock: Lock, now: datetime, info: list[Reason]) -> float | None:
    """Seconds since it was acquired (0 for a time in the future, which a
    `clock_skew` reason in `info` tells when it is beyond the tolerance)."""
    if lock.acquired_at is None:
        return None
    age = (now - lock.acquired_at).total_seconds()
    if age < -CLOCK_SKEW_TOLERANCE_SECONDS:
        info.append(skew("acquired", -age))
    return max(age, 0.0)


def kernel_evidence_held(
    lock: Lock, processes: ProcessLookup, age: float | None, decided: list[Reason]
) -> Verdict | None:
    """A kernel lock held on the file: active. The kernel's word beats the
    file's: whoever holds the lock holds it, whatever the file says (or fails to
    say) about its holder; its defects are told, not decisive."""
    evidence = _file(lock).evidence
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
    if (
        _file(lock).evidence is not None
        or not _file(lock).policy.kernel_only
        or lock.holder.pid is not None
    ):
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
    evidence = _file(lock).evidence
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
    policy = _file(lock).policy
    if not policy.held_while_used or _file(lock).users is None:
        return None
    if _file(lock).users:
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
    policy = _file(lock).policy
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
    policy = _file(lock).policy
    if policy.declared == EXISTENCE:
        info.insert(0, _declared_existence(lock))
        return
    # Without the kernel's word (a network filesystem) no sentinel reading is known.
    unproven = (
        policy.sentinel_unproven and policy.kernel_pidfile and _file(lock).evidence is not None
    )
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
    policy = _file(lock).policy
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
    policy = _file(lock).policy
    beat, ttl = lock.heartbeat_at, lock.ttl_seconds
    if not policy.heartbeat or beat is None or ttl is None:
        return
    since = (now - beat).total_seconds()
    skewed = any(reason.code == "clock_skew" for reason in info)
    if since < -CLOCK_SKEW_TOLERANCE_SECONDS and not skewed:
        info.append(skew("last heartbeat", -since))
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
    grace_seconds = _file(lock).policy.expiry_grace
    breaks_at = plus_seconds(lock.expires_at, grace_seconds)
    if breaks_at is not None and now > breaks_at:
        expired_for = (now - lock.expires_at).total_seconds()
        grace = (
            f"; its tool breaks it {limit_text(grace_seconds)} after that" if grace_seconds else ""
        )
        stale.append(
            Reason(
                _file(lock).policy.expiry_code,
                f"its lease expired {duration(expired_for)} ago{grace}",
            )
        )
    else:
        deadlines.append(breaks_at)


# --- the state -----------------------------------------------------------------


def waiter(lock: Lock, weighed: Verdict) -> Verdict:
    """A file that records a waiter, not a holder: waiting where `final_state`
    found it active (no rule found it stale, and somebody can tell)."""
    if weighed.state is not _ACTIVE or not _file(lock).policy.waiter:
        return weighed
    pid = lock.holder.pid
    who = f"pid {pid}" if pid is not None else "a waiter"
    waiting = Reason("waiting", f"{who} waits its turn")
    return Verdict(
        State.WAITING,
        (waiting, *weighed.reasons),
        age_seconds=weighed.age_seconds,
        alive=weighed.alive,
        process=weighed.process,
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
    # Positional (state, reasons, age_seconds, alive, process, next_change_at): the
    # verdict of nearly every lock file of a scan is made here.
    return Verdict(
        _STALE if stale else _UNKNOWN if unknown is not None else _ACTIVE,
        (*stale, *info),
        age,
        alive,
        # A recycled pid's process is somebody else's: never show it as the holder.
        facts if alive else None,
        min(future) if future else None,
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
    policy, pid = _file(lock).policy, lock.holder.pid
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
    modified = _file(lock).modified_at or lock.acquired_at
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


def _age(lock: Lock, now: datetime) -> float | None:
    if lock.acquired_at is None:
        return None
    return max((now - lock.acquired_at).total_seconds(), 0.0)
