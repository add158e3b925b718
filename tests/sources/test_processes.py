"""Process facts from the real process table."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime

import psutil

from lockwatch.sources.processes import PsutilProcesses


def test_own_process_is_alive_with_facts() -> None:
    facts = PsutilProcesses().facts(os.getpid())
    assert facts.alive is True
    assert facts.started_at is not None
    assert facts.started_at <= datetime.now(UTC)
    assert facts.cmdline and "python" in facts.cmdline[0]
    assert facts.user


def test_exited_and_reaped_process_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert PsutilProcesses().facts(child.pid).alive is False


def test_zombie_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    # Block until it exits but leave it unreaped (WNOWAIT): a zombie, with no sleeps.
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    try:
        assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
        assert PsutilProcesses().facts(child.pid).alive is False
    finally:
        child.wait()


def test_impossible_pids_are_dead_not_errors() -> None:
    table = PsutilProcesses()
    for pid in (0, -5, 2**31 - 1, 2**32 - 1, 2**40):
        assert table.facts(pid).alive is False


def test_facts_are_cached_per_table() -> None:
    table = PsutilProcesses()
    assert table.facts(os.getpid()) is table.facts(os.getpid())
