"""Verdicts: one pure function from (lock, process facts, clock, host) to a state.

Every lock is judged by its source's rules, through its facts (`Facts.judge`):
a lock file by its format's policy (`sources/files/rules.py`), a pg_locks row
by PostgreSQL's, and so on. This module holds what every source's rules share.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import datetime
from enum import StrEnum
from functools import lru_cache

from lockwatch.clock import Clock, FrozenClock
from lockwatch.model.hosts import is_local_address
from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock, Reason
from lockwatch.model.process import ProcessFacts, ProcessLookup
from lockwatch.model.slots import fast_init, lean_dataclass

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


# A lock whose source gave it no rules (no facts): nobody here can tell.
NO_RULES = Reason("no_rules", "its source gave lockwatch no rules to judge it by")


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
    """A lock's verdict, by its source's own rules (its facts' `judge`)."""
    facts = lock.facts
    judged = None if facts is None else facts.judge(lock, processes, clock.now(), local_host)
    if judged is None:
        return Verdict(State.UNKNOWN, (NO_RULES, *lock.notes))
    return judged


# Limits come from a handful of policies and ttls: format each once.
limit_text = lru_cache(maxsize=256)(duration)


def skew(what: str, ahead: float) -> Reason:
    """A time `ahead` seconds in the future: the writer's clock disagrees."""
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
