"""Locks as decoded from their files, kept apart from the kernel's word.

The feed judges a lock file with what the kernel says of it added (who holds a
kernel lock on it, who has it open, who works on what it guards:
`Evidence.attach`). When that word changes, it is added again to the lock as
decoded from its file. For nearly every lock that is the judged lock without the
added fields, rebuilt when needed (`as_decoded`); only where the kernel's word
replaced more (a holder, an age) is the decoded lock itself kept: a second copy
of every lock would double what a large tree costs.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import fields

from lockwatch.model.changes import Entry
from lockwatch.model.lock import Lock
from lockwatch.sources.filelocks import FileKey
from lockwatch.sources.files.facts import FileFacts, facts_of, refiled


class DecodedLocks:
    """The decoded locks `as_decoded` cannot rebuild, by id."""

    def __init__(self) -> None:
        self._kept: dict[str, Lock] = {}

    def keep(self, judged: Iterable[Entry | Lock], kept: Iterable[Lock]) -> None:
        """`judged` were read again: of their decoded forms, `kept` are kept."""
        for item in judged:
            self._kept.pop(item.lock.id if isinstance(item, Entry) else item.id, None)
        for lock in kept:
            self._kept[lock.id] = lock

    def forget(self, lock_id: str) -> None:
        self._kept.pop(lock_id, None)

    def of(self, lock: Lock) -> Lock:
        """The lock the judged `lock` was decoded as."""
        found = self._kept.get(lock.id)
        return found if found is not None else as_decoded(lock)

    def kept(self) -> dict[str, Lock]:
        """Those kept, by id (a copy)."""
        return dict(self._kept)


def as_decoded(lock: Lock) -> Lock:
    """`lock` without the kernel's word and its users: the lock as decoded from
    its file, unless the kernel's word changed more (a holder or an age it
    replaced: then the feed keeps the decoded lock itself)."""
    if facts_of(lock).evidence is None and facts_of(lock).users is None:
        return lock
    return refiled(lock, {"evidence": None, "users": None})


# What the kernel's word (Evidence.attach) adds to a decoded lock; any other field
# it changed makes `as_decoded` wrong for that lock.
# (Those are its file facts' fields: the rest of its facts and of the lock are kept.)
_ADDED = frozenset({"evidence", "users"})
_KEPT = operator.attrgetter(*(f.name for f in fields(Lock) if f.name != "facts"))
_KEPT_FACTS = operator.attrgetter(*(f.name for f in fields(FileFacts) if f.name not in _ADDED))


def worth_keeping(decoded: Sequence[Lock], attached: Sequence[Lock]) -> list[Lock]:
    """Of `decoded` locks, those `as_decoded` cannot rebuild from `attached`."""
    return [
        lock
        for lock, judged in zip(decoded, attached, strict=True)
        if not only_kernel_added(lock, judged)
    ]


def kernel_may_move(lock: Lock, keys: set[FileKey]) -> bool:
    """Whether the kernel's word on `lock` may differ from what it has, given
    the files /proc/locks names now (`keys`)."""
    policy = facts_of(lock).policy
    if facts_of(lock).kernel_file is not None or policy.kernel_sentinel or policy.held_while_used:
        return True  # another file's, who has it open, who works on it: looked at again
    if facts_of(lock).file_key is None:
        return False  # nothing the kernel could say
    evidence = facts_of(lock).evidence
    if evidence is None:
        return True  # never asked (/proc/locks was unreadable then)
    return facts_of(lock).file_key in keys or bool(
        evidence.holds or evidence.waiters or evidence.open_by or evidence.open_unknown
    )


def only_kernel_added(decoded: Lock, lock: Lock) -> bool:
    """Whether `as_decoded(lock)` is `decoded` (compared field by field: cheaper
    than building it, for every lock of a scan)."""
    was = facts_of(decoded)
    if was.evidence is not None or was.users is not None:
        return False
    if lock is decoded:
        return True
    before, after = _KEPT(decoded), _KEPT(lock)
    # The same objects, as `amended` leaves them, nearly always: no == needed.
    if not (all(map(operator.is_, before, after)) or before == after):
        return False
    before, after = _KEPT_FACTS(was), _KEPT_FACTS(facts_of(lock))
    return all(map(operator.is_, before, after)) or before == after


def kernel_view(lock: Lock) -> tuple[object, ...]:
    """What of the kernel's word changes a verdict: who holds, who has it open
    (and who works on what it guards)."""
    evidence = facts_of(lock).evidence
    if evidence is None:
        return (facts_of(lock).users,)
    return (
        tuple((hold.holder_pid, hold.type, hold.mode) for hold in evidence.holds),
        evidence.waiters,
        evidence.open_by,
        evidence.was_held,
        facts_of(lock).users,
    )
