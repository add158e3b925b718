"""`lockwatch ls --json` for many locks: judge slices of the files on every core.

Each worker loads and judges its slice and sends back its locks as one finished
JSON array, which costs next to nothing to pass between processes (Lock objects
would cost more to pickle than to rebuild). Live locks with a scope are also sent
back whole and judged together here, because scope conflicts cross slices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from lockwatch import collector
from lockwatch.clock import FrozenClock
from lockwatch.cpus import spread
from lockwatch.model.conflicts import with_scope_conflicts
from lockwatch.model.lock import Lock
from lockwatch.model.report import lock_record, records_json_array
from lockwatch.model.slots import lean_dataclass
from lockwatch.model.status import ScanError
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.files.protocols import NO_PROTOCOLS, Protocols
from lockwatch.sources.files.scanner import (
    Area,
    ScanResult,
    find_in,
    load_all,
    partition,
    with_unread,
)
from lockwatch.sources.processes import HostProcesses

if TYPE_CHECKING:
    from lockwatch.sources.filelocks import FileKey

# Share the work only with at least this many directories or files per worker:
# below that, forking costs more than it saves.
MIN_AREAS_PER_JOB = 8
# As module names: a member looked up on the enum class goes through EnumType's
# __getattr__ hook (Python 3.11: ~900 instructions), here once or twice a lock.
_ACTIVE, _STALE = State.ACTIVE, State.STALE


@lean_dataclass
class Judged:
    """One slice's results, rendered, plus what must be judged across slices."""

    locks: bytes  # a JSON array of the slice's lock records, in id order
    # (index in that array, lock, verdict) of every live lock with a scope
    scoped: list[tuple[int, Lock, Verdict]] = field(default_factory=list)
    errors: list[ScanError] = field(default_factory=list)
    stale: int = 0
    unread: int = 0  # lock files listed that lockwatch's user may not read


def _judge(
    areas: Sequence[Area],
    now: datetime,
    host: str,
    listed: frozenset[FileKey] | None = None,
    protocols: Protocols = NO_PROTOCOLS,
) -> Judged:
    from lockwatch.sources.files.evidence import Evidence, kernel_table_for, known_evidence

    candidates, errors = find_in(areas)
    # Rendered and dropped: nothing keeps the records' content, so none is compacted.
    # Decoded with the kernel's word where it is already known (most files: nothing).
    known = known_evidence(listed)
    result = ScanResult(errors=errors)
    loaded = with_unread(load_all(candidates, result, compact=False, known=known))
    # The kernel's word on this slice's files alone (`listed`: what /proc/locks names).
    table = kernel_table_for(listed, loaded.locks)
    locks = Evidence(table, protocols=protocols, known=known is not None).attach(loaded.locks)
    # Processes are looked at after the files were read (see HostProcesses).
    processes, clock = HostProcesses(), FrozenClock(now)
    records = []
    scoped = []
    stale = 0
    for index, lock in enumerate(locks):
        verdict = evaluate(lock, processes, clock, host)
        records.append(lock_record(lock, verdict))
        if verdict.state is _STALE:
            stale += 1
        elif lock.scope and verdict.state is _ACTIVE:
            scoped.append((index, lock, verdict))
    judged = Judged(records_json_array(records), scoped, loaded.errors, stale, loaded.unread)
    collector.left(candidates, loaded, locks, records)
    return judged


def _add_scope_conflicts(parts: list[Judged]) -> None:
    """Scope conflicts cross slices: judge the scoped locks of all slices together
    and re-render the few records that gained a conflict."""
    scoped = [
        (part, index, lock, verdict) for part in parts for index, lock, verdict in part.scoped
    ]
    updated = with_scope_conflicts([s[2] for s in scoped], [s[3] for s in scoped])
    changed: dict[int, tuple[Judged, dict[int, dict[str, Any]]]] = {}
    for (part, index, lock, before), after in zip(scoped, updated, strict=True):
        if after is not before:
            changed.setdefault(id(part), (part, {}))[1][index] = lock_record(lock, after)
    for part, records in changed.values():
        rendered = orjson.loads(part.locks)
        for index, record in records.items():
            rendered[index] = record
        part.locks = records_json_array(rendered)


@lean_dataclass(frozen=True)
class Listing:
    arrays: list[bytes]  # JSON arrays of lock records; joined in order, sorted by id
    errors: list[ScanError]
    stale: int
    unread: int = 0


def json_listing(
    roots: Sequence[str],
    now: datetime,
    host: str,
    jobs: int,
    listed: frozenset[FileKey] | None = None,
    protocols: Protocols = NO_PROTOCOLS,
) -> Listing:
    """The file locks under `roots`, rendered, identical whatever `jobs` is.
    `listed`: the files /proc/locks names (evidence.kernel_listed), read once here;
    each worker reads the kernel's word on its own files. `protocols`: what the
    config declares paths' locks to be."""
    slices, find_errors = partition(roots, jobs, enough=MIN_AREAS_PER_JOB)
    parts = spread(slices, lambda part: _judge(part, now, host, listed, protocols))
    _add_scope_conflicts(parts)
    errors = sorted(
        find_errors + [error for part in parts for error in part.errors], key=lambda e: e.path
    )
    return Listing(
        [part.locks for part in parts],
        errors,
        sum(part.stale for part in parts),
        sum(part.unread for part in parts),
    )
