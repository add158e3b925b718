"""A polled server's failed poll, as the server sources (etcd, Redis, ZooKeeper, Kubernetes)
all take it: its connection closed, its status saying why and when it is tried
again, after a jittered exponential back-off (model/status.backoff_seconds)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Protocol

from lockwatch.clock import Clock, SystemClock
from lockwatch.model.status import SourceStatus, backoff_seconds


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


class ServerState:
    """What a polled server starts from (a `Failing`): its name, clock and poll
    deadline, no failures yet, its status `connecting`."""

    def __init__(self, kind: str, name: str, clock: Clock | None, deadline: float) -> None:
        self.name = name
        self.clock = clock or SystemClock()
        self.deadline = deadline  # seconds for a poll's whole answer
        self.failures = 0
        self.retry_in = 0.0
        self.status = SourceStatus(kind, name, "connecting")

    def close(self) -> None:
        raise NotImplementedError


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
