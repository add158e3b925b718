"""Process facts from the real process table."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest

from lockwatch.model.process import ProcessFacts
from lockwatch.sources.processes import (
    MAX_ANCESTORS,
    HostProcesses,
    _pid_namespaces,
    read_cmdline,
)


def test_own_process_is_alive_with_facts() -> None:
    facts = HostProcesses().facts(os.getpid())
    assert facts.alive is True
    assert facts.started_at is not None
    assert facts.started_at <= datetime.now(UTC)
    assert facts.cmdline and "python" in facts.cmdline[0]
    assert facts.user


def test_exited_and_reaped_process_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert HostProcesses().facts(child.pid).alive is False


def test_zombie_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    # Block until it exits but leave it unreaped (WNOWAIT): a zombie, with no sleeps.
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    try:
        assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
        assert HostProcesses().facts(child.pid).alive is False
    finally:
        child.wait()


def test_impossible_pids_are_dead_not_errors() -> None:
    table = HostProcesses()
    for pid in (0, -5, 2**31 - 1, 2**32 - 1, 2**40):
        assert table.facts(pid).alive is False


def test_facts_are_cached_per_table() -> None:
    table = HostProcesses()
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
    found = HostProcesses().host_pid(os.getpid(), namespace)
    assert found.namespace_here is True and found.pid == os.getpid()


# --- the /proc readings against psutil's, which they replace ----------------------


def psutil_facts(pid: int) -> ProcessFacts:
    """`pid`'s facts as lockwatch read them through psutil before it read /proc
    itself: the reference every reading must still match."""
    dead = ProcessFacts(pid, False)
    try:
        process = psutil.Process(pid)
        with process.oneshot():
            if process.status() == psutil.STATUS_ZOMBIE:
                return dead
            started = datetime.fromtimestamp(process.create_time(), tz=UTC)
            try:
                cmdline = tuple(process.cmdline())
            except psutil.AccessDenied:
                cmdline = ()
            try:
                user: str | None = process.username()
            except psutil.AccessDenied:
                user = None
            parent = process.ppid()
    except (psutil.NoSuchProcess, ValueError, OverflowError):
        return dead
    except psutil.AccessDenied:
        return ProcessFacts(pid=pid, alive=True)
    chain: list[int] = []
    while parent > 0 and parent not in chain and len(chain) < MAX_ANCESTORS:
        chain.append(parent)
        try:
            parent = psutil.Process(parent).ppid()
        except (psutil.Error, ValueError):
            break
    with open(f"/proc/{pid}/stat", "rb") as handle:
        ticks = int(handle.read().rsplit(b")", 1)[1].split()[19])
    return ProcessFacts(
        pid=pid,
        alive=True,
        started_at=started,
        cmdline=cmdline,
        user=user,
        ancestors=tuple(chain),
        start_ticks=ticks,
        boot_time=psutil.boot_time(),
    )


def test_facts_match_psutils_for_every_live_process() -> None:
    """Every process here, a zombie, kernel threads and a command line with
    spaces, tabs, a CR-LF and an empty argument among them."""
    odd = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", "a b", "\tc", "d\r\ne", ""],
        stdin=subprocess.PIPE,
    )
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
    try:
        compared = [_compared(pid) for pid in psutil.pids()]
    finally:
        assert odd.stdin is not None
        odd.stdin.close()
        odd.wait()
        zombie.wait()
    by_pid = {facts.pid: facts for facts in compared}
    assert by_pid[zombie.pid].alive is False
    assert by_pid[odd.pid].cmdline[3:] == ("a b", "\tc", "d\ne", "")  # psutil's newlines
    kernel_threads = [f for f in compared if f.alive and not f.cmdline and 2 in f.ancestors]
    assert kernel_threads or not Path("/proc/2").exists()
    assert len([f for f in compared if f.alive and f.cmdline]) > 3


def _compared(pid: int) -> ProcessFacts:
    """Our facts of `pid`, once they equal psutil's; a process that exited or
    changed between the two readings is read again."""
    for _ in range(3):
        ours, theirs = HostProcesses().facts(pid), psutil_facts(pid)
        if ours == theirs:
            return ours
    assert ours == theirs
    return ours


@pytest.mark.parametrize(
    "raw",
    [
        b"/bin/sh\0-c\0echo hi\0",
        b"chrome --type=renderer --lang=en",  # a rewritten title: spaces, no NUL
        b"nginx: worker process\0",  # one NUL-ended argument holding spaces
        b"a\0b",  # no NUL at the end: split by space
        b"a b \0",
        b"x\0\0",
        b"\0",
        b" ",
        b"caf\xc3\xa9\0\xff\xfe\0",  # UTF-8 and bytes that are not
        b"cr\r\nlf\rx\0",
    ],
)
def test_command_lines_are_split_as_psutil_splits_them(
    raw: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "cmdline").write_bytes(raw)
    monkeypatch.setattr(psutil, "PROCFS_PATH", str(tmp_path))
    from psutil import _pslinux

    assert read_cmdline(7, str(tmp_path)) == tuple(_pslinux.Process(7).cmdline())


def test_an_empty_command_line_is_a_kernel_threads() -> None:
    if not Path("/proc/2/stat").exists():
        return
    assert read_cmdline(2) == () == tuple(psutil.Process(2).cmdline())
