"""What a source knows about one of its locks, and everything the rest of
lockwatch asks of it.

A `Lock` carries its source's facts as one value (`Lock.facts`): pg_locks rows
for PostgreSQL, a /proc/locks line for the kernel, a key for Redis or etcd, a
record judged on another host. Generic code (the verdict, the JSON contract,
blocking trees, filters, the table, the detail pane, metrics, actions) never
names a source: it asks the facts. Each source defines its facts type in its
own package (`lockwatch/sources/<name>/facts.py`, pure: no client library, no
I/O, no Textual) as a frozen dataclass subclassing `Facts`, and overrides what
its locks need; the defaults here are what a plain lock file would answer.

A lock file has no facts (`Lock.facts is None`): its format's decoder declares
its rules as a `StalenessPolicy`, judged by `model/verdict.py`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lockwatch.model.lock import Lock
    from lockwatch.model.process import ProcessLookup
    from lockwatch.model.verdict import Verdict

# One row of a detail-pane section or a confirmation's facts: (label, value).
Row = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Section:
    """A titled block of the detail pane ("Session", "Redis", "Kernel lock")."""

    title: str
    rows: tuple[Row, ...]


class Facts:
    """The base of every source's facts type: the questions generic code asks.

    Subclasses are frozen, slotted dataclasses registered with the recording
    codec through their source's `record_types`.
    """

    __slots__ = ()

    # --- the verdict ----------------------------------------------------------

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict | None:
        """This lock's verdict by its source's own rules; None: the generic
        lock-file rules (its policy) decide."""
        return None

    def share_key(self, lock: Lock) -> Hashable | None:
        """Locks of one poll with equal keys get one shared verdict (a session's
        80 granted, uncontended advisory locks); None: judge this one alone."""
        return None

    # --- the JSON contract ----------------------------------------------------

    def record(
        self, lock: Lock, verdict: Verdict, now: datetime | None, memo: dict[Any, Any]
    ) -> dict[str, Any] | None:
        """The whole `lockwatch.ls/1` record of this lock, when the source builds
        it itself (None: the generic record, then `extend_record`)."""
        return None

    def extend_record(self, record: dict[str, Any]) -> None:
        """Add this source's fields to the generic record (`record`, in place)."""

    # --- how it reads ---------------------------------------------------------

    def holder_text(self, lock: Lock) -> str | None:
        """The HOLDER column's text (None: the generic pid/actor/host)."""
        return None

    def where(self, lock: Lock) -> str | None:
        """Where the lock is when it has no path: a server, a key, an inode."""
        return None

    def place(self, lock: Lock) -> str | None:
        """What a bulk action names the lock's place by: a server (None: its path)."""
        return None

    def sections(self, lock: Lock, now: datetime) -> Sequence[Section]:
        """The detail pane's sections for this source's facts."""
        return ()

    def since(self, lock: Lock) -> datetime | None:
        """When lockwatch knows it was already held, for the AGE column where
        the lock has no acquisition time (a bound: "≥ 3m")."""
        return None

    def warning_codes(self) -> frozenset[str]:
        """Reason codes that are warnings about a live lock (its NOTE stands out)."""
        return frozenset()

    # --- filters --------------------------------------------------------------

    def matches_text(self, needle: str) -> bool:
        """Whether free text typed in the filter names this lock beyond its id,
        name and path (a session's application, a host)."""
        return False

    def matches_pid(self, pid: int) -> bool:
        """Whether `/pid:N` names this lock beyond its holder's pid."""
        return False

    # --- blocking trees -------------------------------------------------------

    def group(self) -> str | None:
        """Which wait-for graph the lock belongs to (a server); None: none."""
        return None

    def holds_as(self) -> Hashable | None:
        """Its node in that graph when it holds (a backend pid, a session)."""
        return None

    def waits(self) -> tuple[Hashable, tuple[Hashable, ...]] | None:
        """When it waits: its node and the nodes it waits on."""
        return None

    def waiter_count(self) -> int:
        """How many wait on this very lock (the WAIT column)."""
        return 0

    # --- where it lives -------------------------------------------------------

    def remote_host(self) -> str | None:
        """The host that judged it, when that is not this one (read-only here)."""
        return None
