"""Process facts from the real process table."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import psutil

from lockwatch.sources.processes import PsutilProcesses, _pid_namespaces


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


def fake_proc(root: Path, *processes: tuple[int, str | None, str]) -> str:
    """A /proc of (pid, its ns/pid link or None for an unreadable one, NSpid columns)."""
    for pid, link, nspid in processes:
        (root / str(pid) / "ns").mkdir(parents=True)
        (root / str(pid) / "status").write_text(f"Name:\tx\nNSpid:\t{nspid}\n")
        if link is not None:
            (root / str(pid) / "ns" / "pid").symlink_to(link)
        else:
            (root / str(pid) / "ns" / "pid").mkdir()  # readlink fails, not with EACCES
    return str(root)


def test_pid_namespaces_map_each_namespaces_pids_to_ours(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        assert _pid_namespaces() is None  # other users' processes may be hidden
        return
    proc = fake_proc(
        tmp_path, (10, "pid:[100]", "10"), (20, "pid:[200]", "20\t1"), (21, "pid:[200]", "21\t7")
    )
    assert _pid_namespaces(proc) == {100: {10: 10}, 200: {1: 20, 7: 21}}


def test_pid_namespaces_of_an_unreadable_process_in_a_container_cannot_be_told(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        return
    proc = fake_proc(tmp_path, (10, "pid:[100]", "10"), (20, None, "20\t1"))
    assert _pid_namespaces(proc) is None
    assert _pid_namespaces(str(tmp_path / "none")) is None


def test_a_real_process_is_found_in_its_own_pid_namespace() -> None:
    if os.geteuid() != 0:
        return
    namespace = os.stat("/proc/self/ns/pid").st_ino
    found = PsutilProcesses().host_pid(os.getpid(), namespace)
    assert found.namespace_here is True and found.pid == os.getpid()
