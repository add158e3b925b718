"""A polled server's failed poll, as the server sources (etcd, Redis, ZooKeeper, Kubernetes)
all take it: its connection closed, its status saying why and when it is tried
again, after a jittered exponential back-off (model/status.backoff_seconds)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from lockwatch.model.status import SourceStatus, backoff_seconds

if TYPE_CHECKING:
    from lockwatch.clock import Clock


class Failing(Protocol):
    """A server's poller state that a failed poll changes."""

    failures: int
    retry_in: float
    status: SourceStatus

    @property
    def name(self) -> str: ...

    @property
    def clock(self) -> Clock: ...

    def close(self) -> None: ...


def first_line(exc: BaseException) -> str:
    """What an error says, in one line (its type's name when it says nothing)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def failed(
    server: Failing, kind: str, reason: str, *, away: bool, updated_at: datetime | None
) -> None:
    """A poll of `server` failed (`away`: it could not be reached, else it
    answered with an error): closed, and tried again after the back-off."""
    server.failures += 1
    server.close()
    delay = backoff_seconds(server.failures, random.uniform(-1.0, 1.0))
    server.status = SourceStatus(
        kind,
        server.name,
        "disconnected" if away else "error",
        reason=reason,
        updated_at=updated_at,
        next_retry_at=server.clock.now() + timedelta(seconds=delay),
    )
    server.retry_in = delay
