"""A lock's facts as its source's type, for tests that look inside them: the
assertion says which lock did not have them."""

from __future__ import annotations

from lockwatch.model.lock import Lock
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.sources.postgres.facts import PgLock
from lockwatch.sources.remote.facts import RemoteOrigin
from lockwatch.sources.stores.facts import StoreLock

__all__ = [
    "KernelFacts",
    "PgLock",
    "RemoteOrigin",
    "StoreLock",
    "kernel_of",
    "pg_of",
    "remote_of",
    "store_of",
]


def pg_of(lock: Lock) -> PgLock:
    facts = lock.facts
    assert isinstance(facts, PgLock), f"{lock.id} has no pg_locks facts: {facts!r}"
    return facts


def kernel_of(lock: Lock) -> KernelFacts:
    facts = lock.facts
    assert isinstance(facts, KernelFacts), f"{lock.id} has no /proc/locks facts: {facts!r}"
    return facts


def store_of(lock: Lock) -> StoreLock:
    facts = lock.facts
    assert isinstance(facts, StoreLock), f"{lock.id} has no store facts: {facts!r}"
    return facts


def remote_of(lock: Lock) -> RemoteOrigin:
    facts = lock.facts
    assert isinstance(facts, RemoteOrigin), f"{lock.id} is no remote lock: {facts!r}"
    return facts
