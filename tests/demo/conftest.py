"""The demo's tests: a server for the PostgreSQL ones (tests/postgres's own fixtures, so
`LOCKWATCH_REQUIRE_PG=1` fails them instead of skipping), and bounded waiting."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import psutil
import pytest

from tests.postgres.conftest import pg_db, pg_dsn  # noqa: F401 - fixtures, used by name

WAIT_S = 30.0  # a bound for waits under a loaded suite, never a timing assertion
POLL_S = 0.02


def wait_until(predicate: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    """Wait, at most `timeout` seconds, until `predicate()` is true; fail saying `what`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(POLL_S)


async def await_until(
    predicate: Callable[[], object],
    what: str,
    timeout: float = WAIT_S,
    describe: Callable[[], str] | None = None,
    pause: Callable[[], Awaitable[None]] | None = None,
) -> float:
    """As `wait_until`, without blocking the event loop; returns the seconds it took."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            seen = f"; {describe()}" if describe else ""
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}{seen}")
        await (pause() if pause else asyncio.sleep(0.05))
    return time.monotonic() - start


def gone(pid: int, created: float | None = None) -> bool:
    """The process is gone: no such pid, a zombie (nothing left of it but its exit
    status, when this container's init does not reap orphans), or another process
    that reuses the pid."""
    try:
        process = psutil.Process(pid)
        if created is not None and abs(process.create_time() - created) > 0.01:
            return True
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def birth(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return None
