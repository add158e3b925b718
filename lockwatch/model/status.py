"""How each source is doing, for the header line and `ls --json`'s `sources`."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from lockwatch.model.jsonfields import json_fields
from lockwatch.model.slots import lean_dataclass

# "polling": lock files read by polling, not events (the reason says why): still live.
SourceState = Literal[
    "ok", "watching", "polling", "connected", "connecting", "disconnected", "error"
]
# The states of a source that is answering: what it shows is current.
LIVE_STATES: frozenset[str] = frozenset({"ok", "watching", "polling", "connected"})


@lean_dataclass(frozen=True, slots=True)
class SourceStatus:
    kind: str  # the source's name in the registry: file, postgres, kernel
    name: str  # a path, or a server's name (never with a password)
    state: SourceState
    reason: str | None = None
    # When this source last produced a good snapshot; what is shown is that old.
    updated_at: datetime | None = None
    next_retry_at: datetime | None = None
    # Answering, but showing only part of its locks (the reason says what is hidden
    # and how to see it): never "no locks" for what it could not see.
    partial: bool = False

    as_json = json_fields(
        "kind", "name", ("status", "state"), "reason", "updated_at", "next_retry_at"
    )


def backoff_seconds(failures: int, jitter: float = 0.0, cap: float = 30.0) -> float:
    """1, 2, 4, 8 … seconds after consecutive failures, never more than `cap`.

    `jitter` in [-1, 1] spreads retries by up to ±20% so many lockwatch instances
    do not reconnect in step after a server restart.
    """
    # The exponent is bounded too: a long outage must not overflow a float.
    base = min(cap, 2.0 ** min(max(0, failures - 1), 16))
    return min(cap, max(0.5, base * (1 + 0.2 * jitter)))


@lean_dataclass(frozen=True, slots=True)
class ScanError:
    """A place that could not be read; shown, never fatal."""

    path: str
    message: str
    code: str = "unreadable"


def failure_cause(exc: BaseException) -> str:
    """What went wrong, in words. Failures may arrive wrapped in exception groups
    ("unhandled errors in a TaskGroup (1 sub-exception)", which named no cause):
    the exceptions inside are the cause, named with their type."""
    leaves: list[BaseException] = []
    pending = [exc]
    while pending and len(leaves) < 3:
        current = pending.pop(0)
        if isinstance(current, BaseExceptionGroup):
            pending[:0] = current.exceptions
        else:
            leaves.append(current)
    if not leaves:
        return type(exc).__name__
    words = [
        f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__ for leaf in leaves
    ]
    return "; ".join(dict.fromkeys(words))
