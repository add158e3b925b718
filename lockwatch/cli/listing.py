"""`lockwatch ls --json` for many locks: judge slices of the files on every core.

Each worker loads and judges its slice and sends back finished JSON per lock,
which costs next to nothing to pass between processes (Lock objects would cost
more to pickle than to rebuild). Live locks with a scope are sent back whole and
judged together here, because scope conflicts cross slices.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from lockwatch.cli.fanout import fan_out
from lockwatch.clock import FrozenClock
from lockwatch.model.conflicts import with_scope_conflicts
from lockwatch.model.lock import Lock
from lockwatch.model.report import ScanError, lock_json_bytes, ls_json_bytes
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.files.scanner import Candidate, ScanResult, find, load_all
from lockwatch.sources.processes import PsutilProcesses

# Below this many files per worker, forking costs more than it saves.
MIN_FILES_PER_JOB = 1000


@dataclass
class Judged:
    """One slice's results: JSON per lock, plus what must be judged together."""

    rendered: list[tuple[str, bytes]] = field(default_factory=list)  # (lock id, JSON)
    scoped: list[tuple[Lock, Verdict]] = field(default_factory=list)
    errors: list[ScanError] = field(default_factory=list)
    stale: int = 0


def _judge(candidates: Sequence[Candidate], now: datetime, host: str) -> Judged:
    loaded = load_all(candidates, ScanResult())
    # Processes are looked at after the files were read (see PsutilProcesses).
    processes, clock = PsutilProcesses(), FrozenClock(now)
    judged = Judged(errors=loaded.errors)
    for lock in loaded.locks:
        verdict = evaluate(lock, processes, clock, host)
        if verdict.state is State.STALE:
            judged.stale += 1
        if lock.scope and verdict.state is State.ACTIVE:
            judged.scoped.append((lock, verdict))
        else:
            judged.rendered.append((lock.id, lock_json_bytes(lock, verdict)))
    return judged


@dataclass(frozen=True)
class Listing:
    pieces: Iterator[bytes]
    errors: list[ScanError]
    stale: int


def json_listing(roots: Sequence[str], now: datetime, host: str, jobs: int) -> Listing:
    """The `lockwatch.ls/1` document for `roots`, identical whatever `jobs` is."""
    candidates, find_errors = find(roots)
    jobs = max(1, min(jobs, len(candidates) // MIN_FILES_PER_JOB))
    size = max(1, -(-len(candidates) // jobs))  # ceiling division
    slices = [candidates[i : i + size] for i in range(0, len(candidates), size)] or [[]]
    parts = fan_out(slices, lambda part: _judge(part, now, host))

    scoped = [pair for part in parts for pair in part.scoped]
    verdicts = with_scope_conflicts([lock for lock, _ in scoped], [v for _, v in scoped])
    rendered = [item for part in parts for item in part.rendered]
    rendered += [
        (lock.id, lock_json_bytes(lock, verdict))
        for (lock, _), verdict in zip(scoped, verdicts, strict=True)
    ]
    rendered.sort(key=lambda item: item[0])
    errors = find_errors + [error for part in parts for error in part.errors]

    pieces = ls_json_bytes(now, host, (json for _, json in rendered), errors)
    return Listing(pieces, errors, sum(part.stale for part in parts))
