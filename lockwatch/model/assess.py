"""From decoded locks to verdicts: each lock alone, then the cross-lock rules."""

from __future__ import annotations

from collections.abc import Sequence

from lockwatch.clock import Clock, FrozenClock
from lockwatch.model.conflicts import with_scope_conflicts
from lockwatch.model.lock import Lock
from lockwatch.model.process import ProcessLookup
from lockwatch.model.verdict import Verdict, evaluate


def assess(
    locks: Sequence[Lock], processes: ProcessLookup, clock: Clock, local_host: str
) -> list[tuple[Lock, Verdict]]:
    # One instant for the whole set, so locks judged together agree on "now".
    instant = FrozenClock(clock.now())
    verdicts = [evaluate(lock, processes, instant, local_host) for lock in locks]
    return list(zip(locks, with_scope_conflicts(locks, verdicts), strict=True))
