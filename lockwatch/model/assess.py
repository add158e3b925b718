"""From decoded locks to verdicts: each lock alone, then the cross-lock rules."""

from __future__ import annotations

from collections.abc import Sequence

from lockwatch.clock import Clock
from lockwatch.model.conflicts import with_scope_conflicts
from lockwatch.model.lock import Lock
from lockwatch.model.process import ProcessLookup
from lockwatch.model.verdict import Verdict, evaluate_all


def assess(
    locks: Sequence[Lock], processes: ProcessLookup, clock: Clock, local_host: str
) -> list[tuple[Lock, Verdict]]:
    verdicts = evaluate_all(locks, processes, clock, local_host)
    return list(zip(locks, with_scope_conflicts(locks, verdicts), strict=True))
