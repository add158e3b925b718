"""Stealing a lock means writing it anew for the operator, in its own format.

Each decoder knows how its format is written (`handover`, `refresh`); this
module holds what they share: who the new holder is, the mark lockwatch leaves
in what it writes, and how to tell that a lock is one lockwatch holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from lockwatch.model.lock import Lock
from lockwatch.model.slots import lean_dataclass
from lockwatch.model.timestamps import format_timestamp

# The key under which lockwatch marks a lock it wrote (tower-fleet: inside metadata).
MARK = "lockwatch"


@lean_dataclass(frozen=True, slots=True)
class NewHolder:
    """The operator taking a lock over, as the new lock records them."""

    operator: str
    # The pid a pid-liveness format records: alive as long as the operator's
    # shell (CLI) or lockwatch itself (dashboard) runs.
    pid: int
    # This lockwatch's own pid, where a format records the writer (tower-fleet).
    own_pid: int
    host: str
    at: datetime
    # Unique to this steal: request/session/run ids are built from it.
    token: str
    reason: str

    def mark(self, previous: Any = None) -> dict[str, Any]:
        mark: dict[str, Any] = {
            "held_by": self.operator,
            "stolen_at": format_timestamp(self.at),
            "token": self.token,
            "reason": self.reason,
        }
        if previous is not None:
            mark["previous_holder"] = previous
        return mark


def marked(content: Any) -> Mapping[str, Any] | None:
    """The lockwatch mark in a lock's content, wherever its format keeps it."""
    if not isinstance(content, Mapping):
        return None
    mark = content.get(MARK)
    if not isinstance(mark, Mapping):
        metadata = content.get("metadata")
        mark = metadata.get(MARK) if isinstance(metadata, Mapping) else None
    if isinstance(mark, Mapping) and isinstance(mark.get("token"), str):
        return mark
    return None


def held_by_lockwatch(lock: Lock, pid: int | None = None, operator: str | None = None) -> bool:
    """Whether lockwatch wrote this lock for an operator (`operator`, if given): it
    carries lockwatch's mark naming them, or (formats that record nothing but a
    pid) it names `pid`. Only a lock its facts call rewritable (a lock file) is
    written anew: a server's, the kernel's or another host's is its source's."""
    if lock.facts is None or not lock.facts.rewritable or lock.defects:
        return False
    mark = marked(lock.content)
    if mark is not None:
        return operator is None or mark.get("held_by") == operator
    return (
        pid is not None
        and lock.holder.pid == pid
        and not isinstance(lock.content, Mapping)
        and lock.format == "generic"
    )
