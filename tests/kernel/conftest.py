"""Fixtures for the kernel-lock tests: real processes holding real locks.

The helpers use the real libraries and primitives (see tests/kernel/holders.py),
no imitation; every helper started through `holders` is SIGKILLed and reaped at
teardown.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kernel.flock_tree import FlockTree
from tests.kernel.holders import Holders, unavailable


@pytest.fixture
def holders() -> Iterator[Holders]:
    """A factory: `holders.start(kind, path)` (or `holders(kind, path)`) returns a
    `Holder` that holds the lock (a waiter: that waits for it) once it returns."""
    factory = Holders()
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def trees() -> Iterator[list[FlockTree]]:
    """Where a test puts the `flock_tree.start`ed trees it wants SIGKILLed and
    reaped at teardown, pass or fail."""
    started: list[FlockTree] = []
    try:
        yield started
    finally:
        for tree in started:
            tree.close()


def need(kind: str) -> None:
    """Skip when `kind` cannot run here (see holders.unavailable)."""
    reason = unavailable(kind)
    if reason is not None:
        pytest.skip(reason)
