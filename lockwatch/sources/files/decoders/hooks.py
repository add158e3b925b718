"""What formats' hooks share: the `wants` of a format that asks for no entries,
the writers of one whose lock is never rewritten, and the types its `explain` is
handed (sources/files/evidence.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from lockwatch.model.handover import NewHolder
from lockwatch.sources.filelocks import FileKey, KernelLock

# What a format's `explain` is handed: the kernel locks on any file, and who has
# a file open.
HeldOn = Callable[[FileKey], tuple[KernelLock, ...]]
OpenBy = Callable[[FileKey], tuple[int, ...]]


def wants_none(path: str, kind: str) -> bool:
    """A format whose locks the scanner lists anyway (its `wants`): it asks for
    no other entries."""
    return False


def no_handover(content: Any, new: NewHolder) -> bytes | None:
    """A format whose lock cannot be handed over (its `handover`): steal refuses."""
    return None


def no_refresh(content: Any, at: datetime) -> bytes | None:
    """A format whose lock is not kept by rewriting its content (its `refresh`)."""
    return None
