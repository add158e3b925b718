"""Shared fakes: a frozen clock, a fixed process table, and lock-file builders."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.process import ProcessFacts, StaticProcesses
from lockwatch.sources.feed import Feed
from lockwatch.sources.files.decoders.base import LockFile
from tests import sandbox

# The runner's own config, state and audit files are never the tests' (issue 42,
# item 6): HOME and every XDG_* directory are the session's temporary ones, set
# here, before any test module or other conftest computes a platformdirs path
# (pgserver computes its own as it is imported), and inherited by the tests'
# subprocesses and the xdist workers. A test that changes the runner's own
# lockwatch directories anyway fails (pytest_runtest_teardown, below), and so
# does a session that changed them outside any test (pytest_sessionfinish).
SANDBOX_MADE_HERE = sandbox.SANDBOX_VAR not in os.environ
SANDBOX = sandbox.enter(os.environ)
RUNNER_DIRS = sandbox.runner_dirs_of(os.environ)
RUNNER_AT_START = sandbox.fingerprint(RUNNER_DIRS)
_BEFORE_TEST = pytest.StashKey[dict[str, list[sandbox.Entry] | None]]()

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
LOCAL_HOST = "testhost"

# The suite runs on pytest-xdist workers (pyproject's addopts: -n auto, --dist loadgroup).
# Tests whose server's state is seen server-wide run on one worker, one after
# another: pg_locks, pg_stat_activity and lockwatch's /metrics span every database
# of the server, and Redis's CLIENT LIST every client. Everything else a test
# touches is its own (tmp_path, its own database and key prefix, free ports,
# throwaway servers, uniquely named sessions).
SERVER_WIDE = {"pg_dsn": "postgres-server", "redis_url": "redis-server"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        fixtures = getattr(item, "fixturenames", ())
        for fixture, group in SERVER_WIDE.items():
            if fixture in fixtures:
                item.add_marker(pytest.mark.xdist_group(group))
                break


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_BEFORE_TEST] = sandbox.fingerprint(RUNNER_DIRS)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """A test that wrote the runner's own lockwatch files errors at its teardown
    (a hook, not an autouse fixture: hypothesis's tests take none per example)."""
    yield
    before = item.stash.get(_BEFORE_TEST, None)
    if before is None:
        return
    changed = sandbox.changes(RUNNER_DIRS, before, sandbox.fingerprint(RUNNER_DIRS))
    if changed:
        pytest.fail(
            "the runner's own lockwatch files changed during this test (or one beside it"
            f" on another worker), outside the sandbox {SANDBOX}: {'; '.join(changed)}",
            pytrace=False,
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    changed = sandbox.changes(RUNNER_DIRS, RUNNER_AT_START, sandbox.fingerprint(RUNNER_DIRS))
    if changed:
        print(f"\nlockwatch tests changed the runner's own files: {'; '.join(changed)}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    if SANDBOX_MADE_HERE:  # the xdist controller, or the one process of -n0
        shutil.rmtree(SANDBOX, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers a core (at most 8). Most tests wait on processes,
    servers and terminals rather than compute, so one a core leaves cores idle."""
    return min(8, 2 * len(os.sched_getaffinity(0)))


def iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def lock_file(path: str, content: Any, mtime: datetime = NOW) -> LockFile:
    """A LockFile as the scanner would hand it over; dicts are written as JSON."""
    if isinstance(content, bytes):
        raw = content
    elif isinstance(content, str):
        raw = content.encode()
    else:
        raw = json.dumps(content).encode()
    digest = hashlib.sha256(raw).hexdigest()
    return LockFile(path=path, raw=raw, mtime=mtime.timestamp(), sha256=digest)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(NOW)


def alive(pid: int, started_seconds_ago: float = 3600.0) -> ProcessFacts:
    return ProcessFacts(
        pid=pid, alive=True, started_at=ago(started_seconds_ago), cmdline=("worker",), user="op"
    )


@pytest.fixture
def processes() -> StaticProcesses:
    """pid 100 runs since an hour ago; everything else is dead."""
    return StaticProcesses(alive(100))


def run_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`lockwatch ARGS` in-process: exit code, stdout, stderr. A crash is re-raised."""
    from click.testing import CliRunner

    from lockwatch.cli import cli

    result = CliRunner(env=env).invoke(cli, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def forked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids of the children `lockwatch.fanout` forks during the test, in order."""
    pids: list[int] = []
    real_fork = os.fork

    def recording_fork() -> int:
        pid = real_fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr("lockwatch.fanout.os.fork", recording_fork)
    return pids


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory any user may enter (pytest's tmp_path is root's alone): for a
    feed run as another user."""
    top = Path(tempfile.mkdtemp(prefix="lockwatch-open-"))
    top.chmod(0o755)
    try:
        yield top
    finally:
        for directory, _, _ in os.walk(top):
            with contextlib.suppress(OSError):
                os.chmod(directory, 0o755)
        shutil.rmtree(top, ignore_errors=True)


async def stop_feed(feed: Feed, task: asyncio.Task[None]) -> None:
    """Close `feed` and cancel the task running it; a feed that failed raises here."""
    await feed.close()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def pytest_sessionstart(session: pytest.Session) -> None:
    """Every source's record types known to the codec, as a recording run has
    them (each plugin registers its own when it loads): a test that encodes a
    lock file's or a server's facts must not depend on which test loaded that
    plugin first in its worker."""
    from lockwatch.sources.recording import know_sources

    know_sources()
