"""Process facts from psutil, cached per pid for the life of one lookup table."""

from __future__ import annotations

from datetime import UTC, datetime

import psutil

from lockwatch.model.process import ProcessFacts

# Ancestry is walked this far up at most (a fork bomb's chain must not cost much).
MAX_ANCESTORS = 64


class PsutilProcesses:
    """Answers `facts(pid)` for this host. One instance per scan or tick, so a pid
    asked about by many locks costs one look, and a later tick sees fresh facts.

    Create it after the lock files were read: the pid list it takes on first use
    then includes every holder that was alive when its lock was read (a process
    writes its lock after it starts), so "not listed" means dead.
    """

    def __init__(self) -> None:
        self._cache: dict[int, ProcessFacts] = {}
        self._users: dict[int, str | None] = {}
        self._running: frozenset[int] | None = None

    def _is_running(self, pid: int) -> bool:
        # One listing of /proc instead of a kill(pid, 0) per pid: with thousands of
        # stale locks the syscalls add up.
        if self._running is None:
            self._running = frozenset(psutil.pids())
        return pid in self._running

    def facts(self, pid: int) -> ProcessFacts:
        cached = self._cache.get(pid)
        if cached is None:
            cached = self._cache[pid] = self._look(pid)
        return cached

    def _look(self, pid: int) -> ProcessFacts:
        dead = ProcessFacts(pid=pid, alive=False)
        try:
            if pid <= 0 or not self._is_running(pid):
                return dead
            process = psutil.Process(pid)
            with process.oneshot():
                if process.status() == psutil.STATUS_ZOMBIE:
                    return dead  # exited; only its parent has not reaped it
                started = datetime.fromtimestamp(process.create_time(), tz=UTC)
                try:
                    cmdline = tuple(process.cmdline())
                except psutil.AccessDenied:
                    cmdline = ()
                user = self._user(process)
                parent = process.ppid()
        except (psutil.NoSuchProcess, ValueError, OverflowError):
            return dead
        except psutil.AccessDenied:
            # It is listed in /proc, but hides its details from us.
            return ProcessFacts(pid=pid, alive=True)
        return ProcessFacts(
            pid=pid,
            alive=True,
            started_at=started,
            cmdline=cmdline,
            user=user,
            ancestors=_ancestors(parent),
            start_ticks=_start_ticks(pid),
            boot_time=_boot_time(),
        )

    def _user(self, process: psutil.Process) -> str | None:
        try:
            uid = process.uids().real
        except psutil.AccessDenied:
            return None
        if uid not in self._users:
            try:
                self._users[uid] = process.username()
            except (psutil.AccessDenied, KeyError):
                self._users[uid] = str(uid)
        return self._users[uid]


def _ancestors(parent: int) -> tuple[int, ...]:
    chain: list[int] = []
    while parent > 0 and parent not in chain and len(chain) < MAX_ANCESTORS:
        chain.append(parent)
        try:
            parent = psutil.Process(parent).ppid()
        except (psutil.Error, ValueError):
            break
    return tuple(chain)


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (after the command, which may hold spaces
    and parentheses: counted from the last ")")."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read()
        fields = text[text.rindex(b")") + 2 :].split()
        return int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _boot_time() -> float | None:
    try:
        return float(psutil.boot_time())
    except (OSError, RuntimeError):
        return None
