"""Scope conflicts between live locks (little-loops: same path, or one inside the other).

A loop started by another loop (its `ll-loop run` a descendant of the process
holding the overlapping lock) is no conflict: little-loops' LockManager.find_conflict
skips a lock whose pid is among the acquirer's ancestors ("a parent loop spawned
this child via shell"). The ancestry comes from the holder's process facts the
verdict carries, as the feed saw them; the model looks nothing up.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

from lockwatch.model.lock import Lock, Reason
from lockwatch.model.verdict import State, Verdict

_NAMES_SHOWN = 5


def _components(path: str) -> tuple[str, ...]:
    normal = posixpath.normpath(path)
    return tuple(part for part in normal.split("/") if part)


def overlapping_pairs(scopes: Sequence[Sequence[str]]) -> set[tuple[int, int]]:
    """Index pairs (i < j) whose scopes share a path or nest one in the other.

    Sorting component tuples puts every path right before its descendants, so one
    sweep with a stack of ancestors finds all overlaps in O(n log n + pairs)
    instead of comparing every pair.
    """
    entries = sorted(
        (_components(path), owner) for owner, scope in enumerate(scopes) for path in scope
    )
    pairs: set[tuple[int, int]] = set()
    stack: list[tuple[tuple[str, ...], int]] = []
    for parts, owner in entries:
        while stack and stack[-1][0] != parts[: len(stack[-1][0])]:
            stack.pop()
        for _, other in stack:
            if other != owner:
                pairs.add((min(owner, other), max(owner, other)))
        stack.append((parts, owner))
    return pairs


def _nested(a: tuple[Lock, Verdict], b: tuple[Lock, Verdict]) -> bool:
    """Whether one holder descends from the other (either way round)."""
    return _descends(a, b[0].holder.pid) or _descends(b, a[0].holder.pid)


def _descends(child: tuple[Lock, Verdict], ancestor: int | None) -> bool:
    lock, verdict = child
    process = verdict.process
    # Only the facts of the lock's own holder say whose child it is (a kernel
    # lock's verdict may carry another process's).
    if ancestor is None or process is None or process.pid != lock.holder.pid:
        return False
    return ancestor in process.ancestors


def with_scope_conflicts(locks: Sequence[Lock], verdicts: Sequence[Verdict]) -> list[Verdict]:
    """Add `scope_conflict` to every live lock whose scope overlaps another live lock's,
    unless one's holder is the other's ancestor (a nested loop).

    Only locks of the same format are compared: scopes of different systems do not
    exclude each other.
    """
    result = list(verdicts)
    by_format: dict[str, list[int]] = defaultdict(list)
    singles: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, (lock, verdict) in enumerate(zip(locks, verdicts, strict=True)):
        if verdict.state is not State.ACTIVE:
            continue
        if lock.scope:
            by_format[lock.format].append(index)
        single = _singleton(lock)
        if single is not None:
            singles[(lock.format, single)].append(index)

    partners: dict[int, set[int]] = defaultdict(set)
    for members in by_format.values():
        if len(members) < 2:
            continue
        found = overlapping_pairs([locks[i].scope for i in members])
        _link(partners, locks, verdicts, [(members[a], members[b]) for a, b in found])
    for members in singles.values():
        same = [(i, j) for n, i in enumerate(members) for j in members[n + 1 :]]
        _link(partners, locks, verdicts, same)

    for index, others in partners.items():
        ordered = sorted(others, key=lambda i: (locks[i].name, locks[i].id))
        names = [locks[i].name for i in ordered]
        shown = ", ".join(names[:_NAMES_SHOWN])
        if len(names) > _NAMES_SHOWN:
            shown += f" and {len(names) - _NAMES_SHOWN} more"
        verdict = result[index]
        lock = locks[index]
        single = _singleton(lock)
        overlaps = single is None or any(
            (locks[j].format, _singleton(locks[j])) != (lock.format, single) for j in others
        )
        what = (
            f"scope overlaps live lock(s) {shown}"
            if overlaps
            else f"singleton loop {single} is already running as {shown}"
        )
        result[index] = replace(
            verdict,
            reasons=(*verdict.reasons, Reason("scope_conflict", what)),
            conflicts_with=tuple(locks[i].id for i in ordered),
        )
    return result


def _link(
    partners: dict[int, set[int]],
    locks: Sequence[Lock],
    verdicts: Sequence[Verdict],
    pairs: Sequence[tuple[int, int]],
) -> None:
    for i, j in pairs:
        if not _nested((locks[i], verdicts[i]), (locks[j], verdicts[j])):
            partners[i].add(j)
            partners[j].add(i)


def _singleton(lock: Lock) -> str | None:
    """The name its live locks of one format exclude each other by, if any."""
    facts = lock.facts
    return None if facts is None else facts.singleton()
