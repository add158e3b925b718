"""Locks judged again with no file of theirs changed: a kernel lock taken or
released, a holder pid that started or stopped running, a lock directory whose
holder's file came after its mkdir. `judge_now` judges locks at this moment
with the feed's process table and host."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lockwatch.model.changes import Entry
from lockwatch.model.lock import Lock
from lockwatch.sources.files.decoded import (
    DecodedLocks,
    kernel_may_move,
    kernel_view,
    worth_keeping,
)
from lockwatch.sources.files.evidence import Evidence
from lockwatch.sources.files.facts import facts_of
from lockwatch.sources.files.scanner import load
from lockwatch.sources.processes import pids as listed_pids
from lockwatch.sources.processes import zombie

JudgeNow = Callable[[Sequence[Lock]], list[Entry]]


def recheck_kernel(
    entries: Sequence[Entry], evidence: Evidence, decoded: DecodedLocks, judge_now: JudgeNow
) -> list[Entry]:
    """Judge again the locks whose kernel evidence moved (a lock taken or
    released, a new opener), with the file as it was decoded."""
    table = evidence.table
    if table is None:
        return []
    keys = {lock.file for lock in table.locks}
    # Only these can have moved: the others had no kernel lock and still have
    # none (on a large tree, nearly all of them: not attached again each time).
    entries = [entry for entry in entries if kernel_may_move(entry.lock, keys)]
    as_decoded = [decoded.of(entry.lock) for entry in entries]
    fresh = evidence.attach(as_decoded)
    by_id = {entry.lock.id: entry for entry in entries}
    moved = [lock for lock in fresh if kernel_view(lock) != kernel_view(by_id[lock.id].lock)]
    if not moved:
        return []
    return judge_now(moved)


def recheck_dirs(
    entries: Sequence[Entry], evidence: Evidence, decoded: DecodedLocks, judge_now: JudgeNow
) -> list[Entry]:
    """Lock directories listed again: a file written inside one just after
    its mkdir may come before the watch on it does (cheap: a listing each)."""
    changed = []
    for entry in entries:
        if facts_of(entry.lock).entry != "dir" or entry.lock.path is None:
            continue
        loaded = load(entry.lock.path)
        if isinstance(loaded, Lock) and loaded.sha256 != entry.lock.sha256:
            changed.append(loaded)
    if not changed:
        return []
    locks = evidence.attach(changed)
    decoded.keep(changed, worth_keeping(changed, locks))
    return judge_now(locks)


def recheck_pids(
    entries: list[Entry], evidence: Evidence, decoded: DecodedLocks, judge_now: JudgeNow
) -> list[Entry]:
    """Judge again the locks whose holder pid started or stopped running, as
    decoded, with the kernel's word as it is now."""
    if not entries:
        return []
    listed = set(listed_pids())
    pids = {entry.lock.holder.pid for entry in entries} & listed
    # A zombie has exited: its pid is listed until it is reaped, but it holds nothing.
    running = {pid for pid in pids if pid is not None and not zombie(pid)}
    moved = [
        entry.lock
        for entry in entries
        if entry.lock.holder.pid is not None
        and (entry.lock.holder.pid in running) != bool(entry.verdict.alive)
    ]
    if not moved:
        return []
    # Judged as decoded, with the kernel's word as it is now.
    locks = evidence.attach([decoded.of(lock) for lock in moved])
    return judge_now(locks)
